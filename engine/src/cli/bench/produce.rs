//! The producers every workload submits with, and the count of a workload's jobs read
//! back over `GET /v1/jobs`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{job_body, Bench, Names};

impl Bench {
    /// `submits` submissions by `concurrency` producers, producer `p` talking to server
    /// `p mod servers`; submission `i` uses key `i / per_key`, so consecutive submissions
    /// of one key run at the same time on two producers (on two servers, if there are
    /// several). Returns (created, replayed).
    pub(super) async fn produce(
        &self,
        names: &Names,
        submits: u64,
        per_key: u64,
    ) -> Result<(u64, u64), String> {
        let clients = self.clients()?;
        let next = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let created = Arc::new(AtomicU64::new(0));
        let replayed = Arc::new(AtomicU64::new(0));
        let mut producers = Vec::with_capacity(self.concurrency);
        for p in 0..self.concurrency {
            let (client, names, next, stop, created, replayed) = (
                clients[p % clients.len()].clone(),
                names.clone(),
                next.clone(),
                stop.clone(),
                created.clone(),
                replayed.clone(),
            );
            producers.push(tokio::spawn(async move {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= submits {
                        return Ok(());
                    }
                    let k = i / per_key;
                    let key = format!("{}{k}", names.key_prefix);
                    match client.submit(&key, &job_body(&names, k)).await {
                        Ok(answer) if answer.replayed => replayed.fetch_add(1, Ordering::Relaxed),
                        Ok(_) => created.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            return Err(format!("submitting `{key}` failed: {e}"));
                        }
                    };
                }
            }));
        }
        let mut first_error = None;
        for producer in producers {
            let outcome = match producer.await {
                Ok(outcome) => outcome,
                Err(e) => Err(format!("a producer task failed: {e}")),
            };
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok((
                created.load(Ordering::Relaxed),
                replayed.load(Ordering::Relaxed),
            )),
        }
    }

    /// Counts the jobs of `names.activity` (of `names.workflow`, for workflow jobs; in
    /// `status`, if given) whose key is one of the first `keys` keys of the workload,
    /// paging through `GET /v1/jobs`. Returns (matching, listed). A succeeded workflow
    /// job of the workload whose result is not the one its key calls for is an error.
    pub(super) async fn count_jobs(
        &self,
        names: &Names,
        status: Option<&str>,
        keys: u64,
    ) -> Result<(u64, u64), String> {
        let mut matching = HashSet::new();
        let mut listed = 0u64;
        let mut after: Option<String> = None;
        loop {
            let mut query = vec![match &names.workflow {
                Some(workflow) => ("workflow", workflow.clone()),
                None => ("activity", names.activity.clone()),
            }];
            query.push(("limit", "500".to_owned()));
            if let Some(status) = status {
                query.push(("status", status.to_owned()));
            }
            if let Some(after) = &after {
                query.push(("after", after.clone()));
            }
            let query =
                serde_urlencoded::to_string(&query).map_err(|e| format!("list query: {e}"))?;
            let url = format!("{}/v1/jobs?{query}", self.url);
            let response = self
                .http
                .get(&url)
                .bearer_auth(&self.client_token)
                .timeout(Duration::from_secs(60))
                .send()
                .await
                .map_err(|e| format!("cannot list jobs at {url}: {e}"))?;
            let code = response.status();
            let body: Value = response
                .json()
                .await
                .map_err(|e| format!("listing jobs answered {code} without JSON: {e}"))?;
            if !code.is_success() {
                return Err(format!("listing jobs answered {code}: {body}"));
            }
            let jobs = body["jobs"]
                .as_array()
                .ok_or_else(|| format!("listing jobs: no `jobs` in {body}"))?;
            for job in jobs {
                listed += 1;
                let key = job["idempotency_key"].as_str().unwrap_or_default();
                let number = key
                    .strip_prefix(&names.key_prefix)
                    .and_then(|k| k.parse::<u64>().ok())
                    .filter(|k| *k < keys);
                if let (Some(n), Some(_)) = (number, &names.workflow) {
                    if job["status"] == "succeeded" {
                        check_workflow_result(n, job)?;
                    }
                }
                if number.is_some() {
                    matching.insert(job["id"].as_str().unwrap_or(key).to_owned());
                }
            }
            match body["next"].as_str() {
                Some(next) if !jobs.is_empty() => after = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok((matching.len() as u64, listed))
    }
}

/// The result of the bench's workflow for job number `n`: `{"n": n, "steps": 3}`.
fn check_workflow_result(n: u64, job: &Value) -> Result<(), String> {
    let expected = super::workflow::Output {
        n,
        steps: super::workflow::STEPS,
    };
    let result = serde_json::from_value::<super::workflow::Output>(job["result"].clone());
    match result {
        Ok(output) if output == expected => Ok(()),
        _ => Err(format!(
            "workflow job {} (number {n}) succeeded with result {}, not {}",
            job["id"],
            job["result"],
            serde_json::json!(expected)
        )),
    }
}
