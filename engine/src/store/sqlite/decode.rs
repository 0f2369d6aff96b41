//! Row decoding: SQLite rows (times in microseconds, ids and JSON as text) into the
//! store's row types.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;
use uuid::Uuid;

use crate::error::StoreError;
use crate::model::{
    ActivityStatus, AttemptStatus, Certification, CompletionOutcome, ErrorInfo, JobKind, JobStatus,
    ScheduleView,
};
use crate::store::*;

pub(super) fn ts(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or_default()
}

pub(super) fn opt_ts(row: &SqliteRow, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
    Ok(row.try_get::<Option<i64>, _>(column)?.map(ts))
}

pub(super) fn req_ts(row: &SqliteRow, column: &str) -> StoreResult<DateTime<Utc>> {
    Ok(ts(row.try_get::<i64, _>(column)?))
}

pub(super) fn uid(row: &SqliteRow, column: &str) -> StoreResult<Uuid> {
    let text: String = row.try_get(column)?;
    Uuid::parse_str(&text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub(super) fn opt_uid(row: &SqliteRow, column: &str) -> StoreResult<Option<Uuid>> {
    row.try_get::<Option<String>, _>(column)?
        .map(|t| Uuid::parse_str(&t).map_err(|e| StoreError::Corrupt(format!("{column}: {e}"))))
        .transpose()
}

pub(super) fn json(row: &SqliteRow, column: &str) -> StoreResult<Value> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

pub(super) fn opt_json(row: &SqliteRow, column: &str) -> StoreResult<Option<Value>> {
    row.try_get::<Option<String>, _>(column)?
        .map(|t| {
            serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
        })
        .transpose()
}

pub(super) fn opt_error(row: &SqliteRow, column: &str) -> StoreResult<Option<ErrorInfo>> {
    opt_json(row, column)?
        .map(|v| {
            serde_json::from_value(v).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
        })
        .transpose()
}

pub(super) fn text<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

pub(super) fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("unknown {what} `{value}`"))
}

pub(super) fn signal_row(r: &SqliteRow) -> StoreResult<SignalRow> {
    Ok(SignalRow {
        seq: r.try_get("seq")?,
        id: uid(r, "id")?,
        name: r.try_get("name")?,
        idempotency_key: r.try_get("idempotency_key")?,
        fingerprint: r.try_get("fingerprint")?,
        payload: json(r, "payload")?,
        received_at: req_ts(r, "received_at")?,
        arrival: r.try_get("arrival")?,
        consumed_at: opt_ts(r, "consumed_at")?,
        consumed_by: r.try_get("consumed_by")?,
    })
}

pub(super) fn schedule_row(row: &SqliteRow) -> StoreResult<ScheduleRow> {
    let overlap: String = row.try_get("overlap")?;
    let count =
        |column: &str| -> StoreResult<u64> { Ok(row.try_get::<i64, _>(column)?.max(0) as u64) };
    Ok(ScheduleRow {
        view: ScheduleView {
            name: row.try_get("name")?,
            owner: row.try_get("owner_id")?,
            cron: row.try_get("cron")?,
            timezone: row.try_get("timezone")?,
            job: json(row, "job")?,
            overlap: overlap_of(&overlap)?,
            catchup_window_s: count("catchup_window_s")?,
            paused: row.try_get("paused")?,
            next_fire_at: opt_ts(row, "next_fire_at")?,
            last_fired_at: opt_ts(row, "last_fired_at")?,
            last_job_id: opt_uid(row, "last_job_id")?,
            fired_count: count("fired_count")?,
            skipped_overlap_count: count("skipped_overlap_count")?,
            skipped_too_old_count: count("skipped_too_old_count")?,
            created_at: req_ts(row, "created_at")?,
            updated_at: req_ts(row, "updated_at")?,
        },
        version: row.try_get("version")?,
    })
}

pub(super) fn job_row(row: &SqliteRow) -> StoreResult<JobRow> {
    let kind: String = row.try_get("kind")?;
    let status: String = row.try_get("status")?;
    Ok(JobRow {
        owner_id: row.try_get("owner_id")?,
        id: uid(row, "id")?,
        idempotency_key: row.try_get("idempotency_key")?,
        fingerprint: row.try_get("fingerprint")?,
        kind: JobKind::parse(&kind).ok_or_else(|| corrupt("job kind", &kind))?,
        workflow: row.try_get("workflow")?,
        activity: row.try_get("activity")?,
        task_queue: row.try_get("task_queue")?,
        input: json(row, "input")?,
        status: JobStatus::parse(&status).ok_or_else(|| corrupt("job status", &status))?,
        version: row.try_get("version")?,
        result: opt_json(row, "result")?,
        error: opt_error(row, "error")?,
        completed_by: opt_uid(row, "completed_by")?,
        created_at: req_ts(row, "created_at")?,
        updated_at: req_ts(row, "updated_at")?,
        finished_at: opt_ts(row, "finished_at")?,
        wf_ready: row.try_get("wf_ready")?,
        wf_lease_token: opt_uid(row, "wf_lease_token")?,
        wf_parked: row.try_get("wf_parked")?,
        parent_job_id: opt_uid(row, "parent_job_id")?,
        wf_compensation_ms: row.try_get("wf_compensation_ms")?,
        wf_cancel_requested_at: opt_ts(row, "wf_cancel_requested_at")?,
        wf_cancel_deadline: opt_ts(row, "wf_cancel_deadline")?,
        wf_cancel_arrival: row.try_get("wf_cancel_arrival")?,
    })
}

/// A child job with its outcome's arrival in its parent, and the outcome its parent saw
/// if it was resumed since (`children_of_job.sql`).
pub(super) fn child_row(row: &SqliteRow) -> StoreResult<ChildRow> {
    Ok(ChildRow {
        job: job_row(row)?,
        arrival: row.try_get("parent_arrival")?,
        seen_error: opt_error(row, "parent_seen_error")?,
        seen_finished_at: opt_ts(row, "parent_seen_finished_at")?,
    })
}

pub(super) fn activity_row(row: &SqliteRow) -> StoreResult<ActivityRow> {
    let status: String = row.try_get("status")?;
    Ok(ActivityRow {
        owner_id: row.try_get("owner_id")?,
        id: uid(row, "id")?,
        job_id: uid(row, "job_id")?,
        seq: row.try_get("seq")?,
        name: row.try_get("name")?,
        providers: serde_json::from_value(json(row, "providers")?)
            .map_err(|e| StoreError::Corrupt(format!("providers: {e}")))?,
        options: serde_json::from_value(json(row, "options")?)
            .map_err(|e| StoreError::Corrupt(format!("activity options: {e}")))?,
        task_queue: row.try_get("task_queue")?,
        input: json(row, "input")?,
        status: ActivityStatus::parse(&status)
            .ok_or_else(|| corrupt("activity status", &status))?,
        version: row.try_get("version")?,
        completed_by: opt_uid(row, "completed_by")?,
        result: opt_json(row, "result")?,
        error: opt_error(row, "error")?,
        finished_at: opt_ts(row, "finished_at")?,
    })
}

pub(super) fn attempt_row(row: &SqliteRow) -> StoreResult<AttemptRow> {
    let status: String = row.try_get("status")?;
    let outcome: Option<String> = row.try_get("completion_outcome")?;
    Ok(AttemptRow {
        owner_id: row.try_get("owner_id")?,
        id: uid(row, "id")?,
        activity_id: uid(row, "activity_id")?,
        job_id: uid(row, "job_id")?,
        number: row.try_get("number")?,
        activity: row.try_get("activity")?,
        task_queue: row.try_get("task_queue")?,
        provider: row.try_get("provider")?,
        status: AttemptStatus::parse(&status).ok_or_else(|| corrupt("attempt status", &status))?,
        worker_id: row.try_get("worker_id")?,
        lease_token: opt_uid(row, "lease_token")?,
        lease_expires_at: opt_ts(row, "lease_expires_at")?,
        read_version: row.try_get("read_version")?,
        heartbeat_at: opt_ts(row, "heartbeat_at")?,
        started_at: opt_ts(row, "started_at")?,
        unknown_at: opt_ts(row, "unknown_at")?,
        finished_at: opt_ts(row, "finished_at")?,
        error: opt_error(row, "error")?,
        completion_outcome: match outcome {
            None => None,
            Some(o) => Some(
                CompletionOutcome::parse(&o).ok_or_else(|| corrupt("completion outcome", &o))?,
            ),
        },
        cancelled_by: row.try_get("cancelled_by")?,
        cancel_reason: row.try_get("cancel_reason")?,
        created_at: req_ts(row, "created_at")?,
    })
}

pub(super) fn certification_row(row: &SqliteRow) -> StoreResult<Certification> {
    Ok(Certification {
        id: uid(row, "id")?,
        owner: row.try_get("owner_id")?,
        activity: row.try_get("activity")?,
        provider: row.try_get("provider")?,
        contract_hash: row.try_get("contract_hash")?,
        passed: row.try_get("passed")?,
        report: json(row, "report")?,
        created_at: req_ts(row, "created_at")?,
    })
}

/// A timer (`timers_of_job.sql` and the journal's timer statements).
pub(super) fn timer_row(r: &SqliteRow) -> StoreResult<TimerRow> {
    Ok(TimerRow {
        seq: r.try_get("seq")?,
        fire_at: req_ts(r, "fire_at")?,
        fired_at: opt_ts(r, "fired_at")?,
        arrival: r.try_get("arrival")?,
    })
}

/// A workflow job's run (`workflow_run.sql`, and the claims' extra columns).
pub(super) fn workflow_run(r: &SqliteRow) -> StoreResult<WorkflowRun> {
    Ok(WorkflowRun {
        run: r.try_get("wf_run")?,
        first_seq: r.try_get("wf_run_from")?,
        input: opt_json(r, "wf_run_input")?,
        started_at: opt_ts(r, "wf_run_started_at")?,
        since_arrival: r.try_get("since_arrival")?,
    })
}

/// An activity with its arrival number (the journal's activity statements).
pub(super) fn journal_activity(r: &SqliteRow) -> StoreResult<(ActivityRow, Option<i64>)> {
    Ok((activity_row(r)?, r.try_get("arrival")?))
}
