//! Resume: a failed job (or a parked workflow) runs again under its own id and key, one
//! intent still one job (docs/workflows.md, "Resuming a failed job"). Nothing recorded is
//! rewritten: attempts and events are only appended, and outcomes a workflow already
//! used (succeeded activities, fired timers, taken signals, children's outcomes) stay.

use serde_json::json;
use uuid::Uuid;

use super::{actor, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ActivityStatus, JobKind, JobStatus, JobView, Principal, Role, Scope};
use crate::store::{ActivityRow, StoreTx};

/// The error code a workflow's own failure leaves on the activities it cancelled.
const CLOSED_BY_WORKFLOW_FAILURE: &str = "workflow_failed";

impl Engine {
    /// Resumes job `job_id` on `by`'s word, for `reason` (required, not blank, else
    /// [`EngineError::InvalidRequest`]). A client resumes its owner's jobs, an operator
    /// any owner's; another owner's job is [`EngineError::NotFound`].
    ///
    /// Guarantees: only a `failed` job, or a workflow job parked with an error, resumes;
    /// any other is [`EngineError::JobNotResumable`], and so is the loser of concurrent
    /// resumes (the state change is one guarded update of the job at the version read).
    /// The job keeps its id and key, becomes `running` with its error cleared, and gets
    /// a `job_resumed` event (actor `client:<owner>` or `operator:<name>`, `reason`).
    /// - A failed activity job's activity reopens with a fresh attempt at its first
    ///   provider and a fresh retry budget.
    /// - A failed workflow's failed activities, and those its failure cancelled, reopen
    ///   the same way; it gets a fresh workflow task, so its code is replayed over its
    ///   recorded outcomes (never run again) and runs the failed step again.
    /// - A parked workflow is unparked and gets a fresh workflow task, for the code
    ///   deployed now to replay.
    ///
    /// Attempts made before the resume stay as they were; a late result of one of them is
    /// `lost`. A child that failed after its parent saw the failure keeps, in its
    /// parent's history, the failure the parent saw.
    pub async fn resume_job(
        &self,
        by: &Principal,
        job_id: Uuid,
        reason: &str,
    ) -> Result<JobView, EngineError> {
        if reason.trim().is_empty() {
            return Err(EngineError::invalid_request("reason: required, not blank"));
        }
        let (scope, who) = match by.role {
            Role::Client => (Scope::Owner(by.owner.clone()), actor::client(&by.owner)),
            Role::Operator => (Scope::AllOwners, actor::operator(&by.owner)),
            Role::Worker | Role::Admin => return Err(EngineError::Forbidden),
        };
        let owner = self.owner_of_job(&scope, job_id).await?;
        retry_transient!(self.resume_job_once(&owner, job_id, &who, reason))?;
        self.job(&scope, job_id).await
    }

    async fn resume_job_once(
        &self,
        owner: &str,
        job_id: Uuid,
        who: &str,
        reason: &str,
    ) -> Result<(), EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let refused = EngineError::JobNotResumable {
            status: job.status,
            parked: job.wf_parked,
        };
        let parked = job.kind == JobKind::Workflow && job.wf_parked && !job.status.is_closed();
        if job.status != JobStatus::Failed && !parked {
            return Err(refused);
        }
        // The resume guard: the job at the version read, failed or parked.
        if !tx.resume_job(owner, job_id, job.version).await? {
            return Err(refused);
        }
        let mut events = Events::for_job(owner, job_id);
        events.push(
            event::JOB_RESUMED,
            None,
            who,
            json!({ "reason": reason, "was": job.status, "parked": job.wf_parked,
                    "error": job.error }),
        );
        if job.status == JobStatus::Failed {
            for activity in tx.activities_of_job(owner, job_id).await? {
                if reopens(job.kind, &activity) {
                    self.reopen(tx.as_mut(), &mut events, &activity, who)
                        .await?;
                }
            }
        }
        if job.kind == JobKind::Workflow {
            // A fresh workflow task (the update made the job ready): wake the pollers.
            tx.notify_work(&job.task_queue).await?;
        }
        events.flush(tx.as_mut(), &self.metrics).await?;
        tx.commit().await?;
        tracing::info!(%job_id, owner, actor = who, reason, was = %job.status, parked = job.wf_parked, "job resumed");
        Ok(())
    }

    /// Reopens a closed activity nobody won with a fresh attempt at its first provider and
    /// a fresh retry budget (attempts so far count toward none).
    async fn reopen(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        activity: &ActivityRow,
        who: &str,
    ) -> Result<(), EngineError> {
        let owner = activity.owner_id.as_str();
        let last = tx
            .attempts_of_activity(owner, activity.id)
            .await?
            .iter()
            .map(|a| a.number)
            .max()
            .unwrap_or(0);
        if !tx.reopen_activity(owner, activity.id, last).await? {
            return Ok(());
        }
        let Some(provider) = activity.providers.first() else {
            return Err(EngineError::Internal(crate::error::StoreError::Corrupt(
                "an activity without providers".into(),
            )));
        };
        let number = last + 1;
        let attempt = self
            .schedule_attempt(tx, activity, provider, number, 0)
            .await?;
        events.push(
            event::ATTEMPT_SCHEDULED,
            Some(attempt),
            who,
            json!({ "seq": activity.seq, "provider": provider, "number": number,
                    "reason": "resume" }),
        );
        Ok(())
    }
}

/// Whether a resume reopens `activity` of a failed job of `kind`: an activity job's
/// activity when nobody won it; a workflow's failed activities, and those its failure
/// cancelled (still running when the workflow returned its error).
fn reopens(kind: JobKind, activity: &ActivityRow) -> bool {
    if activity.completed_by.is_some() {
        return false;
    }
    match (kind, activity.status) {
        (_, ActivityStatus::Failed) => true,
        (JobKind::Activity, ActivityStatus::Cancelled) => true,
        (JobKind::Workflow, ActivityStatus::Cancelled) => activity
            .error
            .as_ref()
            .is_some_and(|e| e.code == CLOSED_BY_WORKFLOW_FAILURE),
        _ => false,
    }
}
