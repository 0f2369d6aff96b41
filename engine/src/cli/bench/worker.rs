//! The SDK worker of a workload in this process: started, warmed up, watched, stopped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onceflow_worker::{ActivityContext, ActivityError, Client, Worker};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::{job_body, Bench, Names, Noop, WorkerTask, PROVIDER, STALL};

impl Bench {
    /// One job, so that the worker has registered its contract and is polling.
    pub(super) async fn warm_up(
        &self,
        client: &Client,
        names: &Names,
        worker: &Worker,
        task: &WorkerTask,
    ) -> Result<(), String> {
        submit_warm_up(client, names).await?;
        wait_won(worker, task, 1, Duration::from_millis(5)).await?;
        Ok(())
    }

    pub(super) fn start_worker(
        &self,
        names: &Names,
        max_concurrent: usize,
        probe: Option<mpsc::UnboundedSender<(Uuid, Instant)>>,
    ) -> Result<(Arc<Worker>, WorkerTask), String> {
        let worker = Worker::builder(self.url.clone(), self.worker_token.clone())
            .worker_id(format!("bench-{}-{}", self.run_id, names.workload))
            .task_queue(names.queue.clone())
            .max_concurrent_attempts(max_concurrent)
            .poll_wait(Duration::from_secs(1))
            .shutdown_grace(Duration::from_secs(10))
            .provider(
                &names.activity,
                PROVIDER,
                move |ctx: ActivityContext, _input: Value| {
                    let probe = probe.clone();
                    async move {
                        if let Some(probe) = probe {
                            let _ = probe.send((ctx.job_id(), Instant::now()));
                        }
                        Ok::<_, ActivityError>(Noop { ok: true })
                    }
                },
            )
            .build()
            .map_err(|e| format!("cannot build the worker: {e}"))?;
        let worker = Arc::new(worker);
        let running = worker.clone();
        let task = tokio::spawn(async move { running.run().await });
        Ok((worker, task))
    }
}

/// Submits the warm-up job of a workload.
pub(super) async fn submit_warm_up(client: &Client, names: &Names) -> Result<(), String> {
    let key = format!("{}warmup", names.key_prefix);
    client
        .submit(&key, &job_body(names, u64::MAX))
        .await
        .map_err(|e| format!("{}: the warm-up submission failed: {e}", names.workload))?;
    Ok(())
}

/// Waits until the worker's won count reaches `target`, looking every `every`; fails
/// when the worker stops or makes no progress for [`STALL`]. Returns when it saw it.
pub(super) async fn wait_won(
    worker: &Worker,
    task: &WorkerTask,
    target: u64,
    every: Duration,
) -> Result<Instant, String> {
    let mut last = worker.stats().won;
    let mut last_change = Instant::now();
    loop {
        let stats = worker.stats();
        if stats.won >= target {
            return Ok(Instant::now());
        }
        if task.is_finished() {
            return Err(format!(
                "the worker stopped early (won {} of {target}); worker {stats:?}",
                stats.won
            ));
        }
        if stats.panics > 0 || stats.contract_violations > 0 || stats.local_contract_violations > 0
        {
            return Err(format!(
                "the no-op provider did not succeed; worker {stats:?}"
            ));
        }
        if stats.won != last {
            last = stats.won;
            last_change = Instant::now();
        } else if last_change.elapsed() > STALL {
            return Err(format!(
                "no progress for {} s (won {} of {target}); worker {stats:?}",
                STALL.as_secs(),
                stats.won
            ));
        }
        tokio::time::sleep(every).await;
    }
}

pub(super) async fn stop_worker(worker: &Worker, task: WorkerTask) -> Result<(), String> {
    worker.shutdown_token().cancel();
    match tokio::time::timeout(Duration::from_secs(30), task).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(format!("the worker failed: {e}")),
        Ok(Err(e)) => Err(format!("the worker task failed: {e}")),
        Err(_) => Err("the worker did not stop within 30 s".to_owned()),
    }
}
