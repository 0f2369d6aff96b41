//! `impl Store for SqliteStore`: what runs outside a caller's transaction.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::Row;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::clock::*;
use super::decode::*;
use super::queries::*;
use super::tx::SqliteTx;
use super::views::*;
use super::{SqliteStore, MIGRATOR};
use crate::error::StoreError;
use crate::model::{
    ActivityOptions, Certification, Contract, JobEvent, JobView, Role, ScheduleEvent, Scope,
    StuckAttempt,
};
use crate::store::*;

#[async_trait]
impl Store for SqliteStore {
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx>> {
        Ok(Box::new(self.write().await?))
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query(PING_SQL).execute(&self.pool).await?;
        Ok(())
    }

    async fn locate_attempt(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<AttemptLocation>> {
        let row = sqlx::query(LOCATE_ATTEMPT_SQL)
            .bind(attempt_id.to_string())
            .bind(scope.owner())
            .bind(scope.owner())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(AttemptLocation {
                owner_id: r.try_get("owner_id")?,
                job_id: uid(&r, "job_id")?,
            })
        })
        .transpose()
    }

    async fn job_owner(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(JOB_OWNER_SQL)
            .bind(job_id.to_string())
            .bind(scope.owner())
            .bind(scope.owner())
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn job_signals(&self, owner: &str, job_id: Uuid) -> StoreResult<Vec<SignalRow>> {
        let rows = sqlx::query(SIGNALS_OF_JOB_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(signal_row).collect()
    }

    async fn open_children_of_cancelled_parents(
        &self,
        limit: i64,
    ) -> StoreResult<Vec<(String, Uuid)>> {
        let rows = sqlx::query(OPEN_CHILDREN_OF_CANCELLED_PARENTS_SQL)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "id")?)))
            .collect()
    }

    async fn job_view(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<JobView>> {
        let row = sqlx::query(JOB_VIEW_SQL)
            .bind(job_id.to_string())
            .bind(scope.owner())
            .bind(scope.owner())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(assemble_views(&self.pool, vec![job_row(&row)?])
            .await?
            .pop())
    }

    /// No one-statement replay: the domain composes it from a transaction.
    async fn replay_now(&self, _replays: &[NewReplay]) -> StoreResult<Option<Vec<ReplayedJob>>> {
        Ok(None)
    }

    async fn views_of(&self, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
        assemble_views(&self.pool, jobs).await
    }

    async fn job_events(
        &self,
        scope: &Scope,
        job_id: Uuid,
        after_seq: i64,
        limit: Option<i64>,
    ) -> StoreResult<Option<Vec<JobEvent>>> {
        let Some(owner) = self.job_owner(scope, job_id).await? else {
            return Ok(None);
        };
        let rows = sqlx::query(JOB_EVENTS_SQL)
            .bind(&owner)
            .bind(job_id.to_string())
            .bind(after_seq)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(JobEvent {
                    seq: r.try_get("seq")?,
                    at: req_ts(r, "at")?,
                    kind: r.try_get("type")?,
                    attempt_id: opt_uid(r, "attempt_id")?,
                    actor: r.try_get("actor")?,
                    data: json(r, "data")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()
            .map(Some)
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobView>> {
        let before = query.before_id.map(|id| id.to_string());
        let rows = sqlx::query(LIST_JOBS_SQL)
            .bind(query.owner.as_deref())
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.workflow.as_deref())
            .bind(query.activity.as_deref())
            .bind(before)
            .bind(query.limit)
            .bind(query.created_after.map(|t| t.timestamp_micros()))
            .bind(query.created_before.map(|t| t.timestamp_micros()))
            .fetch_all(&self.pool)
            .await?;
        let jobs = rows.iter().map(job_row).collect::<StoreResult<Vec<_>>>()?;
        assemble_views(&self.pool, jobs).await
    }

    async fn list_contracts(&self, owners: Option<&[String]>) -> StoreResult<Vec<ContractRecord>> {
        let owners = owners.map(|o| text(&o)).transpose()?;
        let rows = sqlx::query(LIST_CONTRACTS_SQL)
            .bind(owners)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ContractRecord {
                    contract: Contract {
                        owner: r.try_get("owner_id")?,
                        activity: r.try_get("activity")?,
                        contract_hash: r.try_get("contract_hash")?,
                        output_schema: json(r, "output_schema")?,
                    },
                    registered_at: req_ts(r, "registered_at")?,
                })
            })
            .collect()
    }

    async fn latest_certifications(
        &self,
        owners: Option<&[String]>,
    ) -> StoreResult<Vec<Certification>> {
        let owners = owners.map(|o| text(&o)).transpose()?;
        let rows = sqlx::query(LATEST_CERTIFICATIONS_SQL)
            .bind(owners)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(certification_row).collect()
    }

    async fn stuck_attempts(&self, query: &StuckQuery) -> StoreResult<Vec<StuckAttempt>> {
        let statuses: Vec<&str> = query
            .statuses
            .iter()
            .map(|s| s.as_str())
            .filter(|s| *s == "started" || *s == "unknown")
            .collect();
        let cutoff = now_us() - (query.older_than_s as i64).saturating_mul(1_000_000);
        let rows = sqlx::query(STUCK_ATTEMPTS_SQL)
            .bind(text(&statuses)?)
            .bind(cutoff)
            .bind(query.limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let attempt = attempt_row(r)?;
                Ok(StuckAttempt {
                    attempt: attempt.view(),
                    job_id: attempt.job_id,
                    owner: attempt.owner_id.clone(),
                    activity: attempt.activity.clone(),
                    since: req_ts(r, "since")?,
                })
            })
            .collect()
    }

    async fn live_attempt_counts(&self) -> StoreResult<(Vec<(String, i64)>, i64)> {
        let rows = sqlx::query(LIVE_ATTEMPTS_BY_STATUS_SQL)
            .fetch_all(&self.pool)
            .await?;
        let live = rows
            .iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let oldest: Option<i64> = sqlx::query_scalar(OLDEST_UNKNOWN_AGE_SQL)
            .fetch_one(&self.pool)
            .await?;
        Ok((
            live,
            oldest.map_or(0, |us| ((now_us() - us) / 1_000_000).max(0)),
        ))
    }

    async fn extend_lease(
        &self,
        location: &AttemptLocation,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<LeaseExtension> {
        let mut tx = self.write().await?;
        let extended = extend_lease_in(
            &mut tx,
            Some(&location.owner_id),
            attempt_id,
            token,
            details,
        )
        .await?;
        Box::new(tx).commit().await?;
        Ok(if extended {
            LeaseExtension::Extended
        } else {
            LeaseExtension::NotExtended
        })
    }

    async fn prune_schedule_events(&self, retention: Duration, limit: i64) -> StoreResult<u64> {
        let mut tx = self.write().await?;
        let cutoff = tx
            .now
            .saturating_sub(i64::try_from(retention.as_micros()).unwrap_or(i64::MAX));
        let deleted = sqlx::query(PRUNE_SCHEDULE_EVENTS_SQL)
            .bind(cutoff)
            .bind(limit)
            .execute(&mut *tx.tx)
            .await?;
        Box::new(tx).commit().await?;
        Ok(deleted.rows_affected())
    }

    async fn prune_finished_jobs(
        &self,
        retention: Duration,
        limit: i64,
        after: Option<Uuid>,
    ) -> StoreResult<PrunedJobs> {
        // One write transaction: nothing else writes while the jobs are chosen and deleted.
        let mut tx = self.write().await?;
        let cutoff = tx
            .now
            .saturating_sub(i64::try_from(retention.as_micros()).unwrap_or(i64::MAX));
        // Job ids are UUIDv7: "created before the cutoff" is an id range on jobs_id_unique.
        let bound = Uuid::from_u128(u128::from(u64::try_from(cutoff / 1000).unwrap_or(0)) << 80)
            .to_string();
        let doomed: Vec<(String, String)> = sqlx::query_as(PRUNABLE_JOBS_SQL)
            .bind(bound)
            .bind(after.map(|a| a.to_string()))
            .bind(after.map(|a| a.to_string()))
            .bind(cutoff)
            .bind(limit)
            .fetch_all(&mut *tx.tx)
            .await?;
        if doomed.is_empty() {
            return Ok(PrunedJobs::default());
        }
        let last = doomed
            .iter()
            .map(|(_, id)| id)
            .max()
            .map(|id| Uuid::parse_str(id))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("jobs.id: {e}")))?;
        let doomed_json = serde_json::Value::from(
            doomed
                .iter()
                .map(|(o, i)| vec![o.clone(), i.clone()])
                .collect::<Vec<_>>(),
        )
        .to_string();
        for delete in [
            DELETE_PRUNED_ATTEMPTS_SQL,
            DELETE_PRUNED_ACTIVITIES_SQL,
            DELETE_PRUNED_JOB_EVENTS_SQL,
            DELETE_PRUNED_TIMERS_SQL,
            DELETE_PRUNED_SIGNALS_SQL,
            DELETE_PRUNED_PATCHES_SQL,
            DELETE_PRUNED_JOB_ROWS_SQL,
        ] {
            sqlx::query(delete)
                .bind(&doomed_json)
                .execute(&mut *tx.tx)
                .await?;
        }
        Box::new(tx).commit().await?;
        // One writer: every job chosen is deleted.
        Ok(PrunedJobs {
            deleted: doomed.len() as u64,
            chosen: doomed.len() as u64,
            last,
        })
    }

    async fn extend_leases(&self, renewals: &[LeaseRenewal]) -> StoreResult<Vec<bool>> {
        // One write transaction, one commit, for all of them; each fenced on its own.
        let mut tx = self.write().await?;
        let mut extended = Vec::with_capacity(renewals.len());
        for r in renewals {
            extended.push(
                extend_lease_in(
                    &mut tx,
                    r.owner.as_deref(),
                    r.attempt_id,
                    r.token,
                    r.details.as_ref(),
                )
                .await?,
            );
        }
        Box::new(tx).commit().await?;
        Ok(extended)
    }

    async fn register_contract(&self, contract: &Contract) -> StoreResult<()> {
        let mut tx = self.write().await?;
        sqlx::query(REGISTER_CONTRACT_SQL)
            .bind(&contract.owner)
            .bind(&contract.activity)
            .bind(&contract.contract_hash)
            .bind(contract.output_schema.to_string())
            .bind(tx.now)
            .execute(&mut *tx.tx)
            .await?;
        Box::new(tx).commit().await
    }

    async fn insert_certification(&self, c: &NewCertification) -> StoreResult<Certification> {
        let mut tx = self.write().await?;
        let created_at = tx.now;
        sqlx::query(INSERT_CERTIFICATION_SQL)
            .bind(&c.owner)
            .bind(c.id.to_string())
            .bind(&c.activity)
            .bind(&c.provider)
            .bind(&c.contract_hash)
            .bind(c.passed)
            .bind(c.report.to_string())
            .bind(created_at)
            .execute(&mut *tx.tx)
            .await?;
        Box::new(tx).commit().await?;
        Ok(Certification {
            id: c.id,
            owner: c.owner.clone(),
            activity: c.activity.clone(),
            provider: c.provider.clone(),
            contract_hash: c.contract_hash.clone(),
            passed: c.passed,
            report: c.report.clone(),
            created_at: ts(created_at),
        })
    }

    async fn insert_token(&self, token: &TokenRow) -> StoreResult<()> {
        let mut tx = self.write().await?;
        sqlx::query(INSERT_TOKEN_SQL)
            .bind(&token.owner_id)
            .bind(token.id.to_string())
            .bind(token.role.as_str())
            .bind(&token.token_hash)
            .bind(tx.now)
            .execute(&mut *tx.tx)
            .await?;
        Box::new(tx).commit().await
    }

    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRow>> {
        let row = sqlx::query(TOKEN_BY_HASH_SQL)
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let role: String = r.try_get("role")?;
            Ok(TokenRow {
                owner_id: r.try_get("owner_id")?,
                id: uid(&r, "id")?,
                role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
                token_hash: r.try_get("token_hash")?,
            })
        })
        .transpose()
    }

    async fn revoke_token(&self, token_id: Uuid) -> StoreResult<bool> {
        let mut tx = self.write().await?;
        let done = sqlx::query(REVOKE_TOKEN_SQL)
            .bind(tx.now)
            .bind(token_id.to_string())
            .execute(&mut *tx.tx)
            .await?;
        Box::new(tx).commit().await?;
        Ok(done.rows_affected() > 0)
    }

    async fn schedule(&self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>> {
        let row = sqlx::query(SCHEDULE_SQL)
            .bind(owner)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(schedule_row).transpose()
    }

    async fn list_schedules(&self, owner: &str) -> StoreResult<Vec<ScheduleRow>> {
        let rows = sqlx::query(LIST_SCHEDULES_SQL)
            .bind(owner)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn schedule_events(
        &self,
        owner: &str,
        name: &str,
        limit: i64,
    ) -> StoreResult<Vec<ScheduleEvent>> {
        let rows = sqlx::query(SCHEDULE_EVENTS_SQL)
            .bind(owner)
            .bind(name)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ScheduleEvent {
                    id: r.try_get("id")?,
                    at: req_ts(r, "at")?,
                    kind: r.try_get("type")?,
                    tick_at: opt_ts(r, "tick_at")?,
                    job_id: opt_uid(r, "job_id")?,
                    data: json(r, "data")?,
                })
            })
            .collect()
    }

    async fn next_schedule_fire(&self) -> StoreResult<NextScheduleFire> {
        let next: Option<i64> = sqlx::query_scalar(NEXT_SCHEDULE_FIRE_SQL)
            .fetch_one(&self.pool)
            .await?;
        Ok(NextScheduleFire {
            at: next.map(ts),
            now: ts(now_us()),
        })
    }

    async fn listen_for_work(&self, signal: Arc<Notify>, shutdown: CancellationToken) {
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.push(signal.clone());
        }
        shutdown.cancelled().await;
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.retain(|l| !Arc::ptr_eq(l, &signal));
        }
    }
}

/// The heartbeat fast path in `tx`: extends the lease of attempt `attempt_id` if it is
/// `started`, held by `token`, and of `owner` (any owner when `None`).
pub(super) async fn extend_lease_in(
    tx: &mut SqliteTx,
    owner: Option<&str>,
    attempt_id: Uuid,
    token: Uuid,
    details: Option<&Value>,
) -> StoreResult<bool> {
    let row = sqlx::query(LEASE_OF_STARTED_ATTEMPT_SQL)
        .bind(attempt_id.to_string())
        .bind(owner)
        .bind(owner)
        .bind(token.to_string())
        .fetch_optional(&mut *tx.tx)
        .await?;
    let Some(row) = row else { return Ok(false) };
    let owner_id: String = row.try_get("owner_id")?;
    let options: ActivityOptions = serde_json::from_value(json(&row, "options")?)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let started: i64 = row
        .try_get::<Option<i64>, _>("started_at")?
        .unwrap_or(tx.now);
    let done = sqlx::query(RENEW_STARTED_LEASE_SQL)
        .bind(tx.now)
        .bind(details.map(|d| d.to_string()))
        .bind(lease_until(&options, tx.now, started))
        .bind(&owner_id)
        .bind(attempt_id.to_string())
        .bind(token.to_string())
        .execute(&mut *tx.tx)
        .await?;
    Ok(done.rows_affected() == 1)
}
