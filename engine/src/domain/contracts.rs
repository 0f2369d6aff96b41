//! Output contracts and certifications (invariant 6).

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use serde_json::Value;
use uuid::Uuid;

use super::Engine;
use crate::error::{EngineError, StoreError};
use crate::model::{Certification, Contract, Scope};
use crate::request::{canonical_json, sha256_hex};
use crate::store::NewCertification;
use onceflow_protocol::api::{ContractSummary, ProviderCertification};

/// Compiled validators by contract hash. A hash names one schema forever, so entries
/// never go stale.
#[derive(Default)]
pub(crate) struct ValidatorCache {
    compiled: DashMap<String, Arc<jsonschema::Validator>>,
}

impl ValidatorCache {
    fn get_or_compile(
        &self,
        contract: &Contract,
    ) -> Result<Arc<jsonschema::Validator>, EngineError> {
        if let Some(v) = self.compiled.get(&contract.contract_hash) {
            return Ok(v.clone());
        }
        let validator = jsonschema::validator_for(&contract.output_schema).map_err(|e| {
            EngineError::Internal(StoreError::Corrupt(format!(
                "stored contract {} does not compile: {e}",
                contract.contract_hash
            )))
        })?;
        let validator = Arc::new(validator);
        self.compiled
            .insert(contract.contract_hash.clone(), validator.clone());
        Ok(validator)
    }

    /// Every way `result` fails the contract (empty when it satisfies it).
    pub(crate) fn violations(
        &self,
        contract: &Contract,
        result: &Value,
    ) -> Result<Vec<String>, EngineError> {
        let validator = self.get_or_compile(contract)?;
        Ok(validator
            .iter_errors(result)
            .take(20)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect())
    }
}

/// The hash naming an output schema: SHA-256 of its canonical JSON.
pub fn contract_hash(output_schema: &Value) -> String {
    sha256_hex(canonical_json(output_schema).as_bytes())
}

impl Engine {
    /// Registers (or confirms) the output contract of `activity` for `owner` and returns
    /// its hash. The most recently registered contract is the current one: a new schema
    /// gives a new hash, and certifications for the old hash no longer count.
    pub async fn register_contract(
        &self,
        owner: &str,
        activity: &str,
        output_schema: &Value,
    ) -> Result<String, EngineError> {
        if activity.is_empty() {
            return Err(EngineError::invalid_request("activity: must not be empty"));
        }
        if !output_schema.is_object() && !output_schema.is_boolean() {
            return Err(EngineError::invalid_request(
                "output_schema: must be a JSON Schema (an object)",
            ));
        }
        let validator = jsonschema::validator_for(output_schema).map_err(|e| {
            EngineError::invalid_request(format!("output_schema: not a valid JSON Schema: {e}"))
        })?;
        let contract = Contract {
            owner: owner.to_owned(),
            activity: activity.to_owned(),
            contract_hash: contract_hash(output_schema),
            output_schema: output_schema.clone(),
        };
        self.store.register_contract(&contract).await?;
        self.contracts
            .compiled
            .insert(contract.contract_hash.clone(), Arc::new(validator));
        tracing::info!(owner, activity, contract_hash = %contract.contract_hash, "output contract registered");
        Ok(contract.contract_hash)
    }

    /// Records a certification run of `provider` for `activity` against a contract hash.
    /// Only the latest certification of a provider for the current hash counts: latest by
    /// the database's clock, which stamps each run as it is written, so engines whose
    /// clocks disagree cannot reorder a pass and a fail.
    pub async fn record_certification(
        &self,
        owner: &str,
        activity: &str,
        provider: &str,
        contract_hash: &str,
        passed: bool,
        report: Value,
    ) -> Result<Certification, EngineError> {
        for (field, value) in [
            ("activity", activity),
            ("provider", provider),
            ("contract_hash", contract_hash),
        ] {
            if value.is_empty() {
                return Err(EngineError::invalid_request(format!(
                    "{field}: must not be empty"
                )));
            }
        }
        let certification = self
            .store
            .insert_certification(&NewCertification {
                id: Uuid::now_v7(),
                owner: owner.to_owned(),
                activity: activity.to_owned(),
                provider: provider.to_owned(),
                contract_hash: contract_hash.to_owned(),
                passed,
                report,
            })
            .await?;
        if passed {
            tracing::info!(
                owner,
                activity,
                provider,
                contract_hash,
                "provider certified"
            );
        } else {
            tracing::warn!(
                owner,
                activity,
                provider,
                contract_hash,
                "provider certification failed: failover to it is blocked"
            );
        }
        Ok(certification)
    }
}

impl Engine {
    /// The output contracts visible in `scope`, by owner and activity with the current
    /// contract first, each with the certification of each provider that counts for it:
    /// the provider's latest run against that hash by the contract's owner, else by `*`
    /// (as failover judges it). A single-owner scope sees its own contracts and those of
    /// `*`, which its jobs fall back on.
    pub async fn contracts(&self, scope: &Scope) -> Result<Vec<ContractSummary>, EngineError> {
        let owners = scope.owner().map(|o| {
            if o == "*" {
                vec![o.to_owned()]
            } else {
                vec![o.to_owned(), "*".to_owned()]
            }
        });
        let records = self.store.list_contracts(owners.as_deref()).await?;
        let mut certifications: HashMap<(String, String, String), Vec<Certification>> =
            HashMap::new();
        for c in self.store.latest_certifications(owners.as_deref()).await? {
            certifications
                .entry((c.owner.clone(), c.activity.clone(), c.contract_hash.clone()))
                .or_default()
                .push(c);
        }
        let mut seen_current = std::collections::HashSet::new();
        let mut summaries = Vec::with_capacity(records.len());
        for record in records {
            let contract = record.contract;
            // Records come newest first per (owner, activity): the first is the current one.
            let current = seen_current.insert((contract.owner.clone(), contract.activity.clone()));
            let key = |owner: &str| {
                (
                    owner.to_owned(),
                    contract.activity.clone(),
                    contract.contract_hash.clone(),
                )
            };
            let own = certifications
                .get(&key(&contract.owner))
                .cloned()
                .unwrap_or_default();
            let platform = if contract.owner == "*" {
                Vec::new()
            } else {
                certifications.get(&key("*")).cloned().unwrap_or_default()
            };
            let mut by_provider: Vec<ProviderCertification> = own
                .iter()
                .chain(
                    platform
                        .iter()
                        .filter(|p| !own.iter().any(|o| o.provider == p.provider)),
                )
                .map(|c| ProviderCertification {
                    provider: c.provider.clone(),
                    passed: c.passed,
                    report: c.report.clone(),
                    recorded_at: c.created_at,
                })
                .collect();
            by_provider.sort_by(|a, b| a.provider.cmp(&b.provider));
            summaries.push(ContractSummary {
                owner: contract.owner,
                activity: contract.activity,
                contract_hash: contract.contract_hash,
                output_schema: contract.output_schema,
                created_at: record.registered_at,
                current,
                certifications: by_provider,
            });
        }
        Ok(summaries)
    }
}
