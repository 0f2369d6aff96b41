//! Child workflows: a workflow job starts another workflow job of the same owner (its
//! child) under the idempotency key `{parent_job_id}:child:{seq}`, in the transaction of
//! the parent's workflow task, through the same guarded insert as any job (invariant 1),
//! so a replayed parent never starts it twice. A child reaching a final status wakes its
//! parent in the same transaction ([`Engine::job_closed`], called by every path that
//! closes a job); cancelling a parent cancels its open children, each in a transaction of
//! its own after the parent's ([`Engine::cancel_children`]), and the reaper heals a crash
//! in between ([`Engine::cancel_children_of_cancelled_parents`]).

use std::future::Future;
use std::pin::Pin;

use serde_json::{json, Value};
use uuid::Uuid;

use super::{actor, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ErrorInfo, JobKind, JobStatus, Scope};
use crate::request::{JobRequest, JobTarget};
use crate::store::{Arrival, ChildRow, JobRow, NewJob, StoreTx};
use onceflow_protocol::workflow::JournalEntry;

/// How many open children of cancelled parents one reaper pass cancels at most.
const ORPHANS_PER_PASS: i64 = 200;

/// The idempotency key of the child a workflow job starts at position `seq`.
pub(crate) fn child_key(parent: Uuid, seq: i32) -> String {
    format!("{parent}:child:{seq}")
}

/// The position a child's key names, if it is a key [`child_key`] made for `parent`.
fn child_seq(parent: Uuid, key: &str) -> Option<i32> {
    key.strip_prefix(&format!("{parent}:child:"))?.parse().ok()
}

/// A child as the parent's journal shows it, at its position: the outcome only once the
/// child is final. A child resumed after its parent saw it fail shows, for ever, the
/// failure the parent saw: the parent's history is never rewritten.
pub(crate) fn journal_entry(parent: Uuid, child: ChildRow) -> Option<JournalEntry> {
    let ChildRow {
        job,
        arrival,
        seen_error,
        seen_finished_at,
    } = child;
    let seq = child_seq(parent, &job.idempotency_key)?;
    if let Some(finished_at) = seen_finished_at {
        return Some(JournalEntry::Child {
            seq,
            workflow: job.workflow.unwrap_or_default(),
            input: job.input,
            child_job_id: job.id,
            status: JobStatus::Failed,
            result: None,
            error: seen_error,
            finished_at: Some(finished_at),
            arrival,
        });
    }
    Some(JournalEntry::Child {
        seq,
        workflow: job.workflow.unwrap_or_default(),
        input: job.input,
        child_job_id: job.id,
        status: job.status,
        result: (job.status == JobStatus::Succeeded)
            .then_some(job.result)
            .flatten(),
        error: job.status.is_closed().then_some(job.error).flatten(),
        finished_at: job.finished_at,
        arrival,
    })
}

/// A `StartChild` command.
pub(crate) struct StartChild<'a> {
    /// Its position in the parent.
    pub seq: i32,
    /// The workflow the child runs.
    pub workflow: &'a str,
    /// Its input.
    pub input: &'a Value,
    /// Its task queue; the parent's when `None`.
    pub task_queue: Option<&'a str>,
}

impl Engine {
    /// Starts the child of `parent` at `start.seq` in the parent's task transaction
    /// (the parent's row locked): a workflow job of the same owner, key
    /// `{parent}:child:{seq}`, inserted unless the key is taken (invariant 1). A child
    /// already there (started by an earlier task) changes nothing. `Some(error)` parks
    /// the parent, visibly: a workflow name or task queue the engine cannot take, or a
    /// key held by a job this parent did not start.
    pub(crate) async fn start_child(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        parent: &JobRow,
        start: &StartChild<'_>,
    ) -> Result<Option<ErrorInfo>, EngineError> {
        let owner = parent.owner_id.as_str();
        let task_queue = start.task_queue.unwrap_or(&parent.task_queue).to_owned();
        let request = JobRequest {
            target: JobTarget::Workflow {
                name: start.workflow.to_owned(),
            },
            input: start.input.clone(),
            task_queue: task_queue.clone(),
        };
        // Validated like a submitted workflow job; a refusal would only bring the same
        // command back with the next replay.
        if let Err(refused) = request.validate() {
            return Ok(Some(ErrorInfo::new(
                refused.code(),
                format!(
                    "commands: child workflow at position {}: {refused}",
                    start.seq
                ),
            )));
        }
        let key = child_key(parent.id, start.seq);
        let child = NewJob {
            owner_id: owner.to_owned(),
            id: Uuid::now_v7(),
            idempotency_key: key.clone(),
            fingerprint: request.fingerprint(),
            kind: JobKind::Workflow,
            workflow: Some(start.workflow.to_owned()),
            activity: None,
            task_queue: task_queue.clone(),
            input: start.input.clone(),
            parent_job_id: Some(parent.id),
        };
        // INSERT … ON CONFLICT DO NOTHING, then read the winner: never read-then-insert.
        let Some(inserted) = tx.insert_job(&child).await? else {
            let holder = tx
                .job_by_idempotency_key(owner, &key)
                .await?
                // The key conflicted but its job is gone (retention): try again.
                .ok_or(EngineError::Internal(crate::error::StoreError::KeyReleased))?;
            if holder.parent_job_id == Some(parent.id) {
                return Ok(None);
            }
            return Ok(Some(ErrorInfo::new(
                "idempotency_key_reused",
                format!(
                    "commands: the child workflow at position {} needs key `{key}`, but job {} holds it and this workflow did not start it",
                    start.seq, holder.id
                ),
            )));
        };
        let mut created = Events::for_job(owner, inserted.id);
        created.push(
            event::JOB_CREATED,
            None,
            actor::ENGINE,
            json!({ "idempotency_key": key, "kind": JobKind::Workflow, "parent_job_id": parent.id }),
        );
        created.flush(tx, &self.metrics).await?;
        tx.notify_work(&task_queue).await?;
        events.push(
            event::CHILD_STARTED,
            None,
            actor::ENGINE,
            json!({ "seq": start.seq, "child_job_id": inserted.id, "workflow": start.workflow }),
        );
        tracing::debug!(parent_job_id = %parent.id, child_job_id = %inserted.id, owner, "child workflow started");
        Ok(None)
    }

    /// Called in the transaction that moved `job` to its final `status`, by every path
    /// that closes a job: if `job` is a child, its parent (locked after the child: the
    /// lock order is child, then parent) is woken with the child's outcome numbered in
    /// its arrival order (once), and gets a `child_finished` event. A job without a
    /// parent (every activity job, every submitted job) changes nothing.
    pub(crate) async fn job_closed(
        &self,
        tx: &mut dyn StoreTx,
        job: &JobRow,
        status: JobStatus,
    ) -> Result<(), EngineError> {
        let Some(parent) = job.parent_job_id else {
            return Ok(());
        };
        let owner = job.owner_id.as_str();
        if tx.lock_job(owner, parent).await?.is_none() {
            // The parent was pruned: nobody waits.
            return Ok(());
        }
        tx.mark_workflow_ready(owner, parent, Arrival::Child(job.id))
            .await?;
        let mut events = Events::for_job(owner, parent);
        events.push(
            event::CHILD_FINISHED,
            None,
            actor::ENGINE,
            json!({ "child_job_id": job.id, "status": status }),
        );
        events.flush(tx, &self.metrics).await?;
        Ok(())
    }

    /// The cancel cascade, after `parent`'s cancellation committed: each open child is
    /// cancelled through [`Engine::cancel_job`] (so its own children follow), each in a
    /// transaction of its own. A child already finished is left alone. Failures are
    /// logged: the parent's cancel stands, and the reaper cancels what is left.
    pub(crate) fn cancel_children<'a>(
        &'a self,
        owner: &'a str,
        parent: Uuid,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        // Boxed as a `Send` future: the cascade recurses through `cancel_job`.
        Box::pin(async move {
            let children = match self.children_of(owner, parent).await {
                Ok(children) => children,
                Err(e) => {
                    tracing::warn!(%parent, owner, error = %e, "reading the children of a cancelled job failed; the reaper cancels them");
                    return;
                }
            };
            let scope = Scope::Owner(owner.to_owned());
            for child in children {
                if matches!(child.status, JobStatus::Succeeded | JobStatus::Failed) {
                    continue;
                }
                // A cancelled child is cancelled again (a repeat): its own cascade runs,
                // in case a crash cut it short.
                match self.cancel_job(&scope, child.id).await {
                    Ok(_) | Err(EngineError::JobFinished | EngineError::NotFound) => {}
                    Err(e) => {
                        tracing::warn!(%parent, child_job_id = %child.id, owner, error = %e, "cancelling a child failed; the reaper cancels it");
                    }
                }
            }
        })
    }

    /// The children of `parent`, read in a transaction that changes nothing.
    async fn children_of(&self, owner: &str, parent: Uuid) -> Result<Vec<JobRow>, EngineError> {
        let mut tx = self.begin().await?;
        let children = tx.children_of_job(owner, parent).await?;
        drop(tx);
        Ok(children.into_iter().map(|c| c.job).collect())
    }

    /// Reaper: cancels open children whose parent is cancelled (the cascade after a
    /// parent's cancel was cut short, e.g. by a crash), as the owner's cancel does.
    /// Returns how many it cancelled.
    pub(crate) async fn cancel_children_of_cancelled_parents(&self) -> Result<u64, EngineError> {
        let orphans = self
            .store
            .open_children_of_cancelled_parents(ORPHANS_PER_PASS)
            .await?;
        let mut cancelled = 0;
        for (owner, child) in orphans {
            match self.cancel_job(&Scope::Owner(owner.clone()), child).await {
                Ok(_) => {
                    cancelled += 1;
                    tracing::info!(%child, owner, "open child of a cancelled parent cancelled");
                }
                Err(EngineError::JobFinished | EngineError::NotFound) => {}
                Err(e) => {
                    self.metrics.pass_item_failed("reaper");
                    tracing::error!(%child, owner, error = %e, "cancelling an open child of a cancelled parent failed; tried again at the next pass");
                }
            }
        }
        Ok(cancelled)
    }
}
