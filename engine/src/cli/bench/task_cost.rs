//! `--workload task-cost`: what one workflow task costs as a workflow's history grows.
//! For each `--steps` N, one workflow job runs N + 50 steps, each a zero-length durable
//! timer (one workflow task per step: the timer fires as the task that starts it
//! completes, and wakes the workflow again). The cost at N is the mean time from one
//! step to the next over the 50 steps after the N-th: a task's claim, its replay, its
//! completion. It is measured with the SDK's kept runs (sticky execution: each task
//! carries only its new part) and, up to 1,000 steps, with every task a full replay for
//! comparison. Reports `ms_at_N`, `replay_ms_at_N` and `ratio_at_N` (against the
//! smallest N).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onceflow_worker::{Worker, WorkflowContext, WorkflowError};
use serde_json::json;

use super::Bench;

/// The steps measured after the N-th.
const WINDOW: u64 = 50;

/// Full replays are measured up to this many steps (their cost grows with the history,
/// so the whole workflow's grows with its square).
const REPLAY_UP_TO: u64 = 1_000;

/// When each step of the workflow being measured was first reached.
type Reached = Arc<Mutex<Vec<Option<Instant>>>>;

impl Bench {
    pub(super) async fn task_cost(&self, sizes: &[u64]) -> Result<(), String> {
        if sizes.is_empty() || sizes.contains(&0) {
            return Err("task-cost: --steps takes positive numbers of steps".to_owned());
        }
        let started = Instant::now();
        let mut extra = String::new();
        let mut tasks = 0;
        let mut kept_at = Vec::new();
        for (mode, cache) in [("kept", 1_000), ("replay", 0)] {
            for &n in sizes {
                if mode == "replay" && n > REPLAY_UP_TO {
                    continue;
                }
                let ms = self.task_cost_at(n, cache).await?;
                tasks += n + WINDOW;
                let key = if mode == "kept" { "ms" } else { "replay_ms" };
                extra.push_str(&format!(" {key}_at_{n}={ms:.3}"));
                if mode == "kept" {
                    kept_at.push((n, ms));
                }
            }
        }
        let base = kept_at.first().map(|(_, ms)| *ms).unwrap_or(1.0).max(1e-9);
        for (n, ms) in &kept_at {
            extra.push_str(&format!(" ratio_at_{n}={:.3}", ms / base));
        }
        let rate = self.result("task-cost", tasks, started.elapsed(), &extra);
        let shown: Vec<String> = kept_at
            .iter()
            .map(|(n, ms)| format!("{ms:.2} ms at {n} steps ({:.2}x)", ms / base))
            .collect();
        eprintln!(
            "bench task-cost: a workflow task (claim, replay, completion) costs {}; {tasks} tasks in all, {rate:.1} tasks/s",
            shown.join(", ")
        );
        Ok(())
    }

    /// The mean time per step over the `WINDOW` steps after step `n`, with a worker that
    /// keeps up to `cache` runs.
    async fn task_cost_at(&self, n: u64, cache: usize) -> Result<f64, String> {
        let total = n + WINDOW;
        let reached: Reached = Arc::new(Mutex::new(vec![None; (total + 1) as usize]));
        let workflow = format!("bench_steps_{}_{n}_{cache}", self.run_id);
        let queue = format!("bench_{}_task_cost_{n}_{cache}", self.run_id);
        let marks = reached.clone();
        let worker = Worker::builder(self.url.clone(), self.worker_token.clone())
            .worker_id(format!("bench-{}-task-cost-{n}-{cache}", self.run_id))
            .task_queue(queue.clone())
            .max_cached_workflows(cache)
            .poll_wait(Duration::from_secs(1))
            .workflow(&workflow, move |ctx: WorkflowContext, steps: u64| {
                let marks = marks.clone();
                async move { steps_of_timers(ctx, steps, &marks).await }
            })
            .build()
            .map_err(|e| format!("task-cost: cannot build the worker: {e}"))?;
        let worker = Arc::new(worker);
        let running = worker.clone();
        let handle = tokio::spawn(async move { running.run().await });
        let client = self.client()?;
        let body = onceflow_worker::api::JobRequestBody {
            workflow: Some(workflow),
            activity: None,
            providers: None,
            input: Some(json!(total)),
            task_queue: Some(queue),
            options: None,
        };
        let key = format!("bench-{}-task-cost-{n}-{cache}", self.run_id);
        let measured = async {
            let job = client
                .submit(&key, &body)
                .await
                .map_err(|e| format!("task-cost: submit: {e}"))?
                .job;
            let done = client
                .wait(job.id, Duration::from_secs(3_600))
                .await
                .map_err(|e| format!("task-cost: wait: {e}"))?;
            if done.result != Some(json!(total)) {
                return Err(format!(
                    "task-cost: the workflow of {total} steps ended {:?} with {:?}",
                    done.status, done.error
                ));
            }
            let reached = reached
                .lock()
                .map_err(|_| "task-cost: poisoned".to_owned())?;
            match (reached[n as usize], reached[total as usize]) {
                (Some(from), Some(to)) => {
                    Ok(to.duration_since(from).as_secs_f64() * 1e3 / WINDOW as f64)
                }
                _ => Err(format!(
                    "task-cost: steps {n} to {total} were not all reached"
                )),
            }
        }
        .await;
        worker.shutdown_token().cancel();
        let _ = handle.await;
        measured
    }
}

/// `steps` zero-length timers, marking when each step is first reached; returns `steps`.
async fn steps_of_timers(
    ctx: WorkflowContext,
    steps: u64,
    reached: &Reached,
) -> Result<u64, WorkflowError> {
    let mark = |step: u64| {
        if let Ok(mut reached) = reached.lock() {
            if let Some(slot) = reached.get_mut(step as usize) {
                slot.get_or_insert_with(Instant::now);
            }
        }
    };
    mark(0);
    for step in 1..=steps {
        ctx.sleep(Duration::ZERO).await?;
        mark(step);
    }
    Ok(steps)
}
