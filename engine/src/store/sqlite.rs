//! The SQLite store: the embedded default. Same invariants as PostgreSQL, kept the same
//! way (unique and partial unique indexes, guarded updates, the CAS statement shape);
//! what differs is how writers are serialized: every write transaction is
//! `BEGIN IMMEDIATE` (one writer at a time, database-wide), so the dedup insert, the
//! one-live-attempt rule and the CAS hold under any concurrency, and no `SKIP LOCKED` is
//! needed. Times are microseconds since the epoch, taken once per transaction.

use std::str::FromStr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{
    ActivityRow, AttemptLocation, AttemptRow, ClaimFilter, ClaimedAttempt, ContractRecord,
    JobQuery, JobRow, LeaseExtension, LeaseRenewal, NewActivity, NewAttempt, NewCertification,
    NewEvent, NewJob, NewScheduleEvent, NextScheduleFire, PrunedJobs, ScheduleRow, Store,
    StoreResult, StoreTx, StuckQuery, TimerRow, TokenRow, WorkflowClaimFilter,
};
use crate::error::StoreError;
use crate::model::{
    ActivityOptions, ActivityStatus, ActivityView, AttemptStatus, Certification, CompletionOutcome,
    Contract, ErrorInfo, JobEvent, JobKind, JobStatus, JobView, Role, ScheduleEvent, ScheduleView,
    Scope, StuckAttempt,
};

/// The migrations of `migrations/sqlite`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// A [`Store`] on SQLite.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// One writer at a time within this process (SQLite's lock does it across processes;
    /// this queue just avoids busy-waiting on it).
    writer: Arc<tokio::sync::Mutex<()>>,
    /// Long-poll wake-ups of this process, in place of LISTEN/NOTIFY.
    listeners: Arc<StdMutex<Vec<Arc<Notify>>>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the SQLite database at `url` (`sqlite://PATH`).
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections.max(2))
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        Ok(SqliteStore {
            pool,
            writer: Arc::new(tokio::sync::Mutex::new(())),
            listeners: Arc::new(StdMutex::new(Vec::new())),
        })
    }

    /// The underlying pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Begins a write transaction; safe to drop at any point.
    ///
    /// sqlx's begin with a custom statement awaits once more after `BEGIN IMMEDIATE` has
    /// run; a caller dropped there (a handler whose client hung up) would leave that
    /// transaction open on a pooled connection, holding SQLite's write lock for good. So
    /// the begin runs on its own task: a dropped caller drops only a whole `Transaction`,
    /// which rolls back, and the in-process writer queue is released with it.
    async fn write(&self) -> StoreResult<SqliteTx> {
        let (writer, pool) = (self.writer.clone(), self.pool.clone());
        let (guard, tx) = tokio::spawn(async move {
            let guard = writer.lock_owned().await;
            let tx = pool.begin_with("BEGIN IMMEDIATE").await?;
            Ok::<_, sqlx::Error>((guard, tx))
        })
        .await
        .map_err(|_| sqlx::Error::WorkerCrashed)??;
        Ok(SqliteTx {
            tx,
            now: now_us(),
            _writer: guard,
            listeners: self.listeners.clone(),
            wake: false,
        })
    }
}

fn now_us() -> i64 {
    Utc::now().timestamp_micros()
}

fn secs_us(secs: Option<u64>) -> Option<i64> {
    secs.map(|s| (s as i64).saturating_mul(1_000_000))
}

fn ts(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or_default()
}

fn opt_ts(row: &SqliteRow, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
    Ok(row.try_get::<Option<i64>, _>(column)?.map(ts))
}

fn req_ts(row: &SqliteRow, column: &str) -> StoreResult<DateTime<Utc>> {
    Ok(ts(row.try_get::<i64, _>(column)?))
}

fn uid(row: &SqliteRow, column: &str) -> StoreResult<Uuid> {
    let text: String = row.try_get(column)?;
    Uuid::parse_str(&text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

fn opt_uid(row: &SqliteRow, column: &str) -> StoreResult<Option<Uuid>> {
    row.try_get::<Option<String>, _>(column)?
        .map(|t| Uuid::parse_str(&t).map_err(|e| StoreError::Corrupt(format!("{column}: {e}"))))
        .transpose()
}

fn json(row: &SqliteRow, column: &str) -> StoreResult<Value> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}

fn opt_json(row: &SqliteRow, column: &str) -> StoreResult<Option<Value>> {
    row.try_get::<Option<String>, _>(column)?
        .map(|t| {
            serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
        })
        .transpose()
}

fn opt_error(row: &SqliteRow, column: &str) -> StoreResult<Option<ErrorInfo>> {
    opt_json(row, column)?
        .map(|v| {
            serde_json::from_value(v).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
        })
        .transpose()
}

fn text<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("unknown {what} `{value}`"))
}

const JOB_COLUMNS: &str = "owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, \
     input, status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready, \
     wf_lease_token, wf_parked";

const ACTIVITY_COLUMNS: &str =
    "owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, \
     version, completed_by, result, error, finished_at";

const ATTEMPT_COLUMNS: &str = "owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status, \
     worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at, unknown_at, finished_at, \
     error, completion_outcome, cancelled_by, cancel_reason, created_at";

const SCHEDULE_COLUMNS: &str = "owner_id, name, cron, timezone, job, overlap, catchup_window_s, paused, \
     next_fire_at, last_fired_at, last_job_id, fired_count, skipped_overlap_count, skipped_too_old_count, \
     version, created_at, updated_at";

fn schedule_row(row: &SqliteRow) -> StoreResult<ScheduleRow> {
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
            overlap: super::overlap_of(&overlap)?,
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

fn job_row(row: &SqliteRow) -> StoreResult<JobRow> {
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
    })
}

fn activity_row(row: &SqliteRow) -> StoreResult<ActivityRow> {
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

fn attempt_row(row: &SqliteRow) -> StoreResult<AttemptRow> {
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

fn certification_row(row: &SqliteRow) -> StoreResult<Certification> {
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

/// `lease_expires_at` for an attempt started at `started` and renewed at `now`:
/// `min(now + heartbeat_timeout, started + start_to_close)`, `None` when neither is set.
fn lease_until(options: &ActivityOptions, now: i64, started: i64) -> Option<i64> {
    let by_heartbeat = secs_us(options.heartbeat_timeout_s).map(|d| now + d);
    let by_deadline = secs_us(options.start_to_close_timeout_s).map(|d| started + d);
    match (by_heartbeat, by_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

async fn assemble_views(pool: &SqlitePool, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
    let mut views = Vec::with_capacity(jobs.len());
    for job in jobs {
        let activity_rows = sqlx::query(&format!(
            "SELECT {ACTIVITY_COLUMNS} FROM activities WHERE owner_id = ? AND job_id = ? ORDER BY seq"
        ))
        .bind(&job.owner_id)
        .bind(job.id.to_string())
        .fetch_all(pool)
        .await?;
        let attempt_rows = sqlx::query(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE owner_id = ? AND job_id = ? ORDER BY activity_id, number"
        ))
        .bind(&job.owner_id)
        .bind(job.id.to_string())
        .fetch_all(pool)
        .await?;
        let attempts: Vec<AttemptRow> = attempt_rows
            .iter()
            .map(attempt_row)
            .collect::<StoreResult<_>>()?;
        let activities = activity_rows
            .iter()
            .map(activity_row)
            .collect::<StoreResult<Vec<_>>>()?
            .into_iter()
            .map(|a| ActivityView {
                seq: a.seq,
                name: a.name,
                providers: a.providers,
                status: a.status,
                version: a.version,
                completed_by: a.completed_by,
                result: a.result,
                error: a.error,
                attempts: attempts
                    .iter()
                    .filter(|t| t.activity_id == a.id)
                    .map(AttemptRow::view)
                    .collect(),
            })
            .collect();
        views.push(JobView {
            id: job.id,
            owner: job.owner_id,
            idempotency_key: job.idempotency_key,
            kind: job.kind,
            workflow: job.workflow,
            activity: job.activity,
            task_queue: job.task_queue,
            input: job.input,
            status: job.status,
            version: job.version,
            result: job.result,
            error: job.error,
            created_at: job.created_at,
            updated_at: job.updated_at,
            finished_at: job.finished_at,
            activities,
        });
    }
    Ok(views)
}

#[async_trait]
impl Store for SqliteStore {
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx>> {
        Ok(Box::new(self.write().await?))
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn locate_attempt(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<AttemptLocation>> {
        // Owner isolation: an attempt outside the scope is not found.
        let row = sqlx::query(
            "SELECT owner_id, job_id FROM attempts WHERE id = ? AND (? IS NULL OR owner_id = ?)",
        )
        .bind(attempt_id.to_string())
        .bind(scope.owner())
        .bind(scope.owner())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(AttemptLocation {
                owner_id: r.try_get("owner_id")?,
                job_id: uid(&r, "job_id")?,
            })
        })
        .transpose()
    }

    async fn job_owner(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<String>> {
        // Owner isolation: a job outside the scope is not found.
        Ok(sqlx::query_scalar(
            "SELECT owner_id FROM jobs WHERE id = ? AND (? IS NULL OR owner_id = ?)",
        )
        .bind(job_id.to_string())
        .bind(scope.owner())
        .bind(scope.owner())
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn job_view(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<JobView>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE id = ? AND (? IS NULL OR owner_id = ?)"
        ))
        .bind(job_id.to_string())
        .bind(scope.owner())
        .bind(scope.owner())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(assemble_views(&self.pool, vec![job_row(&row)?])
            .await?
            .pop())
    }

    async fn views_of(&self, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
        assemble_views(&self.pool, jobs).await
    }

    async fn job_events(
        &self,
        scope: &Scope,
        job_id: Uuid,
        after_seq: i64,
        limit: Option<i64>,
    ) -> StoreResult<Option<Vec<JobEvent>>> {
        let Some(owner) = self.job_owner(scope, job_id).await? else {
            return Ok(None);
        };
        let rows = sqlx::query(
            "SELECT seq, at, type, attempt_id, actor, data FROM job_events
             WHERE owner_id = ? AND job_id = ? AND seq > ? ORDER BY seq LIMIT coalesce(?, -1)",
        )
        .bind(&owner)
        .bind(job_id.to_string())
        .bind(after_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(JobEvent {
                    seq: r.try_get("seq")?,
                    at: req_ts(r, "at")?,
                    kind: r.try_get("type")?,
                    attempt_id: opt_uid(r, "attempt_id")?,
                    actor: r.try_get("actor")?,
                    data: json(r, "data")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()
            .map(Some)
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobView>> {
        let before = query.before_id.map(|id| id.to_string());
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs
             WHERE (?1 IS NULL OR owner_id = ?1) AND (?2 IS NULL OR status = ?2)
               AND (?3 IS NULL OR workflow = ?3) AND (?4 IS NULL OR activity = ?4)
               AND (?5 IS NULL OR id < ?5)
               AND (?7 IS NULL OR created_at >= ?7) AND (?8 IS NULL OR created_at < ?8)
             ORDER BY id DESC LIMIT ?6"
        ))
        .bind(query.owner.as_deref())
        .bind(query.status.map(|s| s.as_str()))
        .bind(query.workflow.as_deref())
        .bind(query.activity.as_deref())
        .bind(before)
        .bind(query.limit)
        .bind(query.created_after.map(|t| t.timestamp_micros()))
        .bind(query.created_before.map(|t| t.timestamp_micros()))
        .fetch_all(&self.pool)
        .await?;
        let jobs = rows.iter().map(job_row).collect::<StoreResult<Vec<_>>>()?;
        assemble_views(&self.pool, jobs).await
    }

    async fn list_contracts(&self, owners: Option<&[String]>) -> StoreResult<Vec<ContractRecord>> {
        let owners = owners.map(|o| text(&o)).transpose()?;
        let rows = sqlx::query(
            "SELECT owner_id, activity, contract_hash, output_schema, registered_at FROM contracts
             WHERE (?1 IS NULL OR owner_id IN (SELECT value FROM json_each(?1)))
             ORDER BY owner_id, activity, registered_at DESC, contract_hash",
        )
        .bind(owners)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ContractRecord {
                    contract: Contract {
                        owner: r.try_get("owner_id")?,
                        activity: r.try_get("activity")?,
                        contract_hash: r.try_get("contract_hash")?,
                        output_schema: json(r, "output_schema")?,
                    },
                    registered_at: req_ts(r, "registered_at")?,
                })
            })
            .collect()
    }

    async fn latest_certifications(
        &self,
        owners: Option<&[String]>,
    ) -> StoreResult<Vec<Certification>> {
        let owners = owners.map(|o| text(&o)).transpose()?;
        // Invariant 6: only the latest certification of a provider for a contract hash
        // counts, latest by the write transactions' clock that stamped it (then by rowid:
        // the order of the inserts under the one writer).
        let rows = sqlx::query(
            "SELECT id, owner_id, activity, provider, contract_hash, passed, report, created_at FROM (
                 SELECT *, row_number() OVER (PARTITION BY owner_id, activity, contract_hash, provider
                                              ORDER BY created_at DESC, rowid DESC) AS n
                 FROM certifications
                 WHERE (?1 IS NULL OR owner_id IN (SELECT value FROM json_each(?1)))
             ) WHERE n = 1
             ORDER BY owner_id, activity, contract_hash, provider",
        )
        .bind(owners)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(certification_row).collect()
    }

    async fn stuck_attempts(&self, query: &StuckQuery) -> StoreResult<Vec<StuckAttempt>> {
        let statuses: Vec<&str> = query
            .statuses
            .iter()
            .map(|s| s.as_str())
            .filter(|s| *s == "started" || *s == "unknown")
            .collect();
        let cutoff = now_us() - (query.older_than_s as i64).saturating_mul(1_000_000);
        let rows = sqlx::query(&format!(
            "SELECT * FROM (
                 SELECT {ATTEMPT_COLUMNS}, CASE status WHEN 'unknown' THEN unknown_at ELSE started_at END AS since
                 FROM attempts WHERE status IN (SELECT value FROM json_each(?1))
             ) WHERE since <= ?2 ORDER BY since, id LIMIT ?3"
        ))
        .bind(text(&statuses)?)
        .bind(cutoff)
        .bind(query.limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let attempt = attempt_row(r)?;
                Ok(StuckAttempt {
                    attempt: attempt.view(),
                    job_id: attempt.job_id,
                    owner: attempt.owner_id.clone(),
                    activity: attempt.activity.clone(),
                    since: req_ts(r, "since")?,
                })
            })
            .collect()
    }

    async fn live_attempt_counts(&self) -> StoreResult<(Vec<(String, i64)>, i64)> {
        let rows = sqlx::query(
            "SELECT status, count(*) AS n FROM attempts WHERE status IN ('scheduled', 'started', 'unknown') GROUP BY status",
        )
        .fetch_all(&self.pool)
        .await?;
        let live = rows
            .iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let oldest: Option<i64> =
            sqlx::query_scalar("SELECT min(unknown_at) FROM attempts WHERE status = 'unknown'")
                .fetch_one(&self.pool)
                .await?;
        Ok((
            live,
            oldest.map_or(0, |us| ((now_us() - us) / 1_000_000).max(0)),
        ))
    }

    async fn extend_lease(
        &self,
        location: &AttemptLocation,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<LeaseExtension> {
        let mut tx = self.write().await?;
        let extended = extend_lease_in(
            &mut tx,
            Some(&location.owner_id),
            attempt_id,
            token,
            details,
        )
        .await?;
        Box::new(tx).commit().await?;
        Ok(if extended {
            LeaseExtension::Extended
        } else {
            LeaseExtension::NotExtended
        })
    }

    async fn prune_schedule_events(&self, retention: Duration, limit: i64) -> StoreResult<u64> {
        let mut tx = self.write().await?;
        let cutoff = tx
            .now
            .saturating_sub(i64::try_from(retention.as_micros()).unwrap_or(i64::MAX));
        let deleted = sqlx::query(
            // Retention: only events older than the retention, oldest first (schedule_events_by_time).
            "DELETE FROM schedule_events WHERE rowid IN (SELECT rowid FROM schedule_events WHERE at < ? ORDER BY at LIMIT ?)",
        )
        .bind(cutoff)
        .bind(limit)
        .execute(&mut *tx.tx)
        .await?;
        Box::new(tx).commit().await?;
        Ok(deleted.rows_affected())
    }

    async fn prune_finished_jobs(
        &self,
        retention: Duration,
        limit: i64,
        after: Option<Uuid>,
    ) -> StoreResult<PrunedJobs> {
        // One write transaction: nothing else writes while the jobs are chosen and deleted.
        let mut tx = self.write().await?;
        let cutoff = tx
            .now
            .saturating_sub(i64::try_from(retention.as_micros()).unwrap_or(i64::MAX));
        // Job ids are UUIDv7: "created before the cutoff" is an id range on jobs_id_unique.
        let bound = Uuid::from_u128(u128::from(u64::try_from(cutoff / 1000).unwrap_or(0)) << 80)
            .to_string();
        let doomed: Vec<(String, String)> = sqlx::query_as(
            // Retention: only a job finished longer ago than the retention, and none of whose
            // attempts is live (a late completion of a live attempt still finds its job).
            "SELECT j.owner_id, j.id FROM jobs j
             WHERE j.id < ? AND (? IS NULL OR j.id > ?)
               AND j.finished_at < ? AND j.status IN ('succeeded', 'failed', 'cancelled')
               AND NOT EXISTS (
                   SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
                   WHERE ac.owner_id = j.owner_id AND ac.job_id = j.id AND a.status IN ('scheduled', 'started', 'unknown'))
             ORDER BY j.id LIMIT ?",
        )
        .bind(bound)
        .bind(after.map(|a| a.to_string()))
        .bind(after.map(|a| a.to_string()))
        .bind(cutoff)
        .bind(limit)
        .fetch_all(&mut *tx.tx)
        .await?;
        if doomed.is_empty() {
            return Ok(PrunedJobs::default());
        }
        let last = doomed
            .iter()
            .map(|(_, id)| id)
            .max()
            .map(|id| Uuid::parse_str(id))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("jobs.id: {e}")))?;
        let doomed_json = serde_json::Value::from(
            doomed
                .iter()
                .map(|(o, i)| vec![o.clone(), i.clone()])
                .collect::<Vec<_>>(),
        )
        .to_string();
        const DOOMED: &str = "WITH d(owner_id, id) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)) ";
        for delete in [
            "DELETE FROM attempts WHERE (owner_id, activity_id) IN
                 (SELECT ac.owner_id, ac.id FROM activities ac JOIN d ON ac.owner_id = d.owner_id AND ac.job_id = d.id)",
            "DELETE FROM activities WHERE (owner_id, job_id) IN (SELECT owner_id, id FROM d)",
            "DELETE FROM job_events WHERE (owner_id, job_id) IN (SELECT owner_id, id FROM d)",
            "DELETE FROM timers WHERE (owner_id, job_id) IN (SELECT owner_id, id FROM d)",
            "DELETE FROM jobs WHERE (owner_id, id) IN (SELECT owner_id, id FROM d)",
        ] {
            sqlx::query(&format!("{DOOMED}{delete}")).bind(&doomed_json).execute(&mut *tx.tx).await?;
        }
        Box::new(tx).commit().await?;
        // One writer: every job chosen is deleted.
        Ok(PrunedJobs {
            deleted: doomed.len() as u64,
            chosen: doomed.len() as u64,
            last,
        })
    }

    async fn extend_leases(&self, renewals: &[LeaseRenewal]) -> StoreResult<Vec<bool>> {
        // One write transaction, one commit, for all of them; each fenced on its own.
        let mut tx = self.write().await?;
        let mut extended = Vec::with_capacity(renewals.len());
        for r in renewals {
            extended.push(
                extend_lease_in(
                    &mut tx,
                    r.owner.as_deref(),
                    r.attempt_id,
                    r.token,
                    r.details.as_ref(),
                )
                .await?,
            );
        }
        Box::new(tx).commit().await?;
        Ok(extended)
    }

    async fn register_contract(&self, contract: &Contract) -> StoreResult<()> {
        let mut tx = self.write().await?;
        // Registering a known schema again makes it the current contract again.
        sqlx::query(
            "INSERT INTO contracts (owner_id, activity, contract_hash, output_schema, registered_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (owner_id, activity, contract_hash) DO UPDATE SET registered_at = excluded.registered_at",
        )
        .bind(&contract.owner)
        .bind(&contract.activity)
        .bind(&contract.contract_hash)
        .bind(contract.output_schema.to_string())
        .bind(tx.now)
        .execute(&mut *tx.tx)
        .await?;
        Box::new(tx).commit().await
    }

    async fn insert_certification(&self, c: &NewCertification) -> StoreResult<Certification> {
        let mut tx = self.write().await?;
        let created_at = tx.now;
        // Certification order (invariant 6): stamped by the write transaction's clock, taken
        // under the one writer's lock, never an engine's, so the later run is the latest one.
        sqlx::query(
            "INSERT INTO certifications (owner_id, id, activity, provider, contract_hash, passed, report, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&c.owner)
        .bind(c.id.to_string())
        .bind(&c.activity)
        .bind(&c.provider)
        .bind(&c.contract_hash)
        .bind(c.passed)
        .bind(c.report.to_string())
        .bind(created_at)
        .execute(&mut *tx.tx)
        .await?;
        Box::new(tx).commit().await?;
        Ok(Certification {
            id: c.id,
            owner: c.owner.clone(),
            activity: c.activity.clone(),
            provider: c.provider.clone(),
            contract_hash: c.contract_hash.clone(),
            passed: c.passed,
            report: c.report.clone(),
            created_at: ts(created_at),
        })
    }

    async fn insert_token(&self, token: &TokenRow) -> StoreResult<()> {
        let mut tx = self.write().await?;
        sqlx::query("INSERT INTO api_tokens (owner_id, id, role, token_hash, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(&token.owner_id)
            .bind(token.id.to_string())
            .bind(token.role.as_str())
            .bind(&token.token_hash)
            .bind(tx.now)
            .execute(&mut *tx.tx)
            .await?;
        Box::new(tx).commit().await
    }

    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRow>> {
        // A revoked token stops working at once.
        let row = sqlx::query("SELECT owner_id, id, role, token_hash FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL")
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            let role: String = r.try_get("role")?;
            Ok(TokenRow {
                owner_id: r.try_get("owner_id")?,
                id: uid(&r, "id")?,
                role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
                token_hash: r.try_get("token_hash")?,
            })
        })
        .transpose()
    }

    async fn revoke_token(&self, token_id: Uuid) -> StoreResult<bool> {
        let mut tx = self.write().await?;
        let done =
            sqlx::query("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")
                .bind(tx.now)
                .bind(token_id.to_string())
                .execute(&mut *tx.tx)
                .await?;
        Box::new(tx).commit().await?;
        Ok(done.rows_affected() > 0)
    }

    async fn schedule(&self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>> {
        let row = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE owner_id = ? AND name = ?"
        ))
        .bind(owner)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(schedule_row).transpose()
    }

    async fn list_schedules(&self, owner: &str) -> StoreResult<Vec<ScheduleRow>> {
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE owner_id = ? ORDER BY name"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn schedule_events(
        &self,
        owner: &str,
        name: &str,
        limit: i64,
    ) -> StoreResult<Vec<ScheduleEvent>> {
        let rows = sqlx::query(
            "SELECT * FROM (SELECT id, at, type, tick_at, job_id, data FROM schedule_events
                            WHERE owner_id = ? AND schedule_name = ? ORDER BY id DESC LIMIT ?)
             ORDER BY id",
        )
        .bind(owner)
        .bind(name)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ScheduleEvent {
                    id: r.try_get("id")?,
                    at: req_ts(r, "at")?,
                    kind: r.try_get("type")?,
                    tick_at: opt_ts(r, "tick_at")?,
                    job_id: opt_uid(r, "job_id")?,
                    data: json(r, "data")?,
                })
            })
            .collect()
    }

    async fn next_schedule_fire(&self) -> StoreResult<NextScheduleFire> {
        let next: Option<i64> =
            sqlx::query_scalar("SELECT min(next_fire_at) FROM schedules WHERE NOT paused")
                .fetch_one(&self.pool)
                .await?;
        Ok(NextScheduleFire {
            at: next.map(ts),
            now: ts(now_us()),
        })
    }

    async fn listen_for_work(&self, signal: Arc<Notify>, shutdown: CancellationToken) {
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.push(signal.clone());
        }
        shutdown.cancelled().await;
        if let Ok(mut listeners) = self.listeners.lock() {
            listeners.retain(|l| !Arc::ptr_eq(l, &signal));
        }
    }
}

/// The heartbeat fast path in `tx`: extends the lease of attempt `attempt_id` if it is
/// `started`, held by `token`, and of `owner` (any owner when `None`).
async fn extend_lease_in(
    tx: &mut SqliteTx,
    owner: Option<&str>,
    attempt_id: Uuid,
    token: Uuid,
    details: Option<&Value>,
) -> StoreResult<bool> {
    // Owner isolation: an attempt outside the owner is not found.
    let row = sqlx::query(
        "SELECT t.owner_id, t.started_at, a.options FROM attempts t
         JOIN activities a ON a.owner_id = t.owner_id AND a.id = t.activity_id
         WHERE t.id = ? AND (? IS NULL OR t.owner_id = ?) AND t.lease_token = ? AND t.status = 'started'",
    )
    .bind(attempt_id.to_string())
    .bind(owner)
    .bind(owner)
    .bind(token.to_string())
    .fetch_optional(&mut *tx.tx)
    .await?;
    let Some(row) = row else { return Ok(false) };
    let owner_id: String = row.try_get("owner_id")?;
    let options: ActivityOptions = serde_json::from_value(json(&row, "options")?)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let started: i64 = row
        .try_get::<Option<i64>, _>("started_at")?
        .unwrap_or(tx.now);
    // Fencing (invariant 5): only the holder of the lease token of a started attempt
    // extends its lease, never past start-to-close.
    let done = sqlx::query(
        "UPDATE attempts SET heartbeat_at = ?, heartbeat_details = COALESCE(?, heartbeat_details), lease_expires_at = ?
         WHERE owner_id = ? AND id = ? AND lease_token = ? AND status = 'started'",
    )
    .bind(tx.now)
    .bind(details.map(|d| d.to_string()))
    .bind(lease_until(&options, tx.now, started))
    .bind(&owner_id)
    .bind(attempt_id.to_string())
    .bind(token.to_string())
    .execute(&mut *tx.tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A SQLite write transaction (`BEGIN IMMEDIATE`).
pub struct SqliteTx {
    tx: Transaction<'static, Sqlite>,
    /// The transaction's clock, like PostgreSQL's `now()`.
    now: i64,
    _writer: OwnedMutexGuard<()>,
    listeners: Arc<StdMutex<Vec<Arc<Notify>>>>,
    wake: bool,
}

#[async_trait]
impl StoreTx for SqliteTx {
    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let SqliteTx {
            tx,
            wake,
            listeners,
            ..
        } = *self;
        tx.commit().await?;
        if wake {
            if let Ok(listeners) = listeners.lock() {
                listeners.iter().for_each(|l| l.notify_waiters());
            }
        }
        Ok(())
    }

    async fn now(&mut self) -> StoreResult<DateTime<Utc>> {
        Ok(ts(self.now))
    }

    async fn insert_job(&mut self, job: &NewJob) -> StoreResult<Option<JobRow>> {
        // Invariant 1: one job per (owner, idempotency key); the loser inserts nothing.
        let row = sqlx::query(&format!(
            "INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
                               created_at, updated_at, wf_ready)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (owner_id, idempotency_key) DO NOTHING
             RETURNING {JOB_COLUMNS}"
        ))
        .bind(&job.owner_id)
        .bind(job.id.to_string())
        .bind(&job.idempotency_key)
        .bind(&job.fingerprint)
        .bind(job.kind.as_str())
        .bind(&job.workflow)
        .bind(&job.activity)
        .bind(&job.task_queue)
        .bind(job.input.to_string())
        .bind(self.now)
        .bind(self.now)
        .bind(job.kind == JobKind::Workflow)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn job_by_idempotency_key(
        &mut self,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE owner_id = ? AND idempotency_key = ?"
        ))
        .bind(owner)
        .bind(key)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn lock_job_of_attempt(
        &mut self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<JobRow>> {
        // Owner isolation: an attempt outside the scope is not found.
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs
             WHERE (owner_id, id) = (SELECT owner_id, job_id FROM attempts WHERE id = ?1 AND (?2 IS NULL OR owner_id = ?2))"
        ))
        .bind(attempt_id.to_string())
        .bind(scope.owner())
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn lock_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobRow>> {
        // The write transaction already holds the database's write lock.
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE owner_id = ? AND id = ?"
        ))
        .bind(owner)
        .bind(job_id.to_string())
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn mark_job_running(&mut self, owner: &str, job_id: Uuid) -> StoreResult<bool> {
        // Job status: only a queued job starts running.
        let done = sqlx::query("UPDATE jobs SET status = 'running', updated_at = ? WHERE owner_id = ? AND id = ? AND status = 'queued'")
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit_job_result(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        attempt_id: Option<Uuid>,
        result: &Value,
    ) -> StoreResult<bool> {
        // Invariant 4 (job CAS): exactly one result wins the job's slot.
        let done = sqlx::query(
            "UPDATE jobs SET status = 'succeeded', result = ?, completed_by = ?, version = version + 1,
                             updated_at = ?, finished_at = ?
             WHERE owner_id = ? AND id = ? AND version = ? AND completed_by IS NULL AND status IN ('queued', 'running')",
        )
        .bind(result.to_string())
        .bind(attempt_id.map(|a| a.to_string()))
        .bind(self.now)
        .bind(self.now)
        .bind(owner)
        .bind(job_id.to_string())
        .bind(version)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn close_job(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        status: JobStatus,
        error: Option<&ErrorInfo>,
    ) -> StoreResult<bool> {
        // Invariant 4: closing moves the version, so no later result takes the slot.
        let done = sqlx::query(
            "UPDATE jobs SET status = ?, error = ?, version = version + 1, updated_at = ?, finished_at = ?
             WHERE owner_id = ? AND id = ? AND version = ? AND completed_by IS NULL AND status IN ('queued', 'running')",
        )
        .bind(status.as_str())
        .bind(error.map(text).transpose()?)
        .bind(self.now)
        .bind(self.now)
        .bind(owner)
        .bind(job_id.to_string())
        .bind(version)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_activity(&mut self, a: &NewActivity) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&a.owner_id)
        .bind(a.id.to_string())
        .bind(a.job_id.to_string())
        .bind(a.seq)
        .bind(&a.name)
        .bind(text(&a.providers)?)
        .bind(text(&a.options)?)
        .bind(&a.task_queue)
        .bind(a.input.to_string())
        .bind(self.now)
        .bind(self.now)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    async fn activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Option<ActivityRow>> {
        let row = sqlx::query(&format!(
            "SELECT {ACTIVITY_COLUMNS} FROM activities WHERE owner_id = ? AND id = ?"
        ))
        .bind(owner)
        .bind(activity_id.to_string())
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(activity_row).transpose()
    }

    async fn activity_by_seq(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i32,
    ) -> StoreResult<Option<ActivityRow>> {
        let row = sqlx::query(&format!("SELECT {ACTIVITY_COLUMNS} FROM activities WHERE owner_id = ? AND job_id = ? AND seq = ?"))
            .bind(owner)
            .bind(job_id.to_string())
            .bind(seq)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(activity_row).transpose()
    }

    async fn activities_of_job(
        &mut self,
        owner: &str,
        job_id: Uuid,
    ) -> StoreResult<Vec<ActivityRow>> {
        let rows = sqlx::query(&format!("SELECT {ACTIVITY_COLUMNS} FROM activities WHERE owner_id = ? AND job_id = ? ORDER BY seq"))
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(activity_row).collect()
    }

    async fn set_activity_status(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        from: &[ActivityStatus],
        to: ActivityStatus,
    ) -> StoreResult<bool> {
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        // Activity status: moves only from the expected open statuses, never out of a closed one.
        let done = sqlx::query(
            "UPDATE activities SET status = ?, updated_at = ?
             WHERE owner_id = ? AND id = ? AND status IN (SELECT value FROM json_each(?))
               AND status NOT IN ('succeeded', 'failed', 'cancelled')",
        )
        .bind(to.as_str())
        .bind(self.now)
        .bind(owner)
        .bind(activity_id.to_string())
        .bind(text(&from)?)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit_activity_result(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        read_version: i64,
        attempt_id: Uuid,
        result: &Value,
    ) -> StoreResult<bool> {
        // Invariant 4 (the CAS commit): exactly one attempt takes the result slot; zero
        // rows means another attempt won or the slot was closed.
        let done = sqlx::query(
            "UPDATE activities SET status = 'succeeded', result = ?, completed_by = ?, version = version + 1,
                                   updated_at = ?, finished_at = ?
             WHERE owner_id = ? AND id = ? AND version = ? AND completed_by IS NULL",
        )
        .bind(result.to_string())
        .bind(attempt_id.to_string())
        .bind(self.now)
        .bind(self.now)
        .bind(owner)
        .bind(activity_id.to_string())
        .bind(read_version)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn close_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        status: ActivityStatus,
        error: Option<&ErrorInfo>,
    ) -> StoreResult<bool> {
        // Invariant 4: closing the slot moves the version, so every later result loses.
        let done = sqlx::query(
            "UPDATE activities SET status = ?, error = ?, version = version + 1, updated_at = ?, finished_at = ?
             WHERE owner_id = ? AND id = ? AND completed_by IS NULL AND status NOT IN ('succeeded', 'failed', 'cancelled')",
        )
        .bind(status.as_str())
        .bind(error.map(text).transpose()?)
        .bind(self.now)
        .bind(self.now)
        .bind(owner)
        .bind(activity_id.to_string())
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_attempt(&mut self, a: &NewAttempt) -> StoreResult<Option<AttemptRow>> {
        let available = self.now + (a.delay_ms as i64).saturating_mul(1000);
        // Invariant 2: the partial unique index refuses a second live attempt; the refused
        // insert returns no row.
        let row = sqlx::query(&format!(
            "INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider,
                                   available_at, start_deadline_at, created_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT DO NOTHING
             RETURNING {ATTEMPT_COLUMNS}"
        ))
        .bind(&a.owner_id)
        .bind(a.id.to_string())
        .bind(a.activity_id.to_string())
        .bind(a.job_id.to_string())
        .bind(a.number)
        .bind(&a.activity)
        .bind(&a.task_queue)
        .bind(&a.provider)
        .bind(available)
        .bind(secs_us(a.schedule_to_start_timeout_s).map(|d| available + d))
        .bind(self.now)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(attempt_row).transpose()
    }

    async fn attempt(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<Option<AttemptRow>> {
        let row = sqlx::query(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE owner_id = ? AND id = ?"
        ))
        .bind(owner)
        .bind(attempt_id.to_string())
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(attempt_row).transpose()
    }

    async fn attempts_of_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Vec<AttemptRow>> {
        let rows = sqlx::query(&format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE owner_id = ? AND activity_id = ? ORDER BY number"))
            .bind(owner)
            .bind(activity_id.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(attempt_row).collect()
    }

    async fn finish_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        from: &[AttemptStatus],
        to: AttemptStatus,
        error: Option<&ErrorInfo>,
        outcome: Option<CompletionOutcome>,
    ) -> StoreResult<bool> {
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        // Attempt status: an attempt ends once, from the statuses the caller saw.
        let done = sqlx::query(
            "UPDATE attempts SET status = ?, error = COALESCE(?, error), completion_outcome = ?,
                                 finished_at = COALESCE(finished_at, ?), lease_expires_at = NULL
             WHERE owner_id = ? AND id = ? AND status IN (SELECT value FROM json_each(?))",
        )
        .bind(to.as_str())
        .bind(error.map(text).transpose()?)
        .bind(outcome.map(|o| o.as_str()))
        .bind(self.now)
        .bind(owner)
        .bind(attempt_id.to_string())
        .bind(text(&from)?)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn mark_attempt_unknown(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<bool> {
        // Invariant 3: only a started attempt whose lease really expired becomes unknown.
        let done = sqlx::query(
            "UPDATE attempts SET status = 'unknown', unknown_at = lease_expires_at
             WHERE owner_id = ? AND id = ? AND status = 'started' AND lease_expires_at < ?",
        )
        .bind(owner)
        .bind(attempt_id.to_string())
        .bind(self.now)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn revive_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<bool> {
        let row = sqlx::query(
            "SELECT t.started_at, a.options FROM attempts t JOIN activities a ON a.owner_id = t.owner_id AND a.id = t.activity_id
             WHERE t.owner_id = ? AND t.id = ?",
        )
        .bind(owner)
        .bind(attempt_id.to_string())
        .fetch_optional(&mut *self.tx)
        .await?;
        let Some(row) = row else { return Ok(false) };
        let options: ActivityOptions = serde_json::from_value(json(&row, "options")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let started: i64 = row
            .try_get::<Option<i64>, _>("started_at")?
            .unwrap_or(self.now);
        // Past its start-to-close deadline an attempt stays unknown: no revival.
        if secs_us(options.start_to_close_timeout_s).is_some_and(|d| started + d <= self.now) {
            return Ok(false);
        }
        // Fencing (invariant 5): only the holder of the lease token revives an unknown attempt.
        let done = sqlx::query(
            "UPDATE attempts SET status = 'started', unknown_at = NULL, heartbeat_at = ?,
                                 heartbeat_details = COALESCE(?, heartbeat_details), lease_expires_at = ?
             WHERE owner_id = ? AND id = ? AND lease_token = ? AND status = 'unknown'",
        )
        .bind(self.now)
        .bind(details.map(|d| d.to_string()))
        .bind(lease_until(&options, self.now, started))
        .bind(owner)
        .bind(attempt_id.to_string())
        .bind(token.to_string())
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn cancel_live_attempts(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        except: Option<Uuid>,
        cancelled_by: &str,
        reason: &str,
    ) -> StoreResult<Vec<(Uuid, AttemptStatus)>> {
        let live = sqlx::query(
            "SELECT id, status FROM attempts WHERE owner_id = ?1 AND activity_id = ?2 AND (?3 IS NULL OR id <> ?3)
               AND status IN ('scheduled', 'started', 'unknown')",
        )
        .bind(owner)
        .bind(activity_id.to_string())
        .bind(except.map(|e| e.to_string()))
        .fetch_all(&mut *self.tx)
        .await?;
        let mut cancelled = Vec::with_capacity(live.len());
        for row in live {
            let id = uid(&row, "id")?;
            let was: String = row.try_get("status")?;
            if self.cancel_attempt(owner, id, cancelled_by, reason).await? {
                cancelled.push((
                    id,
                    AttemptStatus::parse(&was).ok_or_else(|| corrupt("attempt status", &was))?,
                ));
            }
        }
        Ok(cancelled)
    }

    async fn cancel_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        cancelled_by: &str,
        reason: &str,
    ) -> StoreResult<bool> {
        // Attempt status: only a live attempt can be cancelled, once.
        let done = sqlx::query(
            "UPDATE attempts SET status = 'cancelled', cancelled_by = ?, cancel_reason = ?, cancelled_at = ?, finished_at = ?
             WHERE owner_id = ? AND id = ? AND status IN ('scheduled', 'started', 'unknown')",
        )
        .bind(cancelled_by)
        .bind(reason)
        .bind(self.now)
        .bind(self.now)
        .bind(owner)
        .bind(attempt_id.to_string())
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn notify_work(&mut self, _task_queue: &str) -> StoreResult<()> {
        // In-process wake-up, delivered at commit.
        self.wake = true;
        Ok(())
    }

    async fn append_events(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        for e in events {
            // The write transaction is the only writer, so numbering after the maximum is safe.
            sqlx::query(
                "INSERT INTO job_events (owner_id, job_id, seq, at, type, attempt_id, actor, data)
                 SELECT ?1, ?2, COALESCE(MAX(seq), 0) + 1, ?3, ?4, ?5, ?6, ?7
                 FROM job_events WHERE owner_id = ?1 AND job_id = ?2",
            )
            .bind(&e.owner_id)
            .bind(e.job_id.to_string())
            .bind(self.now)
            .bind(e.kind)
            .bind(e.attempt_id.map(|a| a.to_string()))
            .bind(&e.actor)
            .bind(e.data.to_string())
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }

    async fn current_contract(
        &mut self,
        owner: &str,
        activity: &str,
    ) -> StoreResult<Option<Contract>> {
        // The owner's own contract, else the platform's (`*`).
        let row = sqlx::query(
            "SELECT owner_id, activity, contract_hash, output_schema FROM contracts
             WHERE owner_id IN (?1, '*') AND activity = ?2
             ORDER BY (owner_id = ?1) DESC, registered_at DESC LIMIT 1",
        )
        .bind(owner)
        .bind(activity)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.map(|r| {
            Ok(Contract {
                owner: r.try_get("owner_id")?,
                activity: r.try_get("activity")?,
                contract_hash: r.try_get("contract_hash")?,
                output_schema: json(&r, "output_schema")?,
            })
        })
        .transpose()
    }

    async fn latest_certification(
        &mut self,
        owner: &str,
        activity: &str,
        provider: &str,
        contract_hash: &str,
    ) -> StoreResult<Option<Certification>> {
        // Invariant 6: only the latest certification for the current contract counts,
        // latest by the write transactions' clock that stamped it (then by rowid: the order
        // of the inserts under the one writer).
        let row = sqlx::query(
            "SELECT id, owner_id, activity, provider, contract_hash, passed, report, created_at FROM certifications
             WHERE owner_id IN (?1, '*') AND activity = ?2 AND provider = ?3 AND contract_hash = ?4
             ORDER BY (owner_id = ?1) DESC, created_at DESC, rowid DESC LIMIT 1",
        )
        .bind(owner)
        .bind(activity)
        .bind(provider)
        .bind(contract_hash)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(certification_row).transpose()
    }

    async fn claim_attempts(&mut self, filter: &ClaimFilter) -> StoreResult<Vec<ClaimedAttempt>> {
        let pairs: Vec<(String, String)> = filter.providers.clone();
        let candidates = sqlx::query(
            "SELECT a.owner_id, a.id FROM attempts a
             WHERE a.status = 'scheduled' AND a.task_queue = ?1 AND a.available_at <= ?2
               AND (?3 IS NULL OR a.owner_id = ?3)
               AND EXISTS (SELECT 1 FROM json_each(?4) p
                           WHERE json_extract(p.value, '$[0]') = a.activity AND json_extract(p.value, '$[1]') = a.provider)
             ORDER BY a.available_at, a.id LIMIT ?5",
        )
        .bind(&filter.task_queue)
        .bind(self.now)
        .bind(filter.scope.owner())
        .bind(text(&pairs)?)
        .bind(filter.limit)
        .fetch_all(&mut *self.tx)
        .await?;
        let mut claimed = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            let owner: String = candidate.try_get("owner_id")?;
            let id: String = candidate.try_get("id")?;
            let activity = sqlx::query(
                "SELECT a.seq, a.input, a.options, a.version FROM attempts t
                 JOIN activities a ON a.owner_id = t.owner_id AND a.id = t.activity_id
                 WHERE t.owner_id = ? AND t.id = ?",
            )
            .bind(&owner)
            .bind(&id)
            .fetch_one(&mut *self.tx)
            .await?;
            let options: ActivityOptions = serde_json::from_value(json(&activity, "options")?)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            // Dispatch: only a still-scheduled attempt is handed out, once, with a fresh
            // fencing token.
            let row = sqlx::query(&format!(
                "UPDATE attempts SET status = 'started', lease_token = ?, worker_id = ?, started_at = ?, heartbeat_at = ?,
                                     read_version = ?, lease_expires_at = ?
                 WHERE owner_id = ? AND id = ? AND status = 'scheduled'
                 RETURNING {ATTEMPT_COLUMNS}"
            ))
            .bind(Uuid::new_v4().to_string())
            .bind(&filter.worker_id)
            .bind(self.now)
            .bind(self.now)
            .bind(activity.try_get::<i64, _>("version")?)
            .bind(lease_until(&options, self.now, self.now))
            .bind(&owner)
            .bind(&id)
            .fetch_optional(&mut *self.tx)
            .await?;
            let Some(row) = row else { continue };
            let attempt = attempt_row(&row)?;
            // Activity status: scheduled → running with its attempt; job: queued → running.
            sqlx::query("UPDATE activities SET status = 'running', updated_at = ? WHERE owner_id = ? AND id = ? AND status = 'scheduled'")
                .bind(self.now)
                .bind(&owner)
                .bind(attempt.activity_id.to_string())
                .execute(&mut *self.tx)
                .await?;
            sqlx::query("UPDATE jobs SET status = 'running', updated_at = ? WHERE owner_id = ? AND id = ? AND status = 'queued'")
                .bind(self.now)
                .bind(&owner)
                .bind(attempt.job_id.to_string())
                .execute(&mut *self.tx)
                .await?;
            claimed.push(ClaimedAttempt {
                attempt,
                activity_seq: activity.try_get("seq")?,
                input: json(&activity, "input")?,
                options,
            });
        }
        Ok(claimed)
    }

    async fn claim_workflow_tasks(
        &mut self,
        filter: &WorkflowClaimFilter,
    ) -> StoreResult<Vec<JobRow>> {
        let candidates = sqlx::query(
            "SELECT owner_id, id FROM jobs
             WHERE kind = 'workflow' AND status IN ('queued', 'running') AND wf_parked = 0
               AND task_queue = ?1 AND workflow IN (SELECT value FROM json_each(?2))
               AND (?3 IS NULL OR owner_id = ?3)
               AND ((wf_ready = 1 AND wf_lease_token IS NULL) OR wf_lease_expires_at < ?4)
             ORDER BY updated_at, id LIMIT ?5",
        )
        .bind(&filter.task_queue)
        .bind(text(&filter.workflows)?)
        .bind(filter.scope.owner())
        .bind(self.now)
        .bind(filter.limit)
        .fetch_all(&mut *self.tx)
        .await?;
        let mut jobs = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            // Dispatch: a workflow task is handed to one worker; an expired one again.
            let row = sqlx::query(&format!(
                "UPDATE jobs SET wf_ready = 0, wf_lease_token = ?, wf_worker_id = ?, wf_lease_expires_at = ?,
                                 status = CASE WHEN status = 'queued' THEN 'running' ELSE status END, updated_at = ?
                 WHERE owner_id = ? AND id = ?
                 RETURNING {JOB_COLUMNS}"
            ))
            .bind(Uuid::new_v4().to_string())
            .bind(&filter.worker_id)
            .bind(self.now + (filter.lease_ms as i64).saturating_mul(1000))
            .bind(self.now)
            .bind(candidate.try_get::<String, _>("owner_id")?)
            .bind(candidate.try_get::<String, _>("id")?)
            .fetch_one(&mut *self.tx)
            .await?;
            jobs.push(job_row(&row)?);
        }
        Ok(jobs)
    }

    async fn complete_workflow_task(
        &mut self,
        owner: &str,
        job_id: Uuid,
        token: Uuid,
        read_version: i64,
    ) -> StoreResult<bool> {
        // Workflow-task CAS: only the holder of the current task, on the version it read,
        // applies commands; a duplicated or stale task changes nothing.
        let done = sqlx::query(
            "UPDATE jobs SET version = version + 1, wf_lease_token = NULL, wf_lease_expires_at = NULL, updated_at = ?
             WHERE owner_id = ? AND id = ? AND wf_lease_token = ? AND version = ? AND status IN ('queued', 'running')",
        )
        .bind(self.now)
        .bind(owner)
        .bind(job_id.to_string())
        .bind(token.to_string())
        .bind(read_version)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn mark_workflow_ready(&mut self, owner: &str, job_id: Uuid) -> StoreResult<()> {
        let done = sqlx::query(
            "UPDATE jobs SET wf_ready = 1, updated_at = ?
             WHERE owner_id = ? AND id = ? AND kind = 'workflow' AND status IN ('queued', 'running')",
        )
        .bind(self.now)
        .bind(owner)
        .bind(job_id.to_string())
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() > 0 {
            self.wake = true;
        }
        Ok(())
    }

    async fn park_workflow(
        &mut self,
        owner: &str,
        job_id: Uuid,
        error: &ErrorInfo,
    ) -> StoreResult<()> {
        sqlx::query("UPDATE jobs SET wf_parked = 1, error = ?, updated_at = ? WHERE owner_id = ? AND id = ? AND status IN ('queued', 'running')")
            .bind(text(error)?)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn insert_timer(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i32,
        delay_ms: u64,
    ) -> StoreResult<bool> {
        let done = sqlx::query("INSERT INTO timers (owner_id, job_id, seq, fire_at, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
            .bind(owner)
            .bind(job_id.to_string())
            .bind(seq)
            .bind(self.now + (delay_ms as i64).saturating_mul(1000))
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn timers_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<TimerRow>> {
        let rows = sqlx::query("SELECT seq, fire_at, fired_at FROM timers WHERE owner_id = ? AND job_id = ? ORDER BY seq")
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TimerRow {
                    seq: r.try_get("seq")?,
                    fire_at: req_ts(r, "fire_at")?,
                    fired_at: opt_ts(r, "fired_at")?,
                })
            })
            .collect()
    }

    async fn lock_due_timers(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid, i32)>> {
        let rows = sqlx::query("SELECT owner_id, job_id, seq FROM timers WHERE fired_at IS NULL AND fire_at <= ? ORDER BY fire_at LIMIT ?")
            .bind(self.now)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "job_id")?, r.try_get("seq")?)))
            .collect()
    }

    async fn fire_timer(&mut self, owner: &str, job_id: Uuid, seq: i32) -> StoreResult<bool> {
        // A timer fires once.
        let done = sqlx::query(
            "UPDATE timers SET fired_at = ? WHERE owner_id = ? AND job_id = ? AND seq = ? AND fired_at IS NULL AND fire_at <= ?",
        )
        .bind(self.now)
        .bind(owner)
        .bind(job_id.to_string())
        .bind(seq)
        .bind(self.now)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_expired_leases(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        let rows = sqlx::query(
            "SELECT owner_id, id FROM attempts WHERE status = 'started' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ?",
        )
        .bind(self.now)
        .bind(limit)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "id")?)))
            .collect()
    }

    async fn lock_overdue_scheduled(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        let rows = sqlx::query(
            "SELECT owner_id, id FROM attempts WHERE status = 'scheduled' AND start_deadline_at < ? ORDER BY start_deadline_at LIMIT ?",
        )
        .bind(self.now)
        .bind(limit)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "id")?)))
            .collect()
    }

    async fn lock_schedule(&mut self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>> {
        // The write transaction is the only writer: reading is locking.
        let row = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE owner_id = ? AND name = ?"
        ))
        .bind(owner)
        .bind(name)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(schedule_row).transpose()
    }

    async fn insert_schedule(&mut self, s: &ScheduleRow) -> StoreResult<bool> {
        let v = &s.view;
        // One schedule per (owner, name): a concurrent creator inserts nothing.
        let done = sqlx::query(
            "INSERT INTO schedules (owner_id, name, cron, timezone, job, overlap, catchup_window_s, paused,
                                    next_fire_at, version, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
             ON CONFLICT (owner_id, name) DO NOTHING",
        )
        .bind(&v.owner)
        .bind(&v.name)
        .bind(&v.cron)
        .bind(&v.timezone)
        .bind(v.job.to_string())
        .bind(v.overlap.as_str())
        .bind(v.catchup_window_s as i64)
        .bind(v.paused)
        .bind(v.next_fire_at.map(|t| t.timestamp_micros()))
        .bind(s.version)
        .bind(v.created_at.timestamp_micros())
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn update_schedule(&mut self, s: &ScheduleRow) -> StoreResult<bool> {
        let v = &s.view;
        // Schedule CAS: only a writer that read the current version changes the schedule,
        // so a tick is advanced (and fired) once, and a stale writer changes nothing.
        let done = sqlx::query(
            "UPDATE schedules
             SET cron = ?4, timezone = ?5, job = ?6, overlap = ?7, catchup_window_s = ?8, paused = ?9,
                 next_fire_at = ?10, last_fired_at = ?11, last_job_id = ?12, fired_count = ?13,
                 skipped_overlap_count = ?14, skipped_too_old_count = ?15, updated_at = ?16,
                 version = version + 1
             WHERE owner_id = ?1 AND name = ?2 AND version = ?3",
        )
        .bind(&v.owner)
        .bind(&v.name)
        .bind(s.version)
        .bind(&v.cron)
        .bind(&v.timezone)
        .bind(v.job.to_string())
        .bind(v.overlap.as_str())
        .bind(v.catchup_window_s as i64)
        .bind(v.paused)
        .bind(v.next_fire_at.map(|t| t.timestamp_micros()))
        .bind(v.last_fired_at.map(|t| t.timestamp_micros()))
        .bind(v.last_job_id.map(|j| j.to_string()))
        .bind(v.fired_count as i64)
        .bind(v.skipped_overlap_count as i64)
        .bind(v.skipped_too_old_count as i64)
        .bind(v.updated_at.timestamp_micros())
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_schedule(&mut self, owner: &str, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM schedules WHERE owner_id = ? AND name = ?")
            .bind(owner)
            .bind(name)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_due_schedules(&mut self, limit: i64) -> StoreResult<Vec<ScheduleRow>> {
        // Scheduler loop: the write transaction is the only writer, so each due schedule
        // is taken by one engine at a time, and only once due by the transaction's clock
        // (which the pass computes its ticks from), whatever the engine's clock.
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE NOT paused AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?"
        ))
        .bind(self.now)
        .bind(limit)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn job_status(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobStatus>> {
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM jobs WHERE owner_id = ? AND id = ?")
                .bind(owner)
                .bind(job_id.to_string())
                .fetch_optional(&mut *self.tx)
                .await?;
        status
            .map(|s| JobStatus::parse(&s).ok_or_else(|| corrupt("job status", &s)))
            .transpose()
    }

    async fn append_schedule_events(&mut self, events: &[NewScheduleEvent]) -> StoreResult<()> {
        for e in events {
            // The write transaction is the only writer, so numbering after the maximum is safe.
            sqlx::query(
                "INSERT INTO schedule_events (owner_id, schedule_name, id, at, type, tick_at, job_id, data)
                 SELECT ?1, ?2, COALESCE(MAX(id), 0) + 1, ?3, ?4, ?5, ?6, ?7
                 FROM schedule_events WHERE owner_id = ?1 AND schedule_name = ?2",
            )
            .bind(&e.owner_id)
            .bind(&e.schedule_name)
            .bind(e.at.timestamp_micros())
            .bind(e.kind)
            .bind(e.tick_at.map(|t| t.timestamp_micros()))
            .bind(e.job_id.map(|j| j.to_string()))
            .bind(e.data.to_string())
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }
}
