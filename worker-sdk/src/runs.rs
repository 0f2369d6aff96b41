//! Workflow runs kept between tasks (sticky execution, as Temporal's workers do): a
//! worker keeps each workflow's replayed state, suspended where its code waits, so the
//! job's next task carries only what arrived since and costs the same at step 10,000 as
//! at step 10. Workflow code is not `Send`, so the runs live on threads of their own;
//! a job's runs always on the same one.

use std::collections::HashMap;
use std::sync::mpsc;

use onceflow_protocol::workflow::{WorkflowCommand, WorkflowTask};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::workflow::{Run, WorkflowFn};

/// What a worker decided for a workflow task.
pub(crate) enum Answer {
    /// The commands, and the horizon of the run kept for the job's next task (`None`:
    /// not kept, the next task carries the whole history).
    Decided {
        commands: Vec<WorkflowCommand>,
        sticky_horizon: Option<i64>,
    },
    /// The task carries only the new part of the history and this worker does not hold
    /// the run it continues: ask the engine for the whole of it.
    NeedsHistory,
}

enum Order {
    Advance {
        workflow: WorkflowFn,
        task: Box<WorkflowTask>,
        reply: oneshot::Sender<Answer>,
    },
    Forget(Uuid),
}

/// The runs a worker keeps, at most `capacity` of them (the least recently used go
/// first); `0` keeps none, and every task is replayed from its whole history.
pub(crate) struct Runs {
    shards: Vec<mpsc::Sender<Order>>,
}

impl Runs {
    /// Threads that keep up to `capacity` runs in all.
    pub(crate) fn new(capacity: usize) -> Runs {
        let count = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 4);
        let per_shard = capacity.div_ceil(count);
        let shards = (0..count)
            .map(|i| {
                let (orders, inbox) = mpsc::channel();
                let spawned = std::thread::Builder::new()
                    .name(format!("onceflow-workflows-{i}"))
                    .spawn(move || serve(inbox, per_shard));
                if let Err(e) = spawned {
                    tracing::error!(error = %e, "could not start a workflow thread; its tasks are replayed where they arrive");
                }
                orders
            })
            .collect();
        Runs { shards }
    }

    fn shard(&self, job_id: Uuid) -> &mpsc::Sender<Order> {
        let index = (job_id.as_u128() % self.shards.len() as u128) as usize;
        &self.shards[index]
    }

    /// Runs `task`: continues the job's kept run with the task's new part of the history,
    /// or replays its whole history.
    pub(crate) async fn advance(&self, workflow: WorkflowFn, task: WorkflowTask) -> Answer {
        let (reply, answer) = oneshot::channel();
        let order = Order::Advance {
            workflow,
            task: Box::new(task),
            reply,
        };
        match self.shard(task_id(&order)).send(order) {
            Ok(()) => {}
            Err(mpsc::SendError(order)) => return replay_here(order),
        }
        // A thread that died (it never does: each order runs under catch_unwind) drops
        // the reply: the task is then left to its lease.
        answer.await.unwrap_or(Answer::NeedsHistory)
    }

    /// Drops the job's kept run: its last task did not apply (stale, lease lost, or
    /// unknown), so the run may not match the job's history.
    pub(crate) fn forget(&self, job_id: Uuid) {
        // A thread that is gone keeps nothing.
        let _ = self.shard(job_id).send(Order::Forget(job_id));
    }
}

fn task_id(order: &Order) -> Uuid {
    match order {
        Order::Advance { task, .. } => task.job_id,
        Order::Forget(id) => *id,
    }
}

/// Without a thread: a task with its whole history is replayed at once; one with only
/// its new part needs the rest.
fn replay_here(order: Order) -> Answer {
    match order {
        Order::Advance { workflow, task, .. } if task.since_arrival.is_none() => {
            let decided = Run::start(&workflow, &task).advance(&task);
            Answer::Decided {
                commands: decided.commands,
                sticky_horizon: None,
            }
        }
        _ => Answer::NeedsHistory,
    }
}

/// A thread's loop: its share of the runs, used least recently first out.
fn serve(inbox: mpsc::Receiver<Order>, capacity: usize) {
    let mut kept: HashMap<Uuid, (Run, u64)> = HashMap::new();
    let mut clock: u64 = 0;
    for order in inbox {
        match order {
            Order::Forget(job_id) => {
                kept.remove(&job_id);
            }
            Order::Advance {
                workflow,
                task,
                reply,
            } => {
                clock += 1;
                let previous = kept.remove(&task.job_id).map(|(run, _)| run);
                let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut run = match (task.since_arrival, previous) {
                        (Some(since), Some(run)) if run.continues(&task, since) => run,
                        (Some(_), _) => return (Answer::NeedsHistory, None),
                        (None, _) => Run::start(&workflow, &task),
                    };
                    let decided = run.advance(&task);
                    let keep = decided.goes_on && capacity > 0;
                    let answer = Answer::Decided {
                        commands: decided.commands,
                        sticky_horizon: keep.then_some(decided.horizon),
                    };
                    (answer, keep.then_some(run))
                }));
                let answer = match answer {
                    Ok((answer, run)) => {
                        if let Some(run) = run {
                            if kept.len() >= capacity {
                                evict_oldest(&mut kept);
                            }
                            kept.insert(task.job_id, (run, clock));
                        }
                        answer
                    }
                    Err(_) => {
                        tracing::error!(job_id = %task.job_id, "replaying a workflow task failed; it is handed out again when its lease expires");
                        continue;
                    }
                };
                // The worker stopped waiting (it is shutting down): nothing to do.
                let _ = reply.send(answer);
            }
        }
    }
}

fn evict_oldest(kept: &mut HashMap<Uuid, (Run, u64)>) {
    if let Some(oldest) = kept
        .iter()
        .min_by_key(|(_, (_, used))| *used)
        .map(|(id, _)| *id)
    {
        kept.remove(&oldest);
    }
}
