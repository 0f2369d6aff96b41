//! `--workload latency`: one job at a time on an idle engine, submit→started and
//! submit→succeeded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use onceflow_worker::{JobStatus, Worker};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::worker::stop_worker;
use super::{job_body, Bench, Names, WorkerTask};

/// Jobs of the latency workload (or `--jobs` if smaller).
const LATENCY_JOBS: u64 = 200;

impl Bench {
    pub(super) async fn latency(&self) -> Result<(), String> {
        let names = self.names("latency");
        let (probe, starts) = mpsc::unbounded_channel();
        let (worker, task) = self.start_worker(&names, 1, Some(probe))?;
        let measured = self.latency_measure(&names, &worker, &task, starts).await;
        let stopped = stop_worker(&worker, task).await;
        let (n, elapsed, mut start_ms, mut done_ms) = measured?;
        stopped?;
        start_ms.sort_by(f64::total_cmp);
        done_ms.sort_by(f64::total_cmp);
        let (p50s, p99s, p50d, p99d) = (
            percentile(&start_ms, 50.0),
            percentile(&start_ms, 99.0),
            percentile(&done_ms, 50.0),
            percentile(&done_ms, 99.0),
        );
        self.result(
            "latency",
            n,
            elapsed,
            &format!(" p50_start_ms={p50s:.3} p99_start_ms={p99s:.3} p50_done_ms={p50d:.3} p99_done_ms={p99d:.3}"),
        );
        eprintln!(
            "bench latency: {n} jobs one at a time, one worker: submit→started p50 {p50s:.3} ms p99 {p99s:.3} ms, \
             submit→succeeded p50 {p50d:.3} ms p99 {p99d:.3} ms"
        );
        Ok(())
    }

    async fn latency_measure(
        &self,
        names: &Names,
        worker: &Arc<Worker>,
        task: &WorkerTask,
        mut starts: mpsc::UnboundedReceiver<(Uuid, Instant)>,
    ) -> Result<(u64, Duration, Vec<f64>, Vec<f64>), String> {
        let n = self.jobs.min(LATENCY_JOBS);
        let client = self.client()?;
        self.warm_up(&client, names, worker, task).await?;
        while starts.try_recv().is_ok() {}
        let baseline = worker.stats().won;
        let mut start_ms = Vec::with_capacity(n as usize);
        let mut done_ms = Vec::with_capacity(n as usize);
        let begin = Instant::now();
        for i in 0..n {
            let key = format!("{}{i}", names.key_prefix);
            let t0 = Instant::now();
            let job_id = client
                .submit(&key, &job_body(names, i))
                .await
                .map_err(|e| format!("submitting `{key}` failed: {e}"))?
                .job
                .id;
            let started = loop {
                match tokio::time::timeout(Duration::from_secs(30), starts.recv()).await {
                    Ok(Some((id, at))) if id == job_id => break at,
                    Ok(Some(_)) => continue,
                    Ok(None) => {
                        return Err("latency: the worker's handler channel closed".to_owned())
                    }
                    Err(_) => {
                        return Err(format!(
                            "latency: job {job_id} did not start within 30 s; worker {:?}",
                            worker.stats()
                        ))
                    }
                }
            };
            // The worker counts a win once the engine answered its completion, i.e. once
            // the job is committed `succeeded`; watched every 50 µs off the runtime.
            let done = wait_won_precise(worker.clone(), baseline + i + 1).await?;
            let job = client
                .job(job_id)
                .await
                .map_err(|e| format!("reading job {job_id} failed: {e}"))?;
            if job.status != JobStatus::Succeeded {
                return Err(format!(
                    "latency: job {job_id} is {:?} after its attempt won",
                    job.status
                ));
            }
            start_ms.push(started.saturating_duration_since(t0).as_secs_f64() * 1000.0);
            done_ms.push(done.saturating_duration_since(t0).as_secs_f64() * 1000.0);
        }
        Ok((n, begin.elapsed(), start_ms, done_ms))
    }
}

/// [`wait_won`] for one latency sample: a blocking thread looks every 50 µs.
async fn wait_won_precise(worker: Arc<Worker>, target: u64) -> Result<Instant, String> {
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let stats = worker.stats();
            if stats.won >= target {
                return Ok(Instant::now());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "latency: the job did not succeed within 30 s; worker {stats:?}"
                ));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    })
    .await
    .map_err(|e| format!("latency: the watcher failed: {e}"))?
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
