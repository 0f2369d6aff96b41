//! The SDK worker of a workload in this process: started, warmed up, watched, stopped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onceflow_worker::{ActivityContext, ActivityError, Client, Worker};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::e2e::Progress;
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
        self.start_worker_at(
            &self.url,
            &self.worker_id(names, 0),
            names,
            max_concurrent,
            probe,
        )
    }

    /// The id of the workload's worker number `i` (from 0): the workload's name alone
    /// for the first, so that a run with one server names its worker as before.
    pub(super) fn worker_id(&self, names: &Names, i: usize) -> String {
        match i {
            0 => format!("bench-{}-{}", self.run_id, names.workload),
            i => format!("bench-{}-{}-{i}", self.run_id, names.workload),
        }
    }

    /// A worker polling the server at `url`.
    pub(super) fn start_worker_at(
        &self,
        url: &str,
        worker_id: &str,
        names: &Names,
        max_concurrent: usize,
        probe: Option<mpsc::UnboundedSender<(Uuid, Instant)>>,
    ) -> Result<(Arc<Worker>, WorkerTask), String> {
        let builder = Worker::builder(url.to_owned(), self.worker_token.clone())
            .worker_id(worker_id.to_owned())
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
            );
        let builder = match &names.workflow {
            Some(workflow) => super::workflow::register(builder, workflow, &names.activity),
            None => builder,
        };
        let worker = builder
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
    wait_done_all(&[(worker, task)], Progress::Won, target, every).await
}

/// [`wait_won`] for several workers and either [`Progress`]: until their counts add up
/// to `target`; fails when any of them stops or fails, or all together make no progress
/// for [`STALL`].
pub(super) async fn wait_done_all(
    workers: &[(&Worker, &WorkerTask)],
    progress: Progress,
    target: u64,
    every: Duration,
) -> Result<Instant, String> {
    let won = || {
        workers
            .iter()
            .map(|(w, _)| progress.of(&w.stats()))
            .sum::<u64>()
    };
    let mut last = won();
    let mut last_change = Instant::now();
    loop {
        let total = won();
        if total >= target {
            return Ok(Instant::now());
        }
        for (worker, task) in workers {
            let stats = worker.stats();
            if task.is_finished() {
                return Err(format!(
                    "the worker stopped early (won {total} of {target}); worker {stats:?}"
                ));
            }
            if stats.panics > 0
                || stats.contract_violations > 0
                || stats.local_contract_violations > 0
            {
                return Err(format!(
                    "the no-op provider did not succeed; worker {stats:?}"
                ));
            }
        }
        if total != last {
            last = total;
            last_change = Instant::now();
        } else if last_change.elapsed() > STALL {
            return Err(format!(
                "no progress for {} s (won {total} of {target})",
                STALL.as_secs(),
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
