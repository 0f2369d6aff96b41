//! `--workload heartbeat`: held attempts renewed over HTTP, one caller per attempt.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use onceflow_protocol::api::{
    HeartbeatRequest, HeartbeatResponse, PollRequest, PollResponse, ProviderPair,
};
use onceflow_protocol::workflow::Task;
use serde::Serialize;

use super::batches::batch_report;
use super::{Bench, PROVIDER, STALL};

impl Bench {
    /// Holds `--concurrency` attempts (claimed over HTTP, as a worker would) and renews
    /// their leases: one caller per attempt, each heartbeating in a loop, `--jobs`
    /// heartbeats in all, every one answered `200` without `cancel_requested`.
    pub(super) async fn heartbeat(&self) -> Result<(), String> {
        let names = self.names("heartbeat");
        let held = self.concurrency;
        let (created, _) = self.produce(&names, held as u64, 1).await?;
        if created != held as u64 {
            return Err(format!(
                "heartbeat: expected {held} new jobs, {created} were created"
            ));
        }
        let mut tasks = Vec::with_capacity(held);
        let deadline = Instant::now() + STALL;
        while tasks.len() < held {
            if Instant::now() > deadline {
                return Err(format!(
                    "heartbeat: only {} of {held} attempts were handed out",
                    tasks.len()
                ));
            }
            let poll = PollRequest {
                worker_id: format!("bench-{}-heartbeat", self.run_id),
                task_queue: names.queue.clone(),
                workflows: Vec::new(),
                providers: vec![ProviderPair {
                    activity: names.activity.clone(),
                    provider: PROVIDER.to_owned(),
                }],
                max_tasks: (held - tasks.len()).min(100) as u32,
                wait_ms: 1_000,
                completions: Vec::new(),
            };
            let answer: PollResponse = self.worker_call("/v1/worker/poll", &poll).await?;
            tasks.extend(answer.tasks.into_iter().filter_map(|t| match t {
                Task::Activity(task) => Some(task),
                Task::Workflow(_) => None,
            }));
        }
        let batches_before = self.batch_totals().await;
        let next = Arc::new(AtomicU64::new(0));
        let n = self.jobs;
        let start = Instant::now();
        let callers = tasks.into_iter().map(|task| {
            let next = next.clone();
            async move {
                let path = format!("/v1/worker/attempts/{}/heartbeat", task.attempt_id);
                let body = HeartbeatRequest {
                    lease_token: task.lease_token,
                    details: None,
                };
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let ack: HeartbeatResponse = self.worker_call(&path, &body).await?;
                    if ack.cancel_requested {
                        return Err(format!(
                            "heartbeat: attempt {} answered cancel_requested",
                            task.attempt_id
                        ));
                    }
                }
                Ok::<(), String>(())
            }
        });
        futures::future::try_join_all(callers).await?;
        let elapsed = start.elapsed();
        let batches = batch_report(&batches_before, &self.batch_totals().await);
        let rate = self.result(
            "heartbeat",
            n,
            elapsed,
            &format!(" attempts={held}{batches}"),
        );
        eprintln!(
            "bench heartbeat: {n} heartbeats over HTTP renewing {held} held attempts (one caller each) in {:.3} s: {rate:.1}/s",
            elapsed.as_secs_f64()
        );
        Ok(())
    }

    /// A worker endpoint called with the worker token; any answer but `200` fails the run.
    async fn worker_call<B: Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, String> {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.worker_token)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(format!("POST {path}: {status}: {text}"));
        }
        response
            .json::<T>()
            .await
            .map_err(|e| format!("POST {path}: unreadable answer: {e}"))
    }
}
