//! `--worker-process`: e2e's SDK worker in a process of its own (`onceflow bench-worker`,
//! this binary re-run), as a user runs one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onceflow_worker::{ActivityContext, ActivityError, Worker};
use serde_json::Value;

use super::e2e::Progress;
use super::worker::stop_worker;
use super::{peak_rss_mb, runtime_threads, Bench, BenchWorkerArgs, Names, Noop, PROVIDER, STALL};

/// `onceflow bench-worker` run as a child: its stdout reports progress, closing its
/// stdin stops it.
pub(super) struct WorkerProcess {
    pub(super) child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pub(super) won: u64,
}

impl WorkerProcess {
    /// Starts worker number `i` of the workload, polling the server at `url` with at
    /// most `concurrency` attempts at once.
    pub(super) fn spawn(
        bench: &Bench,
        names: &Names,
        url: &str,
        i: usize,
        concurrency: usize,
    ) -> Result<WorkerProcess, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
        let mut child = tokio::process::Command::new(exe)
            .arg("bench-worker")
            .args(["--url", url, "--worker-token", &bench.worker_token])
            .args(["--worker-id", &bench.worker_id(names, i)])
            .args(["--task-queue", &names.queue, "--activity", &names.activity])
            .args(["--concurrency", &concurrency.to_string()])
            .args(
                names
                    .workflow
                    .iter()
                    .flat_map(|w| ["--workflow", w.as_str()]),
            )
            .args(["--threads", &runtime_threads().to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the worker process: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or("the worker process has no stdout")?;
        let lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        Ok(WorkerProcess {
            child,
            lines,
            won: 0,
        })
    }

    /// Reads the child's next line and takes it in: its won count, or its error. Cancel
    /// safe (a line is read whole or not at all).
    pub(super) async fn update(&mut self) -> Result<(), String> {
        let line = self.next_line().await?;
        if let Some(won) = line.strip_prefix("won=").and_then(|n| n.parse().ok()) {
            self.won = won;
        } else if let Some(error) = line.strip_prefix("error=") {
            return Err(format!("the worker process: {error}"));
        }
        Ok(())
    }

    /// The next line of the child; an error when it ends or says nothing for [`STALL`].
    async fn next_line(&mut self) -> Result<String, String> {
        match tokio::time::timeout(STALL, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err(format!(
                "the worker process exited early (won {})",
                self.won
            )),
            Ok(Err(e)) => Err(format!("reading the worker process: {e}")),
            Err(_) => Err(format!(
                "no progress for {} s (the worker process won {})",
                STALL.as_secs(),
                self.won
            )),
        }
    }

    /// Waits until the won counts of `processes` add up to `target`; returns when it saw
    /// it. Fails when one of them fails or ends, or none says anything for [`STALL`].
    pub(super) async fn wait_won_all(
        processes: &mut [WorkerProcess],
        target: u64,
    ) -> Result<Instant, String> {
        while processes.iter().map(|p| p.won).sum::<u64>() < target {
            let updates = processes.iter_mut().map(|p| Box::pin(p.update()));
            futures::future::select_all(updates).await.0?;
        }
        Ok(Instant::now())
    }

    pub(super) async fn stop(mut self) -> Result<f64, String> {
        drop(self.child.stdin.take());
        loop {
            let line = self.next_line().await?;
            if let Some(mb) = line
                .strip_prefix("peak_rss_mb=")
                .and_then(|mb| mb.parse().ok())
            {
                let status = self
                    .child
                    .wait()
                    .await
                    .map_err(|e| format!("the worker process: {e}"))?;
                return if status.success() {
                    Ok(mb)
                } else {
                    Err(format!("the worker process exited with {status}"))
                };
            }
            if let Some(error) = line.strip_prefix("error=") {
                return Err(format!("the worker process: {error}"));
            }
        }
    }
}

/// Runs `onceflow bench-worker` (see [`BenchWorkerArgs`]).
pub async fn run_worker_process(args: BenchWorkerArgs) -> Result<(), String> {
    use std::io::Write;
    let builder = Worker::builder(args.url, args.worker_token.expose())
        .worker_id(args.worker_id)
        .task_queue(args.task_queue)
        .max_concurrent_attempts(args.concurrency.max(1))
        .poll_wait(Duration::from_secs(1))
        .shutdown_grace(Duration::from_secs(10))
        .provider(
            &args.activity,
            PROVIDER,
            |_ctx: ActivityContext, _input: Value| async move {
                Ok::<_, ActivityError>(Noop { ok: true })
            },
        );
    let (builder, progress) = match &args.workflow {
        Some(workflow) => (
            super::workflow::register(builder, workflow, &args.activity),
            Progress::WorkflowsReturned,
        ),
        None => (builder, Progress::Won),
    };
    let worker = builder
        .build()
        .map_err(|e| format!("cannot build the worker: {e}"))?;
    let worker = Arc::new(worker);
    let task = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run().await })
    };
    // Standard input closing (the bench is done, or gone) is the signal to stop.
    let mut closed = tokio::spawn(async {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
    });
    let mut reported = 0;
    let mut out = std::io::stdout();
    loop {
        tokio::select! {
            _ = &mut closed => break,
            _ = tokio::time::sleep(Duration::from_millis(2)) => {}
        }
        let stats = worker.stats();
        if stats.panics > 0 || stats.contract_violations > 0 || stats.local_contract_violations > 0
        {
            let _ = writeln!(
                out,
                "error=the no-op provider did not succeed; worker {stats:?}"
            );
            break;
        }
        if task.is_finished() {
            let _ = writeln!(out, "error=the worker stopped early; worker {stats:?}");
            break;
        }
        if progress.of(&stats) != reported {
            reported = progress.of(&stats);
            let _ = writeln!(out, "won={reported}");
            let _ = out.flush();
        }
    }
    let stopped = stop_worker(&worker, task).await;
    let _ = writeln!(out, "peak_rss_mb={:.1}", peak_rss_mb().unwrap_or(0.0));
    let _ = out.flush();
    stopped
}
