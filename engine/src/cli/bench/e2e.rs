//! `--workload e2e`: submitted over HTTP and run by one SDK worker (in this process, or
//! in a process of its own with `--worker-process`), until every job succeeded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onceflow_worker::Worker;

use super::batches::batch_report;
use super::worker::{stop_worker, submit_warm_up, wait_won};
use super::worker_process::WorkerProcess;
use super::{peak_rss_mb, Bench, Names, WorkerTask};

impl Bench {
    pub(super) async fn e2e(&self) -> Result<f64, String> {
        let names = self.names("e2e");
        let mut worker = if self.worker_process {
            E2eWorker::Process(Box::new(WorkerProcess::spawn(self, &names)?))
        } else {
            let (worker, task) = self.start_worker(&names, self.concurrency, None)?;
            E2eWorker::InProcess(worker, task)
        };
        let measured = self.e2e_measure(&names, &mut worker).await;
        let described = worker.describe();
        let stopped = worker.stop().await;
        let (elapsed, verified, batches) = measured?;
        let worker_rss = stopped?;
        let n = self.jobs;
        // This process: the server (unless --url), the producers and, unless
        // --worker-process, the worker too.
        let mut extra = peak_rss_mb()
            .map(|mb| format!(" peak_rss_mb={mb:.1}"))
            .unwrap_or_default();
        if let Some(mb) = worker_rss {
            extra.push_str(&format!(" worker_peak_rss_mb={mb:.1}"));
        }
        // Mean calls per flush of each natural batcher during the run.
        extra.push_str(&batches);
        let rate = self.result("e2e", n, elapsed, &extra);
        eprintln!(
            "bench e2e: {n} jobs submitted over HTTP by {} producers and run by one SDK worker (max {} attempts) \
             in {:.3} s: {rate:.1} jobs/s; {verified} verified succeeded; worker {described}",
            self.concurrency,
            self.concurrency,
            elapsed.as_secs_f64(),
        );
        Ok(rate)
    }

    async fn e2e_measure(
        &self,
        names: &Names,
        worker: &mut E2eWorker,
    ) -> Result<(Duration, u64, String), String> {
        let n = self.jobs;
        // One job first, so that the worker has registered its contract and is polling.
        submit_warm_up(&self.client()?, names).await?;
        worker.wait_won(1).await?;
        let baseline = worker.won();
        let batches_before = self.batch_totals().await;
        let start = Instant::now();
        let (_, done) = tokio::try_join!(self.produce(names, n, 1), worker.wait_won(baseline + n))?;
        let elapsed = done.saturating_duration_since(start);
        let batches_after = self.batch_totals().await;
        let (succeeded, listed) = self.count_jobs(names, Some("succeeded"), n).await?;
        if succeeded != n {
            return Err(format!(
                "e2e: expected {n} succeeded jobs of this run, found {succeeded} ({listed} listed)"
            ));
        }
        Ok((
            elapsed,
            succeeded,
            batch_report(&batches_before, &batches_after),
        ))
    }
}

/// The SDK worker of e2e: in this process, or in a child process of its own.
enum E2eWorker {
    InProcess(Arc<Worker>, WorkerTask),
    Process(Box<WorkerProcess>),
}

impl E2eWorker {
    fn won(&self) -> u64 {
        match self {
            E2eWorker::InProcess(worker, _) => worker.stats().won,
            E2eWorker::Process(process) => process.won,
        }
    }

    /// Waits until the worker has won `target` results; returns when it saw it.
    async fn wait_won(&mut self, target: u64) -> Result<Instant, String> {
        match self {
            E2eWorker::InProcess(worker, task) => {
                wait_won(worker, task, target, Duration::from_millis(5)).await
            }
            E2eWorker::Process(process) => process.wait_won(target).await,
        }
    }

    fn describe(&self) -> String {
        match self {
            E2eWorker::InProcess(worker, _) => format!("{:?}", worker.stats()),
            E2eWorker::Process(process) => format!(
                "process {} (won {})",
                process.child.id().unwrap_or(0),
                process.won
            ),
        }
    }

    /// Stops the worker; a worker process answers its peak memory in MB.
    async fn stop(self) -> Result<Option<f64>, String> {
        match self {
            E2eWorker::InProcess(worker, task) => stop_worker(&worker, task).await.map(|()| None),
            E2eWorker::Process(process) => process.stop().await.map(Some),
        }
    }
}
