//! A workflow task's history: the whole of its job's current run, or, for the worker that
//! keeps the workflow's replayed state (sticky execution), only what arrived since that
//! state was left; and the steps recorded at given positions, which a completion checks
//! its commands against. Reads are bounded by what they return, not by the history's
//! length: a long history costs each task only its new part.

use uuid::Uuid;

use super::children::journal_entry;
use super::{retry_transient, Engine};
use crate::error::EngineError;
use crate::model::{ActivityStatus, JobKind, Scope};
use crate::store::{ActivityRow, JobRow, SignalRow, StoreTx, TimerRow, WorkflowRun};
use onceflow_protocol::workflow::{CancelRequest, JournalEntry, RecordedSignal, WorkflowTask};

/// What a workflow task carries of its job's history.
pub(crate) struct History {
    /// The run's steps (all of them, or those whose outcome arrived since the horizon).
    pub journal: Vec<JournalEntry>,
    /// The job's signals the run may see (or those that arrived since the horizon).
    pub signals: Vec<RecordedSignal>,
    /// The patch markers the job recorded (none for a sticky task: the worker has them).
    pub patches: Vec<String>,
}

/// The history a task of `job`'s run carries: the whole run, or only what arrived after
/// `run.since_arrival`. The caller holds the job's row lock, so no outcome is numbered
/// while it reads (every arrival number is given under that lock).
pub(crate) async fn history(
    tx: &mut dyn StoreTx,
    job: &JobRow,
    run: &WorkflowRun,
) -> Result<History, EngineError> {
    let (owner, id, first) = (job.owner_id.as_str(), job.id, run.first_seq);
    let (activities, timers, signals, patches) = match run.since_arrival {
        None => (
            tx.journal_activities(owner, id, first).await?,
            tx.journal_timers(owner, id, first).await?,
            tx.journal_signals(owner, id, first).await?,
            tx.patches_of_job(owner, id).await?,
        ),
        Some(since) => (
            tx.activities_arrived_since(owner, id, first, since).await?,
            tx.timers_arrived_since(owner, id, first, since).await?,
            tx.signals_arrived_since(owner, id, since).await?,
            Vec::new(),
        ),
    };
    let mut journal: Vec<JournalEntry> = activities
        .into_iter()
        .map(|(a, arrival)| activity_entry(a, arrival))
        .chain(timers.into_iter().map(timer_entry))
        .collect();
    journal.extend(
        tx.children_of_job(owner, id)
            .await?
            .into_iter()
            .filter_map(|child| journal_entry(id, child))
            .filter(|e| {
                e.seq() >= first
                    && run
                        .since_arrival
                        .is_none_or(|since| e.arrival().is_some_and(|a| a > since))
            }),
    );
    journal.sort_by_key(JournalEntry::seq);
    Ok(History {
        journal,
        signals: signals.into_iter().map(recorded_signal).collect(),
        patches,
    })
}

/// The steps `job` recorded at positions `seqs` (any run), by position.
pub(crate) async fn recorded_at(
    tx: &mut dyn StoreTx,
    job: &JobRow,
    seqs: &[i32],
) -> Result<Vec<JournalEntry>, EngineError> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    let (owner, id) = (job.owner_id.as_str(), job.id);
    let mut entries: Vec<JournalEntry> = tx
        .activities_at(owner, id, seqs)
        .await?
        .into_iter()
        .map(|(a, arrival)| activity_entry(a, arrival))
        .chain(
            tx.timers_at(owner, id, seqs)
                .await?
                .into_iter()
                .map(timer_entry),
        )
        .collect();
    entries.extend(
        tx.children_at(owner, id, seqs)
            .await?
            .into_iter()
            .filter_map(|child| journal_entry(id, child)),
    );
    entries.sort_by_key(JournalEntry::seq);
    Ok(entries)
}

/// The task handed out for `job` (leased with `lease_token`) in `run`, with `history`.
pub(crate) fn workflow_task(
    job: &JobRow,
    run: &WorkflowRun,
    lease_token: Uuid,
    history: History,
) -> WorkflowTask {
    let cancel = job
        .wf_cancel_requested_at
        .zip(job.wf_cancel_arrival)
        .map(|(requested_at, arrival)| CancelRequest {
            arrival,
            requested_at,
        })
        .filter(|c| run.since_arrival.is_none_or(|since| c.arrival > since));
    WorkflowTask {
        kind: "workflow".to_owned(),
        job_id: job.id,
        owner: job.owner_id.clone(),
        workflow: job.workflow.clone().unwrap_or_default(),
        input: run.input.clone().unwrap_or_else(|| job.input.clone()),
        idempotency_key: job.id.to_string(),
        created_at: run.started_at.unwrap_or(job.created_at),
        lease_token,
        read_version: job.version,
        run: run.run,
        first_seq: run.first_seq,
        since_arrival: run.since_arrival,
        journal: history.journal,
        signals: history.signals,
        cancel,
        compensation_ms: job.wf_compensation_ms.map(|ms| ms as u64),
        patches: history.patches,
    }
}

impl Engine {
    /// The whole history of the workflow task held by `lease_token`, for a worker that got
    /// the task with only its new part (sticky execution) but does not hold the
    /// workflow's state (it restarted, or dropped the state).
    ///
    /// Guarantees: only the task's holder reads it ([`EngineError::LeaseLost`] for another
    /// token or a task that ended); the task is unchanged (same lease, same version), so
    /// the worker completes it as it would have.
    pub async fn workflow_history(
        &self,
        scope: &Scope,
        job_id: Uuid,
        lease_token: Uuid,
    ) -> Result<WorkflowTask, EngineError> {
        let owner = self
            .store
            .job_owner(scope, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        retry_transient!(self.workflow_history_once(&owner, job_id, lease_token))
    }

    async fn workflow_history_once(
        &self,
        owner: &str,
        job_id: Uuid,
        lease_token: Uuid,
    ) -> Result<WorkflowTask, EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        if job.kind != JobKind::Workflow {
            return Err(EngineError::NotFound);
        }
        if job.wf_lease_token != Some(lease_token) || job.status.is_closed() {
            return Err(EngineError::LeaseLost);
        }
        let run = tx
            .workflow_run(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let history = history(tx.as_mut(), &job, &run).await?;
        tx.commit().await?;
        Ok(workflow_task(&job, &run, lease_token, history))
    }
}

fn activity_entry(a: ActivityRow, arrival: Option<i64>) -> JournalEntry {
    JournalEntry::Activity {
        seq: a.seq,
        name: a.name,
        input: a.input,
        status: a.status,
        result: if a.status == ActivityStatus::Succeeded {
            a.result
        } else {
            None
        },
        error: if a.status == ActivityStatus::Failed || a.status == ActivityStatus::Cancelled {
            a.error
        } else {
            None
        },
        finished_at: a.finished_at,
        arrival,
    }
}

fn timer_entry(t: TimerRow) -> JournalEntry {
    JournalEntry::Timer {
        seq: t.seq,
        fire_at: t.fire_at,
        fired_at: t.fired_at,
        arrival: t.arrival,
    }
}

/// A signal as a workflow task carries it.
pub(crate) fn recorded_signal(s: SignalRow) -> RecordedSignal {
    RecordedSignal {
        seq: s.seq,
        name: s.name,
        payload: s.payload,
        received_at: s.received_at,
        arrival: s.arrival,
        consumed_by: s.consumed_by,
    }
}
