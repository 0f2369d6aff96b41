//! What happens after an attempt ends (docs/api.md): retry the same provider with backoff,
//! fail over to the next certified provider, wait for a person, or fail the activity with
//! `providers_exhausted`. Runs inside the transaction that ended the attempt, under the
//! job lock.

use serde_json::json;
use uuid::Uuid;

use super::{actor, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ActivityStatus, AttemptStatus, ErrorInfo, Failover, JobKind, JobStatus};
use crate::store::{ActivityRow, AttemptRow, JobRow, NewAttempt, StoreTx};
use crate::store::{Arrival, JobClosing};

/// Why a provider may not take over an activity, or `Ok` when it may.
pub(crate) type Certified = Result<(), String>;

impl Engine {
    /// Whether `provider` may run `activity` of `owner` (invariant 6): the primary (first
    /// provider) always may; any other needs its latest certification for the activity's
    /// current output contract to have passed.
    pub(crate) async fn certified(
        &self,
        tx: &mut dyn StoreTx,
        owner: &str,
        activity: &ActivityRow,
        provider: &str,
    ) -> Result<Certified, EngineError> {
        match activity.providers.iter().position(|p| p == provider) {
            None => {
                return Ok(Err(format!(
                    "`{provider}` is not in the activity's provider list"
                )))
            }
            Some(0) => return Ok(Ok(())),
            Some(_) => {}
        }
        let Some(contract) = tx.current_contract(owner, &activity.name).await? else {
            return Ok(Err(format!(
                "`{provider}` is not certified for the current contract: activity `{}` has no output contract registered, so no certification can exist",
                activity.name
            )));
        };
        let certification = tx
            .latest_certification(owner, &activity.name, provider, &contract.contract_hash)
            .await?;
        Ok(match certification {
            Some(c) if c.passed => Ok(()),
            Some(_) => Err(format!(
                "`{provider}` is not certified for the current contract {}: its latest certification failed",
                contract.contract_hash
            )),
            None => Err(format!(
                "`{provider}` is not certified for the current contract {}: it has no certification for it",
                contract.contract_hash
            )),
        })
    }

    /// Decides and applies the next step after `ended` reached a definitive end
    /// (`failed`, `invalid`, `expired` or `cancelled`) while its activity is open.
    pub(crate) async fn after_attempt_end(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        ended: &AttemptRow,
        ended_status: AttemptStatus,
        retryable: bool,
    ) -> Result<(), EngineError> {
        let owner = job.owner_id.as_str();
        let Some(activity) = tx.activity(owner, ended.activity_id).await? else {
            return Ok(());
        };
        if job.status.is_closed() || activity.status.is_closed() {
            return Ok(());
        }
        let attempts = tx.attempts_of_activity(owner, activity.id).await?;
        if attempts.iter().any(|a| a.status.is_live()) {
            return Ok(());
        }
        let next_number = attempts.iter().map(|a| a.number).max().unwrap_or(0) + 1;
        let options = &activity.options;

        if options.failover == Failover::Manual {
            tx.set_activity_status(
                owner,
                activity.id,
                &[
                    ActivityStatus::Scheduled,
                    ActivityStatus::Running,
                    ActivityStatus::Blocked,
                ],
                ActivityStatus::Waiting,
            )
            .await?;
            events.push(
                event::ACTIVITY_WAITING,
                Some(ended.id),
                actor::ENGINE,
                json!({ "seq": activity.seq, "after": ended_status, "failover": "manual" }),
            );
            return Ok(());
        }

        // The retry budget counts the attempts made since the activity was last resumed
        // (a resume gives it a fresh budget).
        let resumed_after = tx
            .activity_resumed_after(owner, activity.id)
            .await?
            .unwrap_or(0);
        let made_here = attempts
            .iter()
            .filter(|a| a.provider == ended.provider && a.number > resumed_after)
            .count() as u32;
        if ended_status == AttemptStatus::Failed
            && retryable
            && made_here < options.retry.max_attempts_per_provider
        {
            let delay_ms = options.retry.backoff_ms(made_here.saturating_sub(1));
            let attempt = self
                .schedule_attempt(tx, &activity, &ended.provider, next_number, delay_ms)
                .await?;
            events.push(
                event::ATTEMPT_SCHEDULED,
                Some(attempt),
                actor::ENGINE,
                json!({ "seq": activity.seq, "provider": ended.provider, "number": next_number,
                        "reason": "retry", "delay_ms": delay_ms }),
            );
            return Ok(());
        }

        let start = activity
            .providers
            .iter()
            .position(|p| *p == ended.provider)
            .map_or(0, |i| i + 1);
        // Why each later provider was passed over, for the error if none is left.
        let mut skipped: Vec<String> = Vec::new();
        for provider in &activity.providers[start..] {
            match self.certified(tx, owner, &activity, provider).await? {
                Ok(()) => {
                    let attempt = self
                        .schedule_attempt(tx, &activity, provider, next_number, 0)
                        .await?;
                    events.push(
                        event::FAILOVER,
                        Some(attempt),
                        actor::ENGINE,
                        json!({ "seq": activity.seq, "from": ended.provider, "to": provider,
                                "number": next_number, "after": ended_status }),
                    );
                    tracing::info!(job_id = %job.id, owner, from = %ended.provider, to = %provider, "failover");
                    return Ok(());
                }
                Err(reason) => {
                    events.push(
                        event::FAILOVER_SKIPPED,
                        None,
                        actor::ENGINE,
                        json!({ "seq": activity.seq, "provider": provider, "reason": reason }),
                    );
                    tracing::info!(job_id = %job.id, owner, provider = %provider, %reason, "failover skipped");
                    skipped.push(reason);
                }
            }
        }

        let mut message = format!(
            "activity `{}` failed: no provider left to try after `{}` ({ended_status})",
            activity.name, ended.provider
        );
        if !skipped.is_empty() {
            message.push_str("; passed over: ");
            message.push_str(&skipped.join("; "));
            message.push_str(
                " (failover moves only to a provider certified for the current contract)",
            );
        }
        let error = ErrorInfo::new("providers_exhausted", message);
        tx.close_activity(owner, activity.id, ActivityStatus::Failed, Some(&error))
            .await?;
        events.push(
            event::ACTIVITY_FAILED,
            None,
            actor::ENGINE,
            json!({ "seq": activity.seq, "error": error }),
        );
        if job.kind == JobKind::Activity
            && tx
                .close_job(&JobClosing {
                    owner,
                    job_id: job.id,
                    version: job.version,
                    status: JobStatus::Failed,
                    error: Some(&error),
                })
                .await?
        {
            events.push(
                event::JOB_FAILED,
                None,
                actor::ENGINE,
                json!({ "error": error }),
            );
            self.job_closed(tx, job, JobStatus::Failed).await?;
        }
        if job.kind == JobKind::Workflow {
            // The activity failed for good: the workflow sees the error and decides.
            tx.mark_workflow_ready(owner, job.id, Arrival::Activity(activity.id))
                .await?;
        }
        tracing::warn!(job_id = %job.id, owner, activity = %activity.name, "providers exhausted");
        Ok(())
    }

    /// Creates the next attempt of an activity and marks the activity `scheduled`.
    pub(crate) async fn schedule_attempt(
        &self,
        tx: &mut dyn StoreTx,
        activity: &ActivityRow,
        provider: &str,
        number: i32,
        delay_ms: u64,
    ) -> Result<Uuid, EngineError> {
        let attempt = NewAttempt {
            owner_id: activity.owner_id.clone(),
            id: Uuid::now_v7(),
            activity_id: activity.id,
            job_id: activity.job_id,
            number,
            activity: activity.name.clone(),
            task_queue: activity.task_queue.clone(),
            provider: provider.to_owned(),
            delay_ms,
            schedule_to_start_timeout_s: activity.options.schedule_to_start_timeout_s,
        };
        let Some(inserted) = tx.insert_attempt(&attempt).await? else {
            let live = tx
                .attempts_of_activity(&activity.owner_id, activity.id)
                .await?
                .into_iter()
                .find(|a| a.status.is_live());
            return Err(match live {
                Some(a) => EngineError::AttemptInFlight {
                    attempt_id: a.id,
                    status: a.status,
                },
                None => EngineError::Internal(crate::error::StoreError::Corrupt(
                    "attempt insert refused without a live attempt".into(),
                )),
            });
        };
        tx.set_activity_status(
            &activity.owner_id,
            activity.id,
            &[
                ActivityStatus::Running,
                ActivityStatus::Blocked,
                ActivityStatus::Waiting,
                ActivityStatus::Scheduled,
            ],
            ActivityStatus::Scheduled,
        )
        .await?;
        tx.notify_work(&activity.task_queue).await?;
        Ok(inserted.id)
    }
}
