//! `--workload workflow`: workflow jobs submitted over HTTP by e2e's producers, each
//! three no-op activities and one zero-length durable timer (activity, timer, activity,
//! activity: the shape of the DBOS peer's `wf3`), run by e2e's kind of SDK worker (in this
//! process, or in a process of its own with `--worker-process`) until every job
//! succeeded with the result its input calls for. Reports workflows/s (`rate`) and
//! activity steps/s (`steps_rate`, three per workflow).

use std::time::Duration;

use onceflow_worker::{WorkerBuilder, WorkflowContext, WorkflowError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::batches::batch_report;
use super::e2e::Progress;
use super::worker::submit_warm_up;
use super::{peak_rss_mb, Bench, PROVIDER};

/// Activity steps per workflow.
pub(super) const STEPS: u64 = 3;

/// The input of the bench's workflow: its job's number.
#[derive(Debug, Deserialize)]
struct Input {
    n: u64,
}

/// What the bench's workflow returns; the bench checks it for every job.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(super) struct Output {
    /// The job's number, from its input.
    pub(super) n: u64,
    /// The activity steps that succeeded.
    pub(super) steps: u64,
}

/// Registers the bench's workflow `workflow` on `builder`, its steps calling `activity`
/// (served by the no-op provider, which the builder must register too).
pub(super) fn register(builder: WorkerBuilder, workflow: &str, activity: &str) -> WorkerBuilder {
    let activity = activity.to_owned();
    builder.workflow(workflow, move |ctx: WorkflowContext, input: Input| {
        let activity = activity.clone();
        async move { three_steps(ctx, &activity, input.n).await }
    })
}

/// Activity `a`, a zero-length durable timer, activities `b` and `c`; each activity's
/// output must be the no-op provider's.
async fn three_steps(
    ctx: WorkflowContext,
    activity: &str,
    n: u64,
) -> Result<Output, WorkflowError> {
    let step = |name: &'static str| {
        ctx.activity::<Value>(activity, json!({ "n": n, "step": name }))
            .providers([PROVIDER])
    };
    let mut steps = 0;
    let noop = json!({ "ok": true });
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        if i == 1 {
            ctx.sleep(Duration::ZERO).await?;
        }
        let output = step(name).await?;
        if output != noop {
            return Err(WorkflowError::with_code(
                "bench_unexpected_output",
                format!("step {name} returned {output}, not {noop}"),
            ));
        }
        steps += 1;
    }
    Ok(Output { n, steps })
}

impl Bench {
    pub(super) async fn workflow(&self) -> Result<(), String> {
        let names = self.names("workflow");
        let mut worker = self.e2e_workers(&names)?;
        let measured = self.workflow_measure(&names, &mut worker).await;
        let described = worker.describe();
        let stopped = worker.stop().await;
        let (elapsed, verified, batches) = measured?;
        let worker_rss = stopped?;
        let n = self.jobs;
        let steps_rate = (STEPS * n) as f64 / elapsed.as_secs_f64().max(1e-9);
        let mut extra = format!(" steps_rate={steps_rate:.1}");
        if let Some(mb) = peak_rss_mb() {
            extra.push_str(&format!(" peak_rss_mb={mb:.1}"));
        }
        if let Some(mb) = worker_rss {
            extra.push_str(&format!(" worker_peak_rss_mb={mb:.1}"));
        }
        extra.push_str(&batches);
        let rate = self.result("workflow", n, elapsed, &extra);
        eprintln!(
            "bench workflow: {n} workflows (3 activities and a 0 ms timer each) submitted over HTTP by {} producers \
             and run by {} SDK worker(s) (max {} tasks in all) in {:.3} s: {rate:.1} workflows/s, {steps_rate:.1} \
             activity steps/s; {verified} verified succeeded with their results; worker {described}",
            self.concurrency,
            self.urls.len(),
            self.concurrency,
            elapsed.as_secs_f64(),
        );
        Ok(())
    }

    async fn workflow_measure(
        &self,
        names: &super::Names,
        worker: &mut super::e2e::E2eWorker,
    ) -> Result<(Duration, u64, String), String> {
        let n = self.jobs;
        // One workflow first, so that a worker has registered its contract and is polling.
        submit_warm_up(&self.client()?, names).await?;
        worker.wait_done(1).await?;
        let baseline = worker.done();
        let batches_before = self.batch_totals().await;
        let start = std::time::Instant::now();
        let (_, done) =
            tokio::try_join!(self.produce(names, n, 1), worker.wait_done(baseline + n))?;
        let elapsed = done.saturating_duration_since(start);
        let batches_after = self.batch_totals().await;
        // Every job of the run, listed: succeeded, with the result its input calls for
        // (count_jobs checks the results of workflow jobs).
        let (succeeded, listed) = self.count_jobs(names, Some("succeeded"), n).await?;
        if succeeded != n {
            return Err(format!(
                "workflow: expected {n} succeeded jobs of this run, found {succeeded} ({listed} listed)"
            ));
        }
        Ok((
            elapsed,
            succeeded,
            batch_report(&batches_before, &batches_after),
        ))
    }
}

/// What a worker counts as done for the workload of `names`.
pub(super) fn progress_of(names: &super::Names) -> Progress {
    match names.workflow {
        Some(_) => Progress::WorkflowsReturned,
        None => Progress::Won,
    }
}
