//! People stepping in: the user's "try the fallback" button (a manual attempt), an
//! operator cancelling a stuck attempt out-of-band, and the owner cancelling a job.

use serde_json::json;
use uuid::Uuid;

use super::{actor, compensation, retry_transient, visible, Engine, Events};
use crate::error::EngineError;
use crate::model::{
    event, ActivityStatus, AttemptStatus, AttemptView, ErrorInfo, JobKind, JobStatus, JobView,
    Scope,
};
use crate::store::{JobClosing, LiveAttemptsCancellation};

impl Engine {
    /// Creates an attempt of activity `seq` of a job at `provider`, on the owner's
    /// request.
    ///
    /// Checks, in order: job closed or slot taken → [`EngineError::ActivityCompleted`];
    /// a live attempt → [`EngineError::AttemptInFlight`]; a provider outside the list, or
    /// a non-primary provider without a passing certification for the current contract →
    /// [`EngineError::ProviderNotCertified`]. Any number of racing requests create at most
    /// one attempt (invariant 2).
    pub async fn create_attempt(
        &self,
        scope: &Scope,
        job_id: Uuid,
        seq: i32,
        provider: &str,
    ) -> Result<AttemptView, EngineError> {
        let owner = self.owner_of_job(scope, job_id).await?;
        retry_transient!(self.create_attempt_once(&owner, job_id, seq, provider))
    }

    async fn create_attempt_once(
        &self,
        owner: &str,
        job_id: Uuid,
        seq: i32,
        provider: &str,
    ) -> Result<AttemptView, EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let activity = tx
            .activity_by_seq(owner, job_id, seq)
            .await?
            .ok_or(EngineError::NotFound)?;
        if job.status.is_closed() || activity.status.is_closed() || activity.completed_by.is_some()
        {
            return Err(EngineError::ActivityCompleted);
        }
        let attempts = tx.attempts_of_activity(owner, activity.id).await?;
        if let Some(live) = attempts.iter().find(|a| a.status.is_live()) {
            return Err(EngineError::AttemptInFlight {
                attempt_id: live.id,
                status: live.status,
            });
        }
        if let Err(reason) = self
            .certified(tx.as_mut(), owner, &activity, provider)
            .await?
        {
            return Err(EngineError::ProviderNotCertified {
                provider: provider.to_owned(),
                reason,
            });
        }
        let number = attempts.iter().map(|a| a.number).max().unwrap_or(0) + 1;
        let attempt_id = self
            .schedule_attempt(tx.as_mut(), &activity, provider, number, 0)
            .await?;
        let mut events = Events::for_job(owner, job_id);
        events.push(
            event::ATTEMPT_SCHEDULED,
            Some(attempt_id),
            &actor::client(owner),
            json!({ "seq": seq, "provider": provider, "number": number, "reason": "manual" }),
        );
        events.flush(tx.as_mut(), &self.metrics).await?;
        let attempt = tx
            .attempt(owner, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        tx.commit().await?;
        Ok(attempt.view())
    }

    /// Cancels a live attempt out-of-band, on an operator's word.
    ///
    /// Guarantees: `scheduled`, `started` and `unknown` attempts become `cancelled` with
    /// `cancelled_by` and the reason; the retry policy then moves the activity on (an
    /// `unknown` attempt stops blocking it). Repeating answers the cancelled attempt
    /// again. A finished attempt answers [`EngineError::AttemptNotCancellable`]. A late
    /// result of a cancelled attempt still takes part in the CAS.
    pub async fn cancel_attempt(
        &self,
        operator: &str,
        attempt_id: Uuid,
        reason: &str,
    ) -> Result<AttemptView, EngineError> {
        if reason.trim().is_empty() {
            return Err(EngineError::invalid_request("reason: required"));
        }
        let location = self
            .store
            .locate_attempt(&Scope::AllOwners, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        retry_transient!(self.cancel_attempt_once(
            &location.owner_id,
            location.job_id,
            attempt_id,
            operator,
            reason
        ))
    }

    async fn cancel_attempt_once(
        &self,
        owner: &str,
        job_id: Uuid,
        attempt_id: Uuid,
        operator: &str,
        reason: &str,
    ) -> Result<AttemptView, EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let attempt = tx
            .attempt(owner, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        match attempt.status {
            AttemptStatus::Cancelled => return Ok(attempt.view()),
            s if s.is_finished() => return Err(EngineError::AttemptNotCancellable { status: s }),
            _ => {}
        }
        if !tx
            .cancel_attempt(owner, attempt_id, operator, reason)
            .await?
        {
            return Err(EngineError::AttemptNotCancellable {
                status: attempt.status,
            });
        }
        let mut events = Events::for_job(owner, job_id);
        events.push(
            event::ATTEMPT_CANCELLED,
            Some(attempt_id),
            &actor::operator(operator),
            json!({ "reason": reason, "cancelled_by": operator, "was": attempt.status }),
        );
        tracing::warn!(%job_id, %attempt_id, owner, operator, reason, was = %attempt.status, "attempt cancelled by operator");
        self.after_attempt_end(
            tx.as_mut(),
            &mut events,
            &job,
            &attempt,
            AttemptStatus::Cancelled,
            false,
        )
        .await?;
        events.flush(tx.as_mut(), &self.metrics).await?;
        let cancelled = tx
            .attempt(owner, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        tx.commit().await?;
        Ok(cancelled.view())
    }

    /// Cancels a job: the owner gives up the intent.
    ///
    /// Guarantees: the job becomes `cancelled`, its open activities close (so every later
    /// result is `lost`), and its live attempts become `cancelled` (their heartbeats then
    /// answer `cancel_requested: true`). Repeating answers the cancelled job again. A job
    /// already `succeeded` or `failed` answers [`EngineError::JobFinished`].
    ///
    /// A workflow job whose workflow declared a compensation bound (and is not parked) is
    /// not closed at once: the cancel is recorded (`cancel_requested_at`, event
    /// `cancel_requested`), its open activities close as above, and the workflow is woken
    /// to compensate; the job stays `running` until the workflow returns or the bound
    /// passes, then ends `cancelled`. Repeating meanwhile changes nothing.
    ///
    /// A child job wakes its parent in the same transaction. Then, each in a transaction
    /// of its own, a workflow job's open child jobs are cancelled the same way
    /// (grandchildren too); a child already finished is left alone.
    pub async fn cancel_job(&self, scope: &Scope, job_id: Uuid) -> Result<JobView, EngineError> {
        let owner = self.owner_of_job(scope, job_id).await?;
        retry_transient!(self.cancel_job_once(&owner, job_id))?;
        let view = self.job(scope, job_id).await?;
        // After the job's own cancellation committed (so a child closing at the same
        // time, which locks child then parent, never waits on this in a cycle). Only a
        // workflow job has children.
        if view.kind == JobKind::Workflow && !view.children.is_empty() {
            self.cancel_children(&owner, job_id).await;
        }
        Ok(view)
    }

    async fn cancel_job_once(&self, owner: &str, job_id: Uuid) -> Result<(), EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        match job.status {
            JobStatus::Cancelled => return Ok(()),
            JobStatus::Succeeded | JobStatus::Failed => return Err(EngineError::JobFinished),
            JobStatus::Queued | JobStatus::Running => {}
        }
        let who = actor::client(owner);
        let mut events = Events::for_job(owner, job_id);
        if job.kind == JobKind::Workflow && job.wf_cancel_requested_at.is_some() {
            // Compensating already: the cancel was recorded once.
            return Ok(());
        }
        if job.kind == JobKind::Workflow && compensation::compensates(&job) {
            if compensation::request_cancel(tx.as_mut(), &mut events, &job, &who).await? {
                events.flush(tx.as_mut(), &self.metrics).await?;
                tx.commit().await?;
            }
            return Ok(());
        }
        let error = ErrorInfo::new("job_cancelled", "the job was cancelled by its owner");
        close_open_activities(
            tx.as_mut(),
            &mut events,
            owner,
            job_id,
            &error,
            owner,
            &who,
            "job cancelled",
        )
        .await?;
        if !tx
            .close_job(&JobClosing {
                owner,
                job_id,
                version: job.version,
                status: JobStatus::Cancelled,
                error: Some(&error),
            })
            .await?
        {
            return Err(EngineError::JobFinished);
        }
        events.push(event::JOB_CANCELLED, None, &who, json!({}));
        self.job_closed(tx.as_mut(), &job, JobStatus::Cancelled)
            .await?;
        events.flush(tx.as_mut(), &self.metrics).await?;
        tx.commit().await?;
        tracing::info!(%job_id, owner, "job cancelled");
        Ok(())
    }

    /// The owner of a job visible in `scope`.
    pub(super) async fn owner_of_job(
        &self,
        scope: &Scope,
        job_id: Uuid,
    ) -> Result<String, EngineError> {
        let owner = self
            .store
            .job_owner(scope, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        visible(scope, &owner)?;
        Ok(owner)
    }
}

/// Closes every open activity of a job (cancelled, `error` recorded) and cancels their
/// live attempts, as `cancelled_by` for `reason`: the job is closing (or its workflow is
/// told of its cancel), so no later result may take a slot and no worker should keep
/// working. Returns the ids of the activities it closed.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn close_open_activities(
    tx: &mut dyn crate::store::StoreTx,
    events: &mut Events,
    owner: &str,
    job_id: Uuid,
    error: &ErrorInfo,
    cancelled_by: &str,
    actor: &str,
    reason: &str,
) -> Result<Vec<Uuid>, EngineError> {
    let mut closed = Vec::new();
    for activity in tx.activities_of_job(owner, job_id).await? {
        if activity.status.is_closed() {
            continue;
        }
        tx.close_activity(owner, activity.id, ActivityStatus::Cancelled, Some(error))
            .await?;
        closed.push(activity.id);
        for (attempt, was) in tx
            .cancel_live_attempts(&LiveAttemptsCancellation {
                owner,
                activity_id: activity.id,
                except: None,
                cancelled_by,
                reason,
            })
            .await?
        {
            events.push(
                event::ATTEMPT_CANCELLED,
                Some(attempt),
                actor,
                json!({ "reason": reason, "cancelled_by": cancelled_by, "was": was }),
            );
        }
    }
    Ok(closed)
}
