//! Completing an attempt: fencing (invariant 5), the output contract (invariant 6) and the
//! CAS commit that lets exactly one result win (invariant 4).

use serde_json::{json, Value};
use uuid::Uuid;

use std::collections::{HashMap, HashSet};

use super::batch::Settled;
use super::{actor, retry_transient, ClaimRequest, Engine, Events};
use crate::error::EngineError;
use crate::model::{
    event, ActivityTask, AttemptStatus, CompletionOutcome, Contract, ErrorInfo, JobKind, JobStatus,
    Scope,
};
use crate::store::{ActivityResultCommit, Arrival, AttemptEnding, LiveAttemptsCancellation};
use crate::store::{AttemptRow, ClaimFilter, JobRow, LockedAttempt, StoreTx, WinningResult};

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
        // Concurrent completions share one transaction, each judged under its job's lock.
        let item = BatchedCompletion {
            engine: self.clone(),
            scope: scope.clone(),
            attempt_id,
            completion: completion.clone(),
        };
        if let Some(answer) = self.batches.completions.call(item).await {
            return answer;
        }
        retry_transient!(self.complete_once(scope, attempt_id, completion))
    }

    /// Reports how several attempts ended, each judged exactly as [`Engine::complete`]
    /// judges it alone, with its own fencing, contract check and CAS; one answer per
    /// completion, in order. The completions share transactions with each other and with
    /// concurrent calls, never an outcome: one refused completion changes nothing for
    /// the others.
    pub async fn complete_many(
        &self,
        scope: &Scope,
        completions: &[(Uuid, Completion)],
    ) -> Vec<Result<CompletionOutcome, EngineError>> {
        // Queued together, so they share as few flushes as the batch size allows.
        let items = completions
            .iter()
            .map(|(attempt_id, completion)| BatchedCompletion {
                engine: self.clone(),
                scope: scope.clone(),
                attempt_id: *attempt_id,
                completion: completion.clone(),
            });
        let settled = self.batches.completions.call_many(items).await;
        let mut answers = Vec::with_capacity(completions.len());
        for ((attempt_id, completion), settled) in completions.iter().zip(settled) {
            answers.push(match settled {
                Some(answer) => answer,
                None => retry_transient!(self.complete_once(scope, *attempt_id, completion)),
            });
        }
        answers
    }

    async fn complete_once(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
        completion: &Completion,
    ) -> Result<CompletionOutcome, EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job_of_attempt(scope, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let attempt = tx
            .attempt(&job.owner_id, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let mut events = Events::for_job(&job.owner_id, job.id);
        let answer = match self
            .judge(
                tx.as_mut(),
                &job,
                &attempt,
                completion,
                &mut events,
                &mut ContractMemo::default(),
            )
            .await?
        {
            Verdict::Answer(answer) => answer,
            Verdict::Cas(result) => {
                let win = WinningResult::of(&job, &attempt, result);
                // Invariant 4: the CAS commit. The first result to arrive takes the slot.
                let (won, job_won) = tx
                    .commit_activity_job_result(&win, &LIVE_OR_CANCELLED)
                    .await?;
                Ok(self
                    .settle_cas(tx.as_mut(), &mut events, &job, &attempt, won, job_won)
                    .await?)
            }
        };
        events.flush(tx.as_mut(), &self.metrics).await?;
        tx.commit().await?;
        answer
    }

    /// Completes many attempts in one transaction: their jobs are locked together (in
    /// one order, so batches never deadlock each other) and each completion is judged as
    /// [`Engine::complete`] judges it alone, with its own guards. An attempt or a job met
    /// twice in one batch is left to the single path (`None`), after this one commits.
    pub(crate) async fn complete_batch(
        &self,
        items: Vec<BatchedCompletion>,
    ) -> Settled<Result<CompletionOutcome, EngineError>> {
        match self.complete_batch_once(&items).await {
            Ok(answers) => answers,
            Err(e) => {
                tracing::debug!(error = %e, batch = items.len(), "batched completion failed; each completes alone");
                items.iter().map(|_| None).collect()
            }
        }
    }

    async fn complete_batch_once(
        &self,
        items: &[BatchedCompletion],
    ) -> Result<Settled<Result<CompletionOutcome, EngineError>>, EngineError> {
        Ok(self.complete_batch_and_claim_once(items, None).await?.0)
    }

    /// Reports how several attempts ended and hands out attempts as [`Engine::claim`]
    /// does: a worker's whole cycle in one call. Each completion is judged exactly as
    /// [`Engine::complete`] judges it alone and answered on its own; the claim never
    /// waits on a lock (`SKIP LOCKED`), so it adds no lock cycle. A request
    /// [`Engine::claim`] would refuse is refused before any completion is judged.
    ///
    /// Where the store runs write transactions at the same time
    /// ([`Store::concurrent_writes`](crate::store::Store::concurrent_writes)), the
    /// completions and the claim run at once, each in a transaction of its own: the claim
    /// neither waits for the completions' locks nor sees work they schedule (the next
    /// poll does). Otherwise both share one transaction, the claim last, so that it may
    /// hand out what the completions scheduled. Either way, if the completions'
    /// transaction fails they are done apart, each with its own answer.
    #[allow(clippy::type_complexity)]
    pub async fn complete_and_claim(
        &self,
        scope: &Scope,
        completions: &[(Uuid, Completion)],
        request: &ClaimRequest,
    ) -> Result<
        (
            Vec<Result<CompletionOutcome, EngineError>>,
            Result<Vec<ActivityTask>, EngineError>,
        ),
        EngineError,
    > {
        let filter = Self::claim_filter(scope, request)?;
        let items: Vec<BatchedCompletion> = completions
            .iter()
            .map(|(attempt_id, completion)| BatchedCompletion {
                engine: self.clone(),
                scope: scope.clone(),
                attempt_id: *attempt_id,
                completion: completion.clone(),
            })
            .collect();
        self.metrics
            .batch_items
            .with_label_values(&["completions"])
            .observe(items.len() as f64);
        if self.store.concurrent_writes() {
            // Two connections, two commits at once: the cycle takes as long as the longer
            // of the two, not their sum (docs/performance.md, "2026-12-06, second session").
            let claim = async {
                match filter.as_ref() {
                    Some(filter) => retry_transient!(self.claim_once(filter)),
                    None => Ok(Vec::new()),
                }
            };
            let (answers, tasks) = tokio::join!(
                self.complete_batched(scope, completions, &items, None),
                claim
            );
            return Ok((answers.0, tasks));
        }
        Ok(self
            .complete_batched(scope, completions, &items, filter.as_ref())
            .await)
    }

    /// The completions `items` (the same as `completions`) in one transaction, followed in
    /// it by the claim `claim`; if that transaction fails, each completion is done alone
    /// and the claim in a transaction of its own.
    #[allow(clippy::type_complexity)]
    async fn complete_batched(
        &self,
        scope: &Scope,
        completions: &[(Uuid, Completion)],
        items: &[BatchedCompletion],
        claim: Option<&ClaimFilter>,
    ) -> (
        Vec<Result<CompletionOutcome, EngineError>>,
        Result<Vec<ActivityTask>, EngineError>,
    ) {
        match self.complete_batch_and_claim_once(items, claim).await {
            Ok((settled, tasks)) => {
                let mut answers = Vec::with_capacity(completions.len());
                for ((attempt_id, completion), settled) in completions.iter().zip(settled) {
                    answers.push(match settled {
                        Some(answer) => answer,
                        None => {
                            retry_transient!(self.complete_once(scope, *attempt_id, completion))
                        }
                    });
                }
                (answers, Ok(tasks))
            }
            Err(e) => {
                tracing::debug!(error = %e, completions = completions.len(), "batched completions failed; doing them apart");
                let answers = self.complete_many(scope, completions).await;
                let tasks = match claim {
                    Some(filter) => retry_transient!(self.claim_once(filter)),
                    None => Ok(Vec::new()),
                };
                (answers, tasks)
            }
        }
    }

    async fn complete_batch_and_claim_once(
        &self,
        items: &[BatchedCompletion],
        claim: Option<&ClaimFilter>,
    ) -> Result<
        (
            Settled<Result<CompletionOutcome, EngineError>>,
            Vec<ActivityTask>,
        ),
        EngineError,
    > {
        let mut ids: Vec<Uuid> = items.iter().map(|i| i.attempt_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut tx = self.begin().await?;
        let locked = tx.lock_jobs_of_attempts(&ids).await?;
        // The contracts came with the attempts: judging reads none.
        let mut contracts = ContractMemo::default();
        for l in &locked {
            contracts.know(&l.job.owner_id, &l.attempt.activity, l.contract.clone());
        }
        let mut seen_attempts = HashSet::new();
        let mut seen_jobs = HashSet::new();
        let mut all_events = Vec::new();
        let mut answers = Vec::with_capacity(items.len());
        // Valid results of activity jobs, judged by one CAS statement after the loop.
        let mut cas = Vec::new();
        for item in items {
            if !seen_attempts.insert(item.attempt_id) {
                answers.push(None);
                continue;
            }
            let Some(LockedAttempt { job, attempt, .. }) =
                locked.iter().find(|l| l.attempt.id == item.attempt_id)
            else {
                answers.push(Some(Err(EngineError::NotFound)));
                continue;
            };
            // Owner isolation: an attempt outside the caller's scope is not found.
            if !item.scope.allows(&job.owner_id) {
                answers.push(Some(Err(EngineError::NotFound)));
                continue;
            }
            if !seen_jobs.insert((job.owner_id.as_str(), job.id)) {
                answers.push(None);
                continue;
            }
            let mut events = Events::for_job(&job.owner_id, job.id);
            match self
                .judge(
                    tx.as_mut(),
                    job,
                    attempt,
                    &item.completion,
                    &mut events,
                    &mut contracts,
                )
                .await?
            {
                Verdict::Answer(answer) => {
                    all_events.extend(events.pending);
                    answers.push(Some(answer));
                }
                Verdict::Cas(result) => {
                    cas.push((
                        answers.len(),
                        job,
                        attempt,
                        WinningResult::of(job, attempt, result),
                    ));
                    answers.push(None);
                }
            }
        }
        if !cas.is_empty() {
            // Invariant 4: one CAS per result, all in one statement; each takes its
            // activity's slot only if its version is still the one its attempt read.
            let wins: Vec<WinningResult> = cas.iter().map(|(_, _, _, w)| w.clone()).collect();
            let taken = tx
                .commit_activity_job_results(&wins, &LIVE_OR_CANCELLED)
                .await?;
            for ((at, job, attempt, _), (won, job_won)) in cas.into_iter().zip(taken) {
                let mut events = Events::for_job(&job.owner_id, job.id);
                let answer = self
                    .settle_cas(tx.as_mut(), &mut events, job, attempt, won, job_won)
                    .await?;
                all_events.extend(events.pending);
                answers[at] = Some(Ok(answer));
            }
        }
        // The claim comes last: the completions may have scheduled work it can hand out.
        let mut tasks = Vec::new();
        if let Some(filter) = claim {
            let (claimed, events) = self.claim_in(tx.as_mut(), filter).await?;
            all_events.extend(events);
            tasks = claimed;
        }
        tx.append_events(&all_events).await?;
        self.metrics
            .events_written(all_events.iter().map(|e| e.kind));
        tx.commit().await?;
        Ok((answers, tasks))
    }

    /// Judges one completion of `attempt` under its job's lock: the answer, or, for a
    /// valid result of an activity job, that the CAS decides. An error aborts the
    /// transaction.
    async fn judge<'c>(
        &self,
        tx: &mut dyn StoreTx,
        job: &JobRow,
        attempt: &AttemptRow,
        completion: &'c Completion,
        events: &mut Events,
        contracts: &mut ContractMemo,
    ) -> Result<Verdict<'c>, EngineError> {
        let (owner, job_id, attempt_id) = (job.owner_id.as_str(), job.id, attempt.id);
        // Invariant 5: only the holder of the lease token may complete.
        if attempt.lease_token != Some(completion.lease_token) && !crate::mutants::off("fencing") {
            tracing::warn!(%job_id, %attempt_id, owner, "completion with a wrong lease token refused");
            return Ok(Verdict::Answer(Err(EngineError::LeaseLost)));
        }
        if let Some(first) = attempt.completion_outcome {
            return Ok(Verdict::Answer(repeat(first, attempt)));
        }
        if !LIVE_OR_CANCELLED.contains(&attempt.status) {
            return Ok(Verdict::Answer(Err(EngineError::LeaseLost)));
        }
        if let Some(started) = attempt.started_at {
            let ran = (self.clock.now() - started).num_milliseconds().max(0) as f64 / 1000.0;
            self.metrics.attempt_seconds.observe(ran);
        }
        if let Some(refusal) = self
            .refuse_unstorable(tx, events, job, attempt, &completion.body)
            .await?
        {
            return Ok(Verdict::Answer(Err(refusal)));
        }
        if attempt.status == AttemptStatus::Cancelled
            && matches!(completion.body, CompletionBody::Result(_))
            && self.predates_resume(tx, owner, attempt).await?
        {
            // A late result of an attempt made before a resume reopened its activity:
            // that slot was closed when it ended; the reopened one is the fresh
            // attempts'.
            return self
                .settle_cas(tx, events, job, attempt, false, false)
                .await
                .map(|o| Verdict::Answer(Ok(o)));
        }
        match &completion.body {
            CompletionBody::Result(result) => {
                if let Some(violation) = self
                    .refuse_invalid(tx, events, job, attempt, result, contracts)
                    .await?
                {
                    return Ok(Verdict::Answer(Err(violation)));
                }
                if job.kind == JobKind::Activity {
                    return Ok(Verdict::Cas(result));
                }
                self.commit_workflow_activity_result(tx, events, job, attempt, result)
                    .await
                    .map(|o| Verdict::Answer(Ok(o)))
            }
            CompletionBody::Error { message, retryable } => self
                .record_error(tx, events, job, attempt, message, *retryable)
                .await
                .map(Verdict::Answer),
        }
    }

    /// Whether `attempt` was made before a resume last reopened its activity (its number
    /// at most the activity's `resumed_after`).
    async fn predates_resume(
        &self,
        tx: &mut dyn StoreTx,
        owner: &str,
        attempt: &AttemptRow,
    ) -> Result<bool, EngineError> {
        let resumed_after = tx
            .activity_resumed_after(owner, attempt.activity_id)
            .await?
            .unwrap_or(0);
        Ok(attempt.number <= resumed_after)
    }

    /// Invariant 6: a result that fails the output contract is never committed. Marks
    /// the attempt `invalid` and returns the violation to answer; `None` for a valid one.
    async fn refuse_invalid(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        attempt: &AttemptRow,
        result: &Value,
        contracts: &mut ContractMemo,
    ) -> Result<Option<EngineError>, EngineError> {
        let owner = job.owner_id.as_str();
        let Some(contract) = contracts.current(tx, owner, &attempt.activity).await? else {
            return Ok(None);
        };
        let errors = self.contracts.violations(&contract, result)?;
        if errors.is_empty() {
            return Ok(None);
        }
        let violation = EngineError::ContractViolation {
            contract_hash: contract.contract_hash.clone(),
            errors: errors.clone(),
        };
        let mut error = ErrorInfo::new("contract_violation", violation.to_string());
        error.details = Some(violation.details());
        tracing::warn!(job_id = %job.id, attempt_id = %attempt.id, owner, "result violates the output contract");
        self.mark_invalid(
            tx,
            events,
            job,
            attempt,
            &error,
            CompletionOutcome::ContractViolation,
        )
        .await?;
        Ok(Some(violation))
    }

    /// A result or error that no store can hold as sent (a U+0000 character anywhere in
    /// it) is refused, never left to fail the transaction: the attempt is `invalid`, as
    /// after a contract violation, so the policy moves on instead of the worker retrying
    /// a completion that can never be written until its lease runs out. Returns the
    /// refusal to answer; `None` when the completion can be stored.
    async fn refuse_unstorable(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        attempt: &AttemptRow,
        body: &CompletionBody,
    ) -> Result<Option<EngineError>, EngineError> {
        let at = match body {
            CompletionBody::Result(result) => crate::text::nul_in_json(result, "result"),
            CompletionBody::Error { message, .. } => {
                crate::text::has_nul(message).then(|| "error.message".to_owned())
            }
        };
        let Some(at) = at else {
            return Ok(None);
        };
        let refusal = EngineError::InvalidResult {
            reason: crate::text::nul_message(&at),
        };
        let mut error = ErrorInfo::new("invalid_result", refusal.to_string());
        error.details = Some(refusal.details());
        tracing::warn!(job_id = %job.id, attempt_id = %attempt.id, owner = job.owner_id.as_str(), at, "result cannot be stored; the attempt is invalid");
        self.mark_invalid(
            tx,
            events,
            job,
            attempt,
            &error,
            CompletionOutcome::InvalidResult,
        )
        .await?;
        Ok(Some(refusal))
    }

    /// Ends `attempt` as `invalid` with `error` (what its first completion answers from
    /// now on is `outcome`), and lets the policy move on unless it was cancelled already.
    async fn mark_invalid(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        attempt: &AttemptRow,
        error: &ErrorInfo,
        outcome: CompletionOutcome,
    ) -> Result<(), EngineError> {
        tx.finish_attempt(&AttemptEnding {
            owner: &job.owner_id,
            attempt_id: attempt.id,
            from: &LIVE_OR_CANCELLED,
            to: AttemptStatus::Invalid,
            error: Some(error),
            outcome: Some(outcome),
        })
        .await?;
        let worker = actor::worker(attempt.worker_id.as_deref().unwrap_or("?"));
        events.push(
            event::ATTEMPT_INVALID,
            Some(attempt.id),
            &worker,
            json!({ "error": error }),
        );
        if attempt.status != AttemptStatus::Cancelled {
            self.after_attempt_end(tx, events, job, attempt, AttemptStatus::Invalid, false)
                .await?;
        }
        Ok(())
    }

    /// The CAS commit of a valid result of a workflow's activity (invariant 4): the
    /// activity's slot only; the workflow decides what the job does next.
    async fn commit_workflow_activity_result(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        attempt: &AttemptRow,
        result: &Value,
    ) -> Result<CompletionOutcome, EngineError> {
        let owner = job.owner_id.as_str();
        let read_version = attempt.read_version.unwrap_or(-1);
        let won = tx
            .commit_activity_result(&ActivityResultCommit {
                owner,
                activity_id: attempt.activity_id,
                read_version,
                attempt_id: attempt.id,
                result,
            })
            .await?;
        if won {
            tx.finish_attempt(&AttemptEnding {
                owner,
                attempt_id: attempt.id,
                from: &LIVE_OR_CANCELLED,
                to: AttemptStatus::Succeeded,
                error: None,
                outcome: Some(CompletionOutcome::Won),
            })
            .await?;
            // The slot is taken: the workflow can go on.
            tx.mark_workflow_ready(owner, job.id, Arrival::Activity(attempt.activity_id))
                .await?;
        }
        self.settle_cas(tx, events, job, attempt, won, false).await
    }

    /// What follows the CAS of a result: for a winner (`won`, and `job_won` when it also
    /// took the job's slot) its events and the cancellation of live siblings; for a
    /// loser the attempt becomes `lost` with a `race_lost` event.
    async fn settle_cas(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        attempt: &AttemptRow,
        won: bool,
        job_won: bool,
    ) -> Result<CompletionOutcome, EngineError> {
        let owner = job.owner_id.as_str();
        let worker = actor::worker(attempt.worker_id.as_deref().unwrap_or("?"));
        if won {
            events.push(
                event::ATTEMPT_SUCCEEDED,
                Some(attempt.id),
                &worker,
                json!({ "provider": attempt.provider, "number": attempt.number }),
            );
            if job_won {
                events.push(
                    event::JOB_SUCCEEDED,
                    Some(attempt.id),
                    actor::ENGINE,
                    json!({ "completed_by": attempt.id }),
                );
                // An activity job has no parent: this changes nothing, and takes no lock.
                self.job_closed(tx, job, JobStatus::Succeeded).await?;
            }
            // The slot is taken: no other attempt of this activity may run on. Only a
            // cancelled winner can have a live sibling (invariant 2: a live winner was
            // the activity's one live attempt).
            if attempt.status == AttemptStatus::Cancelled {
                for (other, _) in tx
                    .cancel_live_attempts(&LiveAttemptsCancellation {
                        owner,
                        activity_id: attempt.activity_id,
                        except: Some(attempt.id),
                        cancelled_by: actor::ENGINE,
                        reason: "another attempt won",
                    })
                    .await?
                {
                    events.push(
                        event::ATTEMPT_CANCELLED,
                        Some(other),
                        actor::ENGINE,
                        json!({ "reason": "another attempt won", "winner": attempt.id }),
                    );
                }
            }
            tracing::debug!(job_id = %job.id, attempt_id = %attempt.id, owner, provider = %attempt.provider, "attempt won");
            return Ok(CompletionOutcome::Won);
        }

        let winner = tx
            .activity(owner, attempt.activity_id)
            .await?
            .and_then(|a| a.completed_by);
        tx.finish_attempt(&AttemptEnding {
            owner,
            attempt_id: attempt.id,
            from: &LIVE_OR_CANCELLED,
            to: AttemptStatus::Lost,
            error: None,
            outcome: Some(CompletionOutcome::Lost),
        })
        .await?;
        events.push(
            event::RACE_LOST,
            Some(attempt.id),
            &worker,
            json!({ "provider": attempt.provider, "number": attempt.number, "winner": winner,
                    "reason": if winner.is_some() { "another attempt won" } else { "the result slot was closed" } }),
        );
        tracing::warn!(job_id = %job.id, attempt_id = %attempt.id, owner, provider = %attempt.provider, winner = ?winner, "race_lost: late result discarded");
        Ok(CompletionOutcome::Lost)
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
        let to = if live {
            AttemptStatus::Failed
        } else {
            attempt.status
        };
        tx.finish_attempt(&AttemptEnding {
            owner,
            attempt_id: attempt.id,
            from: &LIVE_OR_CANCELLED,
            to,
            error: Some(&error),
            outcome: Some(CompletionOutcome::Recorded),
        })
        .await?;
        events.push(
            event::ATTEMPT_FAILED,
            Some(attempt.id),
            &worker,
            json!({ "error": error, "status": to }),
        );
        if live {
            self.after_attempt_end(tx, events, job, attempt, AttemptStatus::Failed, retryable)
                .await?;
        }
        Ok(Ok(CompletionOutcome::Recorded))
    }
}

/// What judging a completion decided.
enum Verdict<'c> {
    /// The answer, with what it changed written in the transaction.
    Answer(Result<CompletionOutcome, EngineError>),
    /// A valid result of an activity job: the CAS decides whether it wins.
    Cas(&'c Value),
}

/// One completion waiting for a batch; it carries its engine, so a batch needs no
/// engine of its own.
pub(crate) struct BatchedCompletion {
    pub(crate) engine: Engine,
    scope: Scope,
    attempt_id: Uuid,
    completion: Completion,
}

/// The current output contracts read in one transaction, by (owner, activity): a batch
/// reads each once.
#[derive(Default)]
struct ContractMemo(HashMap<(String, String), Option<Contract>>);

impl ContractMemo {
    /// Records the current contract of `activity` for `owner`, read with its attempt.
    fn know(&mut self, owner: &str, activity: &str, contract: Option<Contract>) {
        self.0
            .insert((owner.to_owned(), activity.to_owned()), contract);
    }

    async fn current(
        &mut self,
        tx: &mut dyn StoreTx,
        owner: &str,
        activity: &str,
    ) -> Result<Option<Contract>, EngineError> {
        let key = (owner.to_owned(), activity.to_owned());
        if let Some(contract) = self.0.get(&key) {
            return Ok(contract.clone());
        }
        let contract = tx.current_contract(owner, activity).await?;
        self.0.insert(key, contract.clone());
        Ok(contract)
    }
}

/// The answer a repeated completion gets: exactly what the first got.
fn repeat(
    first: CompletionOutcome,
    attempt: &AttemptRow,
) -> Result<CompletionOutcome, EngineError> {
    let details = attempt
        .error
        .as_ref()
        .and_then(|e| e.details.clone())
        .unwrap_or_default();
    if first == CompletionOutcome::InvalidResult {
        return Err(EngineError::InvalidResult {
            reason: details["reason"].as_str().unwrap_or_default().to_owned(),
        });
    }
    if first != CompletionOutcome::ContractViolation {
        return Ok(first);
    }
    Err(EngineError::ContractViolation {
        contract_hash: details["contract_hash"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        errors: details["errors"]
            .as_array()
            .map(|errs| {
                errs.iter()
                    .filter_map(|e| e.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    })
}
