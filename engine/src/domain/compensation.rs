//! Cancellation that reaches workflow code: a workflow that declared a compensation bound
//! (`ctx.compensate_within`) is told of its job's cancel instead of being closed at once.
//! The cancel is recorded on the job (guarded by its status and version), numbered in the
//! job's arrival order, its open activities are cancelled, and the workflow is woken; the
//! job stays `running` while the workflow compensates. It ends `cancelled` when the
//! workflow returns (whatever it returns), or when the bound has passed (the deadlines'
//! pass beside the reaper, or a workflow task that completes too late), once.

use serde_json::{json, Value};
use uuid::Uuid;

use super::intervene::close_open_activities;
use super::{actor, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ErrorInfo, JobStatus};
use crate::store::{Arrival, JobRow, StoreTx};

/// The most a workflow may declare as its compensation bound: 24 h.
pub(crate) const MAX_COMPENSATION_MS: u64 = 24 * 3600 * 1000;

/// The error a job cancelled by its owner carries (the same as a job cancelled at once).
pub(crate) fn cancelled_by_owner() -> ErrorInfo {
    ErrorInfo::new("job_cancelled", "the job was cancelled by its owner")
}

/// Whether a cancel of `job` reaches its workflow (it declared a bound, and can still
/// run: a parked workflow is closed at once, as a workflow without a bound).
pub(crate) fn compensates(job: &JobRow) -> bool {
    job.wf_compensation_ms.is_some() && !job.wf_parked
}

/// The owner cancels `job` (locked by `tx`, open, a workflow that [`compensates`], with
/// no cancel recorded yet): records the request and its deadline, numbers the cancel in
/// the job's arrival order, cancels its open activities (each numbered after the cancel,
/// so replay resolves their steps by the cancellation rule) and wakes the workflow.
/// `false` when the guarded update changed nothing (nothing else is done then).
pub(crate) async fn request_cancel(
    tx: &mut dyn StoreTx,
    events: &mut Events,
    job: &JobRow,
    who: &str,
) -> Result<bool, EngineError> {
    let owner = job.owner_id.as_str();
    if !tx
        .request_workflow_cancel(owner, job.id, job.version)
        .await?
    {
        return Ok(false);
    }
    let within_ms = job.wf_compensation_ms.unwrap_or(0);
    let deadline = tx.now().await? + chrono::Duration::milliseconds(within_ms);
    tx.mark_workflow_ready(owner, job.id, Arrival::Cancel)
        .await?;
    events.push(
        event::CANCEL_REQUESTED,
        None,
        who,
        json!({ "within_ms": within_ms, "deadline": deadline }),
    );
    let error = cancelled_by_owner();
    let closed = close_open_activities(
        tx,
        events,
        owner,
        job.id,
        &error,
        owner,
        who,
        "job cancelled",
    )
    .await?;
    for activity_id in closed {
        tx.mark_workflow_ready(owner, job.id, Arrival::Activity(activity_id))
            .await?;
    }
    tracing::info!(job_id = %job.id, owner, within_ms, "job cancel requested: the workflow compensates");
    Ok(true)
}

/// The workflow of `job` (whose cancel was requested) returned `outcome` (its result, or
/// its error) in the task that moved the job to `version`: the job ends `cancelled`, its
/// still-open activities are cancelled, and `job_cancelled` carries what it returned.
/// `true` when it ended the job (a stale version changes nothing).
pub(crate) async fn end(
    tx: &mut dyn StoreTx,
    events: &mut Events,
    job: &JobRow,
    version: i64,
    outcome: Result<&Value, &ErrorInfo>,
) -> Result<bool, EngineError> {
    let owner = job.owner_id.as_str();
    let mut error = cancelled_by_owner();
    if let Err(failed) = outcome {
        error.message = format!(
            "{}; its compensation failed: {}: {}",
            error.message, failed.code, failed.message
        );
    }
    if !tx.end_compensation(owner, job.id, version, &error).await? {
        return Ok(false);
    }
    close_open_activities(
        tx,
        events,
        owner,
        job.id,
        &cancelled_by_owner(),
        actor::ENGINE,
        actor::ENGINE,
        "job cancelled",
    )
    .await?;
    let compensation = match outcome {
        Ok(result) => json!({ "result": result }),
        Err(error) => json!({ "error": error }),
    };
    events.push(
        event::JOB_CANCELLED,
        None,
        actor::ENGINE,
        json!({ "compensation": compensation }),
    );
    tracing::info!(job_id = %job.id, owner, "cancelled job compensated");
    Ok(true)
}

/// Ends a job (locked by `tx`) whose compensation bound passed, if it is still open and
/// overdue: `cancelled`, its open activities cancelled, events `compensation_timed_out`
/// then `job_cancelled`. `true` when it closed it.
pub(crate) async fn end_overdue(
    tx: &mut dyn StoreTx,
    events: &mut Events,
    owner: &str,
    job_id: Uuid,
    who: &str,
) -> Result<bool, EngineError> {
    let mut error = cancelled_by_owner();
    error.message = format!(
        "{}; its compensation did not finish within its bound",
        error.message
    );
    if !tx.close_overdue_compensation(owner, job_id, &error).await? {
        return Ok(false);
    }
    events.push(event::COMPENSATION_TIMED_OUT, None, who, json!({}));
    close_open_activities(
        tx,
        events,
        owner,
        job_id,
        &cancelled_by_owner(),
        who,
        who,
        "compensation timed out",
    )
    .await?;
    events.push(
        event::JOB_CANCELLED,
        None,
        who,
        json!({ "compensation": { "timed_out": true } }),
    );
    tracing::warn!(%job_id, owner, "compensation timed out: job cancelled");
    Ok(true)
}

impl Engine {
    /// Closes up to `limit` jobs whose compensation bound passed, once each (safe in many
    /// engines: each is locked without waiting, and the close is guarded by status and
    /// deadline). Returns how many were due and how many it closed.
    pub(crate) async fn close_overdue_compensations(
        &self,
        limit: i64,
    ) -> Result<(u64, u64), EngineError> {
        let mut tx = self.begin().await?;
        let due = tx.lock_due_compensations(limit).await?;
        let mut closed = 0;
        let mut all_events = Vec::new();
        for (owner, job_id) in &due {
            let mut events = Events::for_job(owner, *job_id);
            if end_overdue(tx.as_mut(), &mut events, owner, *job_id, actor::REAPER).await? {
                closed += 1;
                // A child job wakes its parent (the job is locked by this transaction).
                if let Some(job) = tx.lock_job(owner, *job_id).await? {
                    self.job_closed(tx.as_mut(), &job, JobStatus::Cancelled)
                        .await?;
                }
            }
            all_events.extend(events.pending);
        }
        tx.append_events(&all_events).await?;
        self.metrics
            .events_written(all_events.iter().map(|e| e.kind));
        tx.commit().await?;
        Ok((due.len() as u64, closed))
    }
}
