//! Row decoding: PostgreSQL rows into the store's row types.

use serde_json::Value;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row};

use crate::error::StoreError;
use crate::model::{
    ActivityStatus, AttemptStatus, Certification, CompletionOutcome, Contract, ErrorInfo, JobKind,
    JobStatus, Role, ScheduleView,
};
use crate::store::*;

pub(super) fn schedule_row(row: &PgRow) -> StoreResult<ScheduleRow> {
    let overlap: String = row.try_get("overlap")?;
    let count =
        |column: &str| -> StoreResult<u64> { Ok(row.try_get::<i64, _>(column)?.max(0) as u64) };
    Ok(ScheduleRow {
        view: ScheduleView {
            name: row.try_get("name")?,
            owner: row.try_get("owner_id")?,
            cron: row.try_get("cron")?,
            timezone: row.try_get("timezone")?,
            job: row.try_get("job")?,
            overlap: overlap_of(&overlap)?,
            catchup_window_s: count("catchup_window_s")?,
            paused: row.try_get("paused")?,
            next_fire_at: row.try_get("next_fire_at")?,
            last_fired_at: row.try_get("last_fired_at")?,
            last_job_id: row.try_get("last_job_id")?,
            fired_count: count("fired_count")?,
            skipped_overlap_count: count("skipped_overlap_count")?,
            skipped_too_old_count: count("skipped_too_old_count")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        },
        version: row.try_get("version")?,
    })
}

pub(super) fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("unknown {what} `{value}`"))
}

/// One table's columns in a row: under `prefix` when a statement returns the rows of
/// several tables side by side (see [`prefixed`]), else under their own names.
#[derive(Clone, Copy)]
pub(super) struct Cols<'r> {
    pub(super) row: &'r PgRow,
    pub(super) prefix: &'static str,
}

impl<'r> Cols<'r> {
    fn of(row: &'r PgRow) -> Self {
        Cols { row, prefix: "" }
    }

    fn get<T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>>(
        &self,
        column: &str,
    ) -> Result<T, sqlx::Error> {
        match self.prefix {
            "" => self.row.try_get(column),
            prefix => self.row.try_get(format!("{prefix}{column}").as_str()),
        }
    }

    fn json_error(&self, column: &str) -> StoreResult<Option<ErrorInfo>> {
        let value: Option<Value> = self.get(column)?;
        value
            .map(|v| {
                serde_json::from_value(v).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
            })
            .transpose()
    }
}

pub(super) fn job_row(row: &PgRow) -> StoreResult<JobRow> {
    job_row_in(Cols::of(row))
}

pub(super) fn job_row_in(row: Cols) -> StoreResult<JobRow> {
    let kind: String = row.get("kind")?;
    let status: String = row.get("status")?;
    Ok(JobRow {
        owner_id: row.get("owner_id")?,
        id: row.get("id")?,
        idempotency_key: row.get("idempotency_key")?,
        fingerprint: row.get("fingerprint")?,
        kind: JobKind::parse(&kind).ok_or_else(|| corrupt("job kind", &kind))?,
        workflow: row.get("workflow")?,
        activity: row.get("activity")?,
        task_queue: row.get("task_queue")?,
        input: row.get("input")?,
        status: JobStatus::parse(&status).ok_or_else(|| corrupt("job status", &status))?,
        version: row.get("version")?,
        result: row.get("result")?,
        error: row.json_error("error")?,
        completed_by: row.get("completed_by")?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
        finished_at: row.get("finished_at")?,
        wf_ready: row.get("wf_ready")?,
        wf_lease_token: row.get("wf_lease_token")?,
        wf_parked: row.get("wf_parked")?,
        parent_job_id: row.get("parent_job_id")?,
        wf_compensation_ms: row.get("wf_compensation_ms")?,
        wf_cancel_requested_at: row.get("wf_cancel_requested_at")?,
        wf_cancel_deadline: row.get("wf_cancel_deadline")?,
        wf_cancel_arrival: row.get("wf_cancel_arrival")?,
    })
}

/// A child job with its outcome's arrival in its parent, and the outcome its parent saw
/// if it was resumed since (`children_of_job.sql`).
pub(super) fn child_row(row: &PgRow) -> StoreResult<ChildRow> {
    Ok(ChildRow {
        job: job_row(row)?,
        arrival: row.try_get("parent_arrival")?,
        seen_error: Cols::of(row).json_error("parent_seen_error")?,
        seen_finished_at: row.try_get("parent_seen_finished_at")?,
    })
}

pub(super) fn activity_row(row: &PgRow) -> StoreResult<ActivityRow> {
    activity_row_in(Cols::of(row))
}

pub(super) fn activity_row_in(row: Cols) -> StoreResult<ActivityRow> {
    let status: String = row.get("status")?;
    let options: Value = row.get("options")?;
    Ok(ActivityRow {
        owner_id: row.get("owner_id")?,
        id: row.get("id")?,
        job_id: row.get("job_id")?,
        seq: row.get("seq")?,
        name: row.get("name")?,
        providers: row.get("providers")?,
        options: serde_json::from_value(options)
            .map_err(|e| StoreError::Corrupt(format!("activity options: {e}")))?,
        task_queue: row.get("task_queue")?,
        input: row.get("input")?,
        status: ActivityStatus::parse(&status)
            .ok_or_else(|| corrupt("activity status", &status))?,
        version: row.get("version")?,
        completed_by: row.get("completed_by")?,
        result: row.get("result")?,
        error: row.json_error("error")?,
        finished_at: row.get("finished_at")?,
    })
}

pub(super) fn attempt_row(row: &PgRow) -> StoreResult<AttemptRow> {
    attempt_row_in(Cols::of(row))
}

pub(super) fn attempt_row_in(row: Cols) -> StoreResult<AttemptRow> {
    let status: String = row.get("status")?;
    let outcome: Option<String> = row.get("completion_outcome")?;
    Ok(AttemptRow {
        owner_id: row.get("owner_id")?,
        id: row.get("id")?,
        activity_id: row.get("activity_id")?,
        job_id: row.get("job_id")?,
        number: row.get("number")?,
        activity: row.get("activity")?,
        task_queue: row.get("task_queue")?,
        provider: row.get("provider")?,
        status: AttemptStatus::parse(&status).ok_or_else(|| corrupt("attempt status", &status))?,
        worker_id: row.get("worker_id")?,
        lease_token: row.get("lease_token")?,
        lease_expires_at: row.get("lease_expires_at")?,
        read_version: row.get("read_version")?,
        heartbeat_at: row.get("heartbeat_at")?,
        started_at: row.get("started_at")?,
        unknown_at: row.get("unknown_at")?,
        finished_at: row.get("finished_at")?,
        error: row.json_error("error")?,
        completion_outcome: match outcome {
            None => None,
            Some(o) => Some(
                CompletionOutcome::parse(&o).ok_or_else(|| corrupt("completion outcome", &o))?,
            ),
        },
        cancelled_by: row.get("cancelled_by")?,
        cancel_reason: row.get("cancel_reason")?,
        created_at: row.get("created_at")?,
    })
}

pub(super) fn contract_row(row: &PgRow) -> StoreResult<Contract> {
    contract_row_in(Cols::of(row))
}

pub(super) fn contract_row_in(row: Cols) -> StoreResult<Contract> {
    Ok(Contract {
        owner: row.get("owner_id")?,
        activity: row.get("activity")?,
        contract_hash: row.get("contract_hash")?,
        output_schema: row.get("output_schema")?,
    })
}

pub(super) fn certification_row(row: &PgRow) -> StoreResult<Certification> {
    Ok(Certification {
        id: row.try_get("id")?,
        owner: row.try_get("owner_id")?,
        activity: row.try_get("activity")?,
        provider: row.try_get("provider")?,
        contract_hash: row.try_get("contract_hash")?,
        passed: row.try_get("passed")?,
        report: row.try_get("report")?,
        created_at: row.try_get("created_at")?,
    })
}

pub(super) fn token_row(r: &PgRow) -> StoreResult<TokenRow> {
    let role: String = r.try_get("role")?;
    Ok(TokenRow {
        owner_id: r.try_get("owner_id")?,
        id: r.try_get("id")?,
        role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
        token_hash: r.try_get("token_hash")?,
    })
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<Value> {
    serde_json::to_value(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

pub(super) fn signal_row(r: &PgRow) -> StoreResult<SignalRow> {
    Ok(SignalRow {
        seq: r.try_get("seq")?,
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        idempotency_key: r.try_get("idempotency_key")?,
        fingerprint: r.try_get("fingerprint")?,
        payload: r.try_get("payload")?,
        received_at: r.try_get("received_at")?,
        arrival: r.try_get("arrival")?,
        consumed_at: r.try_get("consumed_at")?,
        consumed_by: r.try_get("consumed_by")?,
    })
}

pub(super) fn status_words(statuses: &[AttemptStatus]) -> Vec<String> {
    statuses.iter().map(|s| s.as_str().to_owned()).collect()
}

/// The row of an activity job just inserted: what was inserted, with the status,
/// version and times the statement returned (`job_status`, `job_version`,
/// `job_created_at`, `job_updated_at`).
pub(super) fn inserted_job_row(job: &NewJob, row: &PgRow) -> StoreResult<JobRow> {
    let status: String = row.try_get("job_status")?;
    Ok(JobRow {
        owner_id: job.owner_id.clone(),
        id: job.id,
        idempotency_key: job.idempotency_key.clone(),
        fingerprint: job.fingerprint.clone(),
        kind: job.kind,
        workflow: None,
        activity: job.activity.clone(),
        task_queue: job.task_queue.clone(),
        input: job.input.clone(),
        status: JobStatus::parse(&status).ok_or_else(|| corrupt("job status", &status))?,
        version: row.try_get("job_version")?,
        result: None,
        error: None,
        completed_by: None,
        created_at: row.try_get("job_created_at")?,
        updated_at: row.try_get("job_updated_at")?,
        finished_at: None,
        wf_ready: false,
        wf_lease_token: None,
        wf_parked: false,
        parent_job_id: None,
        wf_compensation_ms: None,
        wf_cancel_requested_at: None,
        wf_cancel_deadline: None,
        wf_cancel_arrival: None,
    })
}

/// A timer (`timers_of_job.sql` and the journal's timer statements).
pub(super) fn timer_row(r: &PgRow) -> StoreResult<TimerRow> {
    Ok(TimerRow {
        seq: r.try_get("seq")?,
        fire_at: r.try_get("fire_at")?,
        fired_at: r.try_get("fired_at")?,
        arrival: r.try_get("arrival")?,
    })
}

/// A workflow job's run (`workflow_run.sql`, and the claims' extra columns).
pub(super) fn workflow_run(r: &PgRow) -> StoreResult<WorkflowRun> {
    Ok(WorkflowRun {
        run: r.try_get("wf_run")?,
        first_seq: r.try_get("wf_run_from")?,
        input: r.try_get("wf_run_input")?,
        started_at: r.try_get("wf_run_started_at")?,
        since_arrival: r.try_get("since_arrival")?,
    })
}

/// An activity with its arrival number (the journal's activity statements).
pub(super) fn journal_activity(r: &PgRow) -> StoreResult<(ActivityRow, Option<i64>)> {
    Ok((activity_row(r)?, r.try_get("arrival")?))
}

/// A claimed workflow task: the job row and its run (`claim_workflow_tasks.sql`).
pub(super) fn claimed_workflow_task(r: &PgRow) -> StoreResult<ClaimedWorkflowTask> {
    Ok(ClaimedWorkflowTask {
        job: job_row(r)?,
        run: workflow_run(r)?,
    })
}
