//! Workflow jobs: workflow tasks leased like attempts, the journal a worker replays, the
//! commands it answers with (applied in one transaction under the workflow-task CAS), and
//! durable timers. Workflow code runs in workers, never here.

use serde_json::json;
use uuid::Uuid;

use super::children::StartChild;
use super::history::{history, recorded_at, workflow_task};
use super::intervene::close_open_activities;
use super::{actor, compensation, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ErrorInfo, JobKind, JobStatus, Scope};
use crate::request::{canonical_json, JobRequest, JobTarget};
use crate::store::WorkflowClaimFilter;
use crate::store::{Arrival, JobClosing, JobResultCommit};
use crate::store::{ClaimedWorkflowTask, JobRow, NewActivity, NewAttempt, StoreTx};
use crate::ClaimRequest;
use onceflow_protocol::workflow::{
    CompleteWorkflowTaskRequest, JournalEntry, Task, WorkflowCommand, WorkflowTask,
};

/// How a workflow-task completion was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowTaskOutcome {
    /// The commands were applied.
    Applied,
    /// The job moved on since the task read it (another task applied, or the job
    /// closed): nothing changed.
    Stale,
}

impl WorkflowTaskOutcome {
    /// `applied` or `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowTaskOutcome::Applied => "applied",
            WorkflowTaskOutcome::Stale => "stale",
        }
    }
}

impl Engine {
    /// Hands a worker what it can run: workflow tasks of the workflows it registered, then
    /// attempts of its providers, at most `max_tasks` in all.
    pub async fn claim_tasks(
        &self,
        scope: &Scope,
        request: &ClaimRequest,
        workflows: &[String],
    ) -> Result<Vec<Task>, EngineError> {
        request.validate()?;
        let mut tasks: Vec<Task> = Vec::new();
        if !workflows.is_empty() {
            let filter = WorkflowClaimFilter {
                scope: scope.clone(),
                task_queue: request.task_queue.clone(),
                workflows: workflows.to_vec(),
                worker_id: request.worker_id.clone(),
                limit: i64::from(request.max_tasks),
                lease_ms: self.workflow_task_lease.as_millis() as u64,
            };
            let claimed = retry_transient!(self.claim_workflow_tasks(&filter))?;
            tasks.extend(claimed.into_iter().map(Task::Workflow));
        }
        let left = request.max_tasks - tasks.len() as u32;
        if left > 0 && !request.providers.is_empty() {
            let attempts = self
                .claim(
                    scope,
                    &ClaimRequest {
                        max_tasks: left,
                        ..request.clone()
                    },
                )
                .await?;
            tasks.extend(attempts.into_iter().map(Task::Activity));
        }
        Ok(tasks)
    }

    async fn claim_workflow_tasks(
        &self,
        filter: &WorkflowClaimFilter,
    ) -> Result<Vec<WorkflowTask>, EngineError> {
        let mut tx = self.begin().await?;
        let claimed = tx.claim_workflow_tasks(filter).await?;
        let mut tasks = Vec::with_capacity(claimed.len());
        let mut all_events = Vec::new();
        for ClaimedWorkflowTask { job, run } in claimed {
            let Some(lease_token) = job.wf_lease_token else {
                continue;
            };
            let history = history(tx.as_mut(), &job, &run).await?;
            let mut events = Events::for_job(&job.owner_id, job.id);
            events.push(
                event::WORKFLOW_TASK_STARTED,
                None,
                &actor::worker(&filter.worker_id),
                json!({
                    "version": job.version,
                    "journal_len": history.journal.len(),
                    "since_arrival": run.since_arrival,
                }),
            );
            all_events.extend(events.pending);
            tasks.push(workflow_task(&job, &run, lease_token, history));
        }
        tx.append_events(&all_events).await?;
        self.metrics
            .events_written(all_events.iter().map(|e| e.kind));
        tx.commit().await?;
        Ok(tasks)
    }

    /// Applies a workflow task's commands, all or nothing.
    ///
    /// Guarantees: only the holder of the task's lease token may complete it (else
    /// [`EngineError::LeaseLost`]); the commands apply only if the job's version is still
    /// the one the task read, so two workers replaying the same task apply it once and a
    /// stale task changes nothing ([`WorkflowTaskOutcome::Stale`]). A command that
    /// contradicts the journal (a different activity at a recorded position) parks the
    /// job with `nondeterminism`, visibly, instead of re-planning.
    ///
    /// Once the job's cancel was requested, `complete_job` and `fail_job` end it
    /// `cancelled` (event `job_cancelled` with what the workflow returned), and a task
    /// completed after the compensation bound passed is stale: the job ends `cancelled`
    /// then (if the deadlines' pass has not closed it yet) and none of its commands apply.
    pub async fn complete_workflow_task(
        &self,
        scope: &Scope,
        job_id: Uuid,
        request: &CompleteWorkflowTaskRequest,
    ) -> Result<WorkflowTaskOutcome, EngineError> {
        let owner = self
            .store
            .job_owner(scope, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        retry_transient!(self.complete_workflow_task_once(&owner, job_id, request))
    }

    async fn complete_workflow_task_once(
        &self,
        owner: &str,
        job_id: Uuid,
        request: &CompleteWorkflowTaskRequest,
    ) -> Result<WorkflowTaskOutcome, EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        if job.kind != JobKind::Workflow {
            return Err(EngineError::NotFound);
        }
        if let Some(deadline) = job.wf_cancel_deadline {
            if !job.status.is_closed() && deadline <= tx.now().await? {
                // Too late: the compensation bound passed before this task completed.
                let mut events = Events::for_job(owner, job_id);
                compensation::end_overdue(tx.as_mut(), &mut events, owner, job_id, actor::ENGINE)
                    .await?;
                events.flush(tx.as_mut(), &self.metrics).await?;
                tx.commit().await?;
                return Ok(WorkflowTaskOutcome::Stale);
            }
        }
        if job.wf_lease_token != Some(request.lease_token) {
            if job.status.is_closed() || job.version != request.read_version {
                return Ok(WorkflowTaskOutcome::Stale);
            }
            return Err(EngineError::LeaseLost);
        }
        // The workflow-task CAS: one task per job version applies.
        if !tx
            .complete_workflow_task(
                owner,
                job_id,
                request.lease_token,
                request.read_version,
                request.sticky_horizon,
            )
            .await?
        {
            return Ok(WorkflowTaskOutcome::Stale);
        }
        let version = request.read_version + 1;
        let mut events = Events::for_job(owner, job_id);
        events.push(
            event::WORKFLOW_TASK_COMPLETED,
            None,
            actor::ENGINE,
            json!({ "commands": request.commands.len() }),
        );
        let seqs: Vec<i32> = request.commands.iter().filter_map(position).collect();
        let recorded = recorded_at(tx.as_mut(), &job, &seqs).await?;
        for (i, command) in request.commands.iter().enumerate() {
            let unstorable =
                unstorable_command(i, command).or_else(|| misplaced_continue(i, &request.commands));
            let parked = match unstorable {
                Some(error) => Some(error),
                None => {
                    self.apply(tx.as_mut(), &mut events, &job, version, &recorded, command)
                        .await?
                }
            };
            if let Some(error) = parked {
                tx.park_workflow(owner, job_id, &error).await?;
                events.push(
                    event::WORKFLOW_TASK_FAILED,
                    None,
                    actor::ENGINE,
                    json!({ "error": error }),
                );
                tracing::error!(%job_id, owner, code = %error.code, message = %error.message, "workflow parked");
                break;
            }
        }
        events.flush(tx.as_mut(), &self.metrics).await?;
        tx.commit().await?;
        Ok(WorkflowTaskOutcome::Applied)
    }

    /// Applies one command; `Some(error)` parks the workflow.
    async fn apply(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        version: i64,
        recorded: &[JournalEntry],
        command: &WorkflowCommand,
    ) -> Result<Option<ErrorInfo>, EngineError> {
        let owner = job.owner_id.as_str();
        let at = |seq: i32| recorded.iter().find(|e| e.seq() == seq);
        match command {
            WorkflowCommand::ScheduleActivity {
                seq,
                activity,
                providers,
                input,
                options,
            } => {
                if *seq < 0 {
                    return Err(EngineError::invalid_request(
                        "commands: seq must not be negative",
                    ));
                }
                match at(*seq) {
                    Some(JournalEntry::Activity {
                        name, input: was, ..
                    }) if name == activity && canonical_json(was) == canonical_json(input) => {
                        return Ok(None);
                    }
                    Some(other) => {
                        return Ok(Some(nondeterminism(
                            *seq,
                            &format!("activity `{activity}` with input {}", shown(input)),
                            other,
                        )))
                    }
                    None => {}
                }
                let options = options.clone().unwrap_or_default().resolve();
                let request = JobRequest {
                    target: JobTarget::Activity {
                        name: activity.clone(),
                        providers: providers.clone(),
                        options: options.clone(),
                    },
                    input: input.clone(),
                    task_queue: job.task_queue.clone(),
                };
                // A command the engine cannot take parks the workflow, visibly: a refusal
                // would only bring the same command back with the next replay.
                if let Err(refused) = request.validate() {
                    return Ok(Some(ErrorInfo::new(
                        refused.code(),
                        format!("commands: {refused}"),
                    )));
                }
                let activity_id = Uuid::now_v7();
                tx.insert_activity(&NewActivity {
                    owner_id: owner.to_owned(),
                    id: activity_id,
                    job_id: job.id,
                    seq: *seq,
                    name: activity.clone(),
                    providers: providers.clone(),
                    options: options.clone(),
                    task_queue: job.task_queue.clone(),
                    input: input.clone(),
                })
                .await?;
                let attempt = tx
                    .insert_attempt(&NewAttempt {
                        owner_id: owner.to_owned(),
                        id: Uuid::now_v7(),
                        activity_id,
                        job_id: job.id,
                        number: 1,
                        activity: activity.clone(),
                        task_queue: job.task_queue.clone(),
                        provider: providers[0].clone(),
                        delay_ms: 0,
                        schedule_to_start_timeout_s: options.schedule_to_start_timeout_s,
                    })
                    .await?
                    .ok_or_else(|| {
                        EngineError::Internal(crate::error::StoreError::Corrupt(
                            "a new activity had a live attempt".into(),
                        ))
                    })?;
                tx.notify_work(&job.task_queue).await?;
                events.push(event::ATTEMPT_SCHEDULED, Some(attempt.id), actor::ENGINE,
                    json!({ "seq": seq, "activity": activity, "provider": providers[0], "number": 1, "reason": "workflow" }));
            }
            WorkflowCommand::StartTimer { seq, duration_ms } => {
                match at(*seq) {
                    Some(JournalEntry::Timer { .. }) => return Ok(None),
                    Some(other) => return Ok(Some(nondeterminism(*seq, "a timer", other))),
                    None => {}
                }
                if *seq < 0 || *duration_ms > 366 * 24 * 3600 * 1000 {
                    return Err(EngineError::invalid_request(
                        "commands: a timer needs seq >= 0 and at most a year",
                    ));
                }
                let started = tx.insert_timer(owner, job.id, *seq, *duration_ms).await?;
                events.push(
                    event::TIMER_STARTED,
                    None,
                    actor::ENGINE,
                    json!({ "seq": seq, "duration_ms": duration_ms }),
                );
                // A zero-length timer is due as it starts: it fires in this transaction
                // (once: the same guarded statement as the timer loop's), so the workflow
                // is ready again at once instead of at the next reaper pass.
                if started && *duration_ms == 0 && tx.fire_timer(owner, job.id, *seq).await? {
                    tx.mark_workflow_ready(owner, job.id, Arrival::Timer(*seq))
                        .await?;
                    events.push(
                        event::TIMER_FIRED,
                        None,
                        actor::ENGINE,
                        json!({ "seq": seq }),
                    );
                }
            }
            WorkflowCommand::StartChild {
                seq,
                workflow,
                input,
                task_queue,
            } => {
                if *seq < 0 {
                    return Err(EngineError::invalid_request(
                        "commands: seq must not be negative",
                    ));
                }
                match at(*seq) {
                    Some(JournalEntry::Child {
                        workflow: was_workflow,
                        input: was,
                        ..
                    }) if was_workflow == workflow
                        && canonical_json(was) == canonical_json(input) =>
                    {
                        return Ok(None);
                    }
                    Some(other) => {
                        return Ok(Some(nondeterminism(
                            *seq,
                            &format!("child workflow `{workflow}` with input {}", shown(input)),
                            other,
                        )))
                    }
                    None => {}
                }
                let start = StartChild {
                    seq: *seq,
                    workflow,
                    input,
                    task_queue: task_queue.as_deref(),
                };
                return self.start_child(tx, events, job, &start).await;
            }
            WorkflowCommand::DeclareCompensation { within_ms } => {
                if *within_ms > compensation::MAX_COMPENSATION_MS {
                    return Ok(Some(ErrorInfo::new(
                        "invalid_request",
                        format!(
                            "commands: a compensation bound is at most 24 h ({} ms), not {within_ms} ms",
                            compensation::MAX_COMPENSATION_MS
                        ),
                    )));
                }
                let bound = (*within_ms > 0).then_some(*within_ms as i64);
                if tx.declare_compensation(owner, job.id, bound).await? {
                    events.push(
                        event::COMPENSATION_DECLARED,
                        None,
                        actor::ENGINE,
                        json!({ "within_ms": within_ms }),
                    );
                }
            }
            WorkflowCommand::ContinueAsNew { input, .. }
                if job.wf_cancel_requested_at.is_some() =>
            {
                // A cancelled workflow that continues as new has compensated: its job ends.
                if compensation::end(tx, events, job, version, Ok(input)).await? {
                    self.job_closed(tx, job, JobStatus::Cancelled).await?;
                }
            }
            WorkflowCommand::ContinueAsNew { input, first_seq } => {
                return continue_as_new(tx, events, job, version, input, *first_seq).await;
            }
            WorkflowCommand::CompleteJob { result } if job.wf_cancel_requested_at.is_some() => {
                if compensation::end(tx, events, job, version, Ok(result)).await? {
                    self.job_closed(tx, job, JobStatus::Cancelled).await?;
                }
            }
            WorkflowCommand::FailJob { error } if job.wf_cancel_requested_at.is_some() => {
                if compensation::end(tx, events, job, version, Err(error)).await? {
                    self.job_closed(tx, job, JobStatus::Cancelled).await?;
                }
            }
            WorkflowCommand::CompleteJob { result } => {
                if tx
                    .commit_job_result(&JobResultCommit {
                        owner,
                        job_id: job.id,
                        version,
                        attempt_id: None,
                        result,
                    })
                    .await?
                {
                    let error = ErrorInfo::new(
                        "workflow_completed",
                        "the workflow returned before this activity finished",
                    );
                    close_open_activities(
                        tx,
                        events,
                        owner,
                        job.id,
                        &error,
                        actor::ENGINE,
                        actor::ENGINE,
                        "workflow completed",
                    )
                    .await?;
                    events.push(event::JOB_SUCCEEDED, None, actor::ENGINE, json!({}));
                    self.job_closed(tx, job, JobStatus::Succeeded).await?;
                }
            }
            WorkflowCommand::FailJob { error } => {
                if tx
                    .close_job(&JobClosing {
                        owner,
                        job_id: job.id,
                        version,
                        status: JobStatus::Failed,
                        error: Some(error),
                    })
                    .await?
                {
                    let closing = ErrorInfo::new(
                        "workflow_failed",
                        "the workflow failed before this activity finished",
                    );
                    close_open_activities(
                        tx,
                        events,
                        owner,
                        job.id,
                        &closing,
                        actor::ENGINE,
                        actor::ENGINE,
                        "workflow failed",
                    )
                    .await?;
                    events.push(
                        event::JOB_FAILED,
                        None,
                        actor::ENGINE,
                        json!({ "error": error }),
                    );
                    self.job_closed(tx, job, JobStatus::Failed).await?;
                }
            }
            WorkflowCommand::ConsumeSignal { seq, signal_seq } => {
                return self
                    .consume_signal(tx, events, job, recorded, *seq, *signal_seq)
                    .await;
            }
            WorkflowCommand::RecordPatch { id, deprecated } => {
                return record_patch(tx, events, job, id, *deprecated).await;
            }
            WorkflowCommand::FailTask { error } => return Ok(Some(error.clone())),
        }
        Ok(None)
    }

    /// Hands signal `signal_seq` to the wait at position `seq`; `Some(error)` parks the
    /// workflow (the history says otherwise).
    async fn consume_signal(
        &self,
        tx: &mut dyn StoreTx,
        events: &mut Events,
        job: &JobRow,
        recorded: &[JournalEntry],
        seq: i32,
        signal_seq: i64,
    ) -> Result<Option<ErrorInfo>, EngineError> {
        if seq < 0 {
            return Err(EngineError::invalid_request(
                "commands: seq must not be negative",
            ));
        }
        let owner = job.owner_id.as_str();
        if let Some(other) = recorded.iter().find(|e| e.seq() == seq) {
            return Ok(Some(nondeterminism(seq, "a signal", other)));
        }
        let signals = tx.signals_of_job(owner, job.id).await?;
        let Some(signal) = signals.iter().find(|s| s.seq == signal_seq) else {
            return Err(EngineError::invalid_request(format!(
                "commands: the job has no signal {signal_seq}"
            )));
        };
        match signal.consumed_by {
            Some(by) if by == seq => return Ok(None),
            Some(by) => {
                return Ok(Some(ErrorInfo::new(
                    "nondeterminism",
                    format!("at position {seq} the workflow now takes signal {signal_seq}, but its history gave that signal to the wait at position {by}; the job is parked"),
                )))
            }
            None => {}
        }
        if let Some(taken) = signals.iter().find(|s| s.consumed_by == Some(seq)) {
            return Ok(Some(ErrorInfo::new(
                "nondeterminism",
                format!("at position {seq} the workflow now takes signal {signal_seq}, but its history gave that wait signal {}; the job is parked", taken.seq),
            )));
        }
        // A signal is taken once: under the job's lock the guard cannot lose, but the
        // statement checks all the same.
        if !tx.consume_signal(owner, job.id, signal_seq, seq).await? {
            return Ok(Some(ErrorInfo::new(
                "nondeterminism",
                format!("signal {signal_seq} was taken by another wait; the job is parked"),
            )));
        }
        events.push(
            event::SIGNAL_CONSUMED,
            None,
            actor::ENGINE,
            json!({ "seq": seq, "signal_seq": signal_seq, "name": signal.name }),
        );
        Ok(None)
    }

    /// Fires due timers once each (safe in many engines) and wakes their workflows.
    pub(crate) async fn fire_due_timers(&self) -> Result<(u64, u64), EngineError> {
        let mut tx = self.begin().await?;
        let due = tx.lock_due_timers(200).await?;
        let mut fired = 0;
        let mut all_events = Vec::new();
        for (owner, job_id, seq) in &due {
            if !tx.fire_timer(owner, *job_id, *seq).await? {
                continue;
            }
            fired += 1;
            tx.mark_workflow_ready(owner, *job_id, Arrival::Timer(*seq))
                .await?;
            let mut events = Events::for_job(owner, *job_id);
            events.push(
                event::TIMER_FIRED,
                None,
                actor::ENGINE,
                json!({ "seq": seq }),
            );
            all_events.extend(events.pending);
        }
        tx.append_events(&all_events).await?;
        self.metrics
            .events_written(all_events.iter().map(|e| e.kind));
        tx.commit().await?;
        Ok((due.len() as u64, fired))
    }
}

/// Starts `job`'s next run from position `first_seq` with `input`: the open activities of
/// the run that ends are closed, its unfired timers dropped, and the job is ready for the
/// new run's first task. `Some(error)` parks the workflow (a run must start past the
/// current one's first position).
async fn continue_as_new(
    tx: &mut dyn StoreTx,
    events: &mut Events,
    job: &JobRow,
    version: i64,
    input: &serde_json::Value,
    first_seq: i32,
) -> Result<Option<ErrorInfo>, EngineError> {
    let owner = job.owner_id.as_str();
    let run = tx
        .workflow_run(owner, job.id)
        .await?
        .ok_or(EngineError::NotFound)?;
    if first_seq <= run.first_seq {
        return Ok(Some(ErrorInfo::new(
            "invalid_request",
            format!(
                "commands: a run continued as new starts past the current run's first position {}, not at {first_seq}",
                run.first_seq
            ),
        )));
    }
    if !tx
        .continue_as_new(owner, job.id, version, first_seq, input)
        .await?
    {
        return Ok(None);
    }
    let error = ErrorInfo::new(
        "continued_as_new",
        "the workflow continued as new before this activity finished",
    );
    close_open_activities(
        tx,
        events,
        owner,
        job.id,
        &error,
        actor::ENGINE,
        actor::ENGINE,
        "workflow continued as new",
    )
    .await?;
    tx.drop_timers_before(owner, job.id, first_seq).await?;
    tx.notify_work(&job.task_queue).await?;
    events.push(
        event::WORKFLOW_CONTINUED_AS_NEW,
        None,
        actor::ENGINE,
        json!({ "run": run.run + 1, "first_seq": first_seq }),
    );
    Ok(None)
}

/// The position a command takes, if it takes one.
fn position(command: &WorkflowCommand) -> Option<i32> {
    match command {
        WorkflowCommand::ScheduleActivity { seq, .. }
        | WorkflowCommand::StartTimer { seq, .. }
        | WorkflowCommand::ConsumeSignal { seq, .. }
        | WorkflowCommand::StartChild { seq, .. } => Some(*seq),
        _ => None,
    }
}

/// A `continue_as_new` command must be the task's last, and its run must start past every
/// position the task's other commands take: else the workflow is parked, visibly.
fn misplaced_continue(i: usize, commands: &[WorkflowCommand]) -> Option<ErrorInfo> {
    let WorkflowCommand::ContinueAsNew { first_seq, .. } = &commands[i] else {
        return None;
    };
    if i + 1 != commands.len() {
        return Some(ErrorInfo::new(
            "invalid_request",
            format!("commands[{i}]: continue_as_new must be the task's last command"),
        ));
    }
    let highest = commands.iter().filter_map(position).max()?;
    (highest >= *first_seq).then(|| {
        ErrorInfo::new(
            "invalid_request",
            format!(
                "commands[{i}]: the new run's first position {first_seq} is not past position {highest}, which this task takes"
            ),
        )
    })
}

/// Records patch marker `id` for `job` (a marker takes no position, so patches never
/// shift a step); a marker the job has is left as it is. An id outside 1 to 200
/// characters parks the workflow, visibly: the same replay would send it again.
async fn record_patch(
    tx: &mut dyn StoreTx,
    events: &mut Events,
    job: &JobRow,
    id: &str,
    deprecated: bool,
) -> Result<Option<ErrorInfo>, EngineError> {
    let chars = id.chars().count();
    if !(1..=MAX_PATCH_ID_CHARS).contains(&chars) {
        return Ok(Some(ErrorInfo::new(
            "invalid_request",
            format!("commands: a patch id is 1 to {MAX_PATCH_ID_CHARS} characters, not {chars}"),
        )));
    }
    if tx
        .insert_patch(&job.owner_id, job.id, id, deprecated)
        .await?
    {
        events.push(
            event::PATCH_RECORDED,
            None,
            actor::ENGINE,
            json!({ "patch_id": id, "deprecated": deprecated }),
        );
    }
    Ok(None)
}

/// The longest patch id a workflow may record (the table's check says the same).
const MAX_PATCH_ID_CHARS: usize = 200;

fn nondeterminism(seq: i32, asked: &str, recorded: &JournalEntry) -> ErrorInfo {
    let was = match recorded {
        JournalEntry::Activity { name, input, .. } => {
            format!("activity `{name}` with input {}", shown(input))
        }
        JournalEntry::Timer { .. } => "a timer".to_owned(),
        JournalEntry::Child {
            workflow, input, ..
        } => {
            format!("child workflow `{workflow}` with input {}", shown(input))
        }
    };
    ErrorInfo::new(
        "nondeterminism",
        format!("at position {seq} the workflow now asks for {asked}, but its history recorded {was}; the job is parked"),
    )
}

/// A JSON value as an error message shows it: canonical, cut after 120 characters.
fn shown(value: &serde_json::Value) -> String {
    let text = canonical_json(value);
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// A command that no store can hold as sent (U+0000 in an input, a result or an error)
/// parks the workflow, visibly, instead of failing the task's transaction: replaying
/// the same code would send the same command again, for ever.
fn unstorable_command(i: usize, command: &WorkflowCommand) -> Option<ErrorInfo> {
    let value = serde_json::to_value(command).ok()?;
    let at = crate::text::nul_in_json(&value, &format!("commands[{i}]"))?;
    Some(ErrorInfo::new(
        "invalid_result",
        crate::text::nul_message(&at),
    ))
}
