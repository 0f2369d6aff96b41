//! Completing an attempt: fencing (invariant 5), the output contract (invariant 6) and the
//! CAS commit that lets exactly one result win (invariant 4).

use serde_json::{json, Value};
use uuid::Uuid;

use super::{actor, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, AttemptStatus, CompletionOutcome, ErrorInfo, JobKind, Scope};
use crate::store::{AttemptRow, JobRow, StoreTx};

/// A worker's report of how an attempt ended.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The attempt's fencing token, as handed out with the task.
    pub lease_token: Uuid,
    /// The result or the error.
    pub body: CompletionBody,
}

/// A result or an error.
#[derive(Debug, Clone)]
pub enum CompletionBody {
    /// The provider's result, to be validated and committed by CAS.
    Result(Value),
    /// The provider failed; `retryable` says whether the same provider may try again.
    Error {
        /// What went wrong, for humans.
        message: String,
        /// Whether the same provider may try again (within the retry budget).
        retryable: bool,
    },
}

const LIVE_OR_CANCELLED: [AttemptStatus; 4] = [
    AttemptStatus::Started,
    AttemptStatus::Unknown,
    AttemptStatus::Scheduled,
    AttemptStatus::Cancelled,
];

impl Engine {
    /// Reports how an attempt ended.
    ///
    /// Guarantees: a wrong lease token answers [`EngineError::LeaseLost`] and changes
    /// nothing. A result that fails the activity's output contract marks the attempt
    /// `invalid`, is never committed, and answers [`EngineError::ContractViolation`]. A
    /// valid result takes the activity's result slot by compare-and-swap (`won`) or, when
    /// another attempt won or the job was closed, is dropped and logged as `race_lost`
    /// (`lost`). The first result to arrive wins, whichever attempt left first. An error
    /// answers `recorded` and lets the retry policy decide. Repeating a completion
    /// answers exactly what the first answered.
    pub async fn complete(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
        completion: &Completion,
    ) -> Result<CompletionOutcome, EngineError> {
        retry_transient!(self.complete_once(scope, attempt_id, completion))
    }

    async fn complete_once(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
        completion: &Completion,
    ) -> Result<CompletionOutcome, EngineError> {
        let mut tx = self.begin().await?;
        let job = tx.lock_job_of_attempt(scope, attempt_id).await?.ok_or(EngineError::NotFound)?;
        let (owner, job_id) = (job.owner_id.as_str(), job.id);
        let attempt = tx.attempt(owner, attempt_id).await?.ok_or(EngineError::NotFound)?;
        // Invariant 5: only the holder of the lease token may complete.
        if attempt.lease_token != Some(completion.lease_token) {
            tracing::warn!(%job_id, %attempt_id, owner, "completion with a wrong lease token refused");
            return Err(EngineError::LeaseLost);
        }
        if let Some(first) = attempt.completion_outcome {
            return repeat(first, &attempt);
        }
        if !LIVE_OR_CANCELLED.contains(&attempt.status) {
            return Err(EngineError::LeaseLost);
        }
        if let Some(started) = attempt.started_at {
            let ran = (chrono::Utc::now() - started).num_milliseconds().max(0) as f64 / 1000.0;
            self.metrics.attempt_seconds.observe(ran);
        }
        let mut events = Events::for_job(owner, job_id);
        let answer = match &completion.body {
            CompletionBody::Result(result) => {
                self.commit_result(tx.as_mut(), &mut events, &job, &attempt, result).await?
            }
            CompletionBody::Error { message, retryable } => {
                self.record_error(tx.as_mut(), &mut events, &job, &attempt, message, *retryable)
                    .await?
            }
        };
        events.flush(tx.as_mut(), &self.metrics).await?;
        tx.commit().await?;
        answer
    }

    /// Validates and commits a result. Returns the answer to give after the commit.
    async fn commit_result(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        attempt: &AttemptRow,
        result: &Value,
    ) -> Result<Result<CompletionOutcome, EngineError>, EngineError> {
        let owner = job.owner_id.as_str();
        let worker = actor::worker(attempt.worker_id.as_deref().unwrap_or("?"));

        // Invariant 6: a result that fails the output contract is never committed.
        if let Some(contract) = tx.current_contract(owner, &attempt.activity).await? {
            let errors = self.contracts.violations(&contract, result)?;
            if !errors.is_empty() {
                let violation = EngineError::ContractViolation {
                    contract_hash: contract.contract_hash.clone(),
                    errors: errors.clone(),
                };
                let mut error = ErrorInfo::new("contract_violation", violation.to_string());
                error.details = Some(violation.details());
                tx.finish_attempt(owner, attempt.id, &LIVE_OR_CANCELLED, AttemptStatus::Invalid, Some(&error), Some(CompletionOutcome::ContractViolation))
                    .await?;
                events.push(event::ATTEMPT_INVALID, Some(attempt.id), &worker, json!({ "error": error }));
                tracing::warn!(job_id = %job.id, attempt_id = %attempt.id, owner, "result violates the output contract");
                if attempt.status != AttemptStatus::Cancelled {
                    self.after_attempt_end(tx, events, job, attempt, AttemptStatus::Invalid, false).await?;
                }
                return Ok(Err(violation));
            }
        }

        let read_version = attempt.read_version.unwrap_or(-1);
        // Invariant 4: the CAS commit. The first result to arrive takes the slot.
        let (won, job_won) = if job.kind == JobKind::Activity {
            tx.commit_activity_job_result(owner, job.id, job.version, attempt.activity_id, read_version, attempt.id, &LIVE_OR_CANCELLED, result)
                .await?
        } else if tx.commit_activity_result(owner, attempt.activity_id, read_version, attempt.id, result).await? {
            tx.finish_attempt(owner, attempt.id, &LIVE_OR_CANCELLED, AttemptStatus::Succeeded, None, Some(CompletionOutcome::Won))
                .await?;
            (true, false)
        } else {
            (false, false)
        };
        if won {
            events.push(event::ATTEMPT_SUCCEEDED, Some(attempt.id), &worker, json!({ "provider": attempt.provider, "number": attempt.number }));
            if job_won {
                events.push(event::JOB_SUCCEEDED, Some(attempt.id), actor::ENGINE, json!({ "completed_by": attempt.id }));
            }
            if job.kind == JobKind::Workflow {
                // The slot is taken: the workflow can go on.
                tx.mark_workflow_ready(owner, job.id).await?;
            }
            // The slot is taken: no other attempt of this activity may run on. Only a
            // cancelled winner can have a live sibling (invariant 2: a live winner was
            // the activity's one live attempt).
            if attempt.status == AttemptStatus::Cancelled {
                for (other, _) in tx.cancel_live_attempts(owner, attempt.activity_id, Some(attempt.id), actor::ENGINE, "another attempt won").await? {
                    events.push(event::ATTEMPT_CANCELLED, Some(other), actor::ENGINE, json!({ "reason": "another attempt won", "winner": attempt.id }));
                }
            }
            tracing::info!(job_id = %job.id, attempt_id = %attempt.id, owner, provider = %attempt.provider, "attempt won");
            return Ok(Ok(CompletionOutcome::Won));
        }

        let winner = tx.activity(owner, attempt.activity_id).await?.and_then(|a| a.completed_by);
        tx.finish_attempt(owner, attempt.id, &LIVE_OR_CANCELLED, AttemptStatus::Lost, None, Some(CompletionOutcome::Lost))
            .await?;
        events.push(
            event::RACE_LOST,
            Some(attempt.id),
            &worker,
            json!({ "provider": attempt.provider, "number": attempt.number, "winner": winner,
                    "reason": if winner.is_some() { "another attempt won" } else { "the result slot was closed" } }),
        );
        tracing::warn!(job_id = %job.id, attempt_id = %attempt.id, owner, provider = %attempt.provider, winner = ?winner, "race_lost: late result discarded");
        Ok(Ok(CompletionOutcome::Lost))
    }

    /// Records an error. Only a live attempt's error moves the activity on.
    async fn record_error(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        attempt: &AttemptRow,
        message: &str,
        retryable: bool,
    ) -> Result<Result<CompletionOutcome, EngineError>, EngineError> {
        let owner = job.owner_id.as_str();
        let worker = actor::worker(attempt.worker_id.as_deref().unwrap_or("?"));
        let mut error = ErrorInfo::new("activity_error", message);
        error.retryable = Some(retryable);
        let live = attempt.status.is_live();
        // A cancelled attempt stays cancelled: the error is recorded and nothing moves.
        let to = if live { AttemptStatus::Failed } else { attempt.status };
        tx.finish_attempt(owner, attempt.id, &LIVE_OR_CANCELLED, to, Some(&error), Some(CompletionOutcome::Recorded))
            .await?;
        events.push(event::ATTEMPT_FAILED, Some(attempt.id), &worker, json!({ "error": error, "status": to }));
        if live {
            self.after_attempt_end(tx, events, job, attempt, AttemptStatus::Failed, retryable).await?;
        }
        Ok(Ok(CompletionOutcome::Recorded))
    }
}

/// The answer a repeated completion gets: exactly what the first got.
fn repeat(first: CompletionOutcome, attempt: &AttemptRow) -> Result<CompletionOutcome, EngineError> {
    if first != CompletionOutcome::ContractViolation {
        return Ok(first);
    }
    let details = attempt.error.as_ref().and_then(|e| e.details.clone()).unwrap_or_default();
    Err(EngineError::ContractViolation {
        contract_hash: details["contract_hash"].as_str().unwrap_or_default().to_owned(),
        errors: details["errors"]
            .as_array()
            .map(|errs| errs.iter().filter_map(|e| e.as_str().map(str::to_owned)).collect())
            .unwrap_or_default(),
    })
}
