//! `--workload e2e`: submitted over HTTP and run by one SDK worker (in this process, or
//! in a process of its own with `--worker-process`), until every job succeeded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onceflow_worker::Worker;

use super::batches::batch_report;
use super::worker::{stop_worker, submit_warm_up, wait_done_all};
use super::worker_process::WorkerProcess;
use super::workflow::progress_of;
use super::{peak_rss_mb, Bench, Names, WorkerTask};

/// What a workload's workers count as done: activity results won (e2e), or workflows
/// run to their end (workflow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Progress {
    /// [`onceflow_worker::WorkerStats::won`].
    Won,
    /// [`onceflow_worker::WorkerStats::workflows_returned`].
    WorkflowsReturned,
}

impl Progress {
    /// This progress in a worker's counters.
    pub(super) fn of(self, stats: &onceflow_worker::WorkerStats) -> u64 {
        match self {
            Progress::Won => stats.won,
            Progress::WorkflowsReturned => stats.workflows_returned,
        }
    }
}

impl Bench {
    pub(super) async fn e2e(&self) -> Result<f64, String> {
        let names = self.names("e2e");
        let mut worker = self.e2e_workers(&names)?;
        let measured = self.e2e_measure(&names, &mut worker).await;
        let described = worker.describe();
        let stopped = worker.stop().await;
        let (elapsed, verified, batches) = measured?;
        let worker_rss = stopped?;
        let n = self.jobs;
        // This process: the server (unless --url or --engines), the producers and, unless
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
        let workers = self.urls.len();
        eprintln!(
            "bench e2e: {n} jobs submitted over HTTP by {} producers and run by {workers} SDK worker(s) (max {} attempts in all) \
             in {:.3} s: {rate:.1} jobs/s; {verified} verified succeeded; worker {described}",
            self.concurrency,
            self.concurrency,
            elapsed.as_secs_f64(),
        );
        Ok(rate)
    }

    /// One worker per server (one, unless --engines), the --concurrency attempts shared
    /// between them.
    pub(super) fn e2e_workers(&self, names: &Names) -> Result<E2eWorker, String> {
        let progress = progress_of(names);
        let servers = self.urls.len();
        let each = self.concurrency.div_ceil(servers);
        if self.worker_process {
            let mut processes = Vec::with_capacity(servers);
            for (i, url) in self.urls.iter().enumerate() {
                processes.push(WorkerProcess::spawn(self, names, url, i, each)?);
            }
            Ok(E2eWorker::Processes(processes))
        } else {
            let mut workers = Vec::with_capacity(servers);
            for (i, url) in self.urls.iter().enumerate() {
                workers.push(self.start_worker_at(
                    url,
                    &self.worker_id(names, i),
                    names,
                    each,
                    None,
                )?);
            }
            Ok(E2eWorker::InProcess(workers, progress))
        }
    }

    async fn e2e_measure(
        &self,
        names: &Names,
        worker: &mut E2eWorker,
    ) -> Result<(Duration, u64, String), String> {
        let n = self.jobs;
        // One job first, so that a worker has registered its contract and is polling.
        submit_warm_up(&self.client()?, names).await?;
        worker.wait_done(1).await?;
        let baseline = worker.done();
        let batches_before = self.batch_totals().await;
        let start = Instant::now();
        let (_, done) =
            tokio::try_join!(self.produce(names, n, 1), worker.wait_done(baseline + n))?;
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

/// The SDK workers of e2e and workflow (one per server): in this process, or each in a
/// child process of its own (which counts what it was told to with `--workflow`); in
/// this process, with what they count as done.
pub(super) enum E2eWorker {
    InProcess(Vec<(Arc<Worker>, WorkerTask)>, Progress),
    Processes(Vec<WorkerProcess>),
}

impl E2eWorker {
    /// What the workers have done, in all (see [`Progress`]).
    pub(super) fn done(&self) -> u64 {
        match self {
            E2eWorker::InProcess(workers, progress) => {
                workers.iter().map(|(w, _)| progress.of(&w.stats())).sum()
            }
            E2eWorker::Processes(processes) => processes.iter().map(|p| p.won).sum(),
        }
    }

    /// Waits until the workers have done `target` in all; returns when it saw it.
    pub(super) async fn wait_done(&mut self, target: u64) -> Result<Instant, String> {
        match self {
            E2eWorker::InProcess(workers, progress) => {
                let refs: Vec<(&Worker, &WorkerTask)> =
                    workers.iter().map(|(w, t)| (w.as_ref(), t)).collect();
                wait_done_all(&refs, *progress, target, Duration::from_millis(5)).await
            }
            E2eWorker::Processes(processes) => WorkerProcess::wait_won_all(processes, target).await,
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            E2eWorker::InProcess(workers, _) => workers
                .iter()
                .map(|(w, _)| format!("{:?}", w.stats()))
                .collect::<Vec<_>>()
                .join("; "),
            E2eWorker::Processes(processes) => processes
                .iter()
                .map(|p| format!("process {} (done {})", p.child.id().unwrap_or(0), p.won))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// Stops the workers; worker processes answer the largest peak memory among them,
    /// in MB.
    pub(super) async fn stop(self) -> Result<Option<f64>, String> {
        match self {
            E2eWorker::InProcess(workers, _) => {
                let mut first_error = None;
                for (worker, task) in workers {
                    if let Err(e) = stop_worker(&worker, task).await {
                        first_error.get_or_insert(e);
                    }
                }
                first_error.map_or(Ok(None), Err)
            }
            E2eWorker::Processes(processes) => {
                let mut peak: Option<f64> = None;
                let mut first_error = None;
                for process in processes {
                    match process.stop().await {
                        Ok(mb) => peak = Some(peak.map_or(mb, |p| p.max(mb))),
                        Err(e) => {
                            first_error.get_or_insert(e);
                        }
                    }
                }
                first_error.map_or(Ok(peak), Err)
            }
        }
    }
}
