//! The PostgreSQL store. Every statement that guards an invariant says which.

use async_trait::async_trait;
use serde_json::Value;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex as StdMutex, OnceLock};

use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row, Transaction};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{
    ActivityRow, AttemptLocation, AttemptRow, ClaimFilter, ClaimedAttempt, ConnectSettings,
    ContractRecord, JobQuery, JobRow, LeaseExtension, LeaseRenewal, LockedAttempt, NewActivity,
    NewActivityJob, NewAttempt, NewCertification, NewEvent, NewJob, NewReplay, NewScheduleEvent,
    NextScheduleFire, PrunedJobs, ReplayedJob, ScheduleRow, Store, StoreResult, StoreTx,
    StuckQuery, TimerRow, TokenRow, WinningResult, WorkflowClaimFilter,
};
use crate::error::StoreError;
use crate::model::{
    ActivityStatus, ActivityView, AttemptStatus, AttemptView, Certification, CompletionOutcome,
    Contract, ErrorInfo, JobEvent, JobKind, JobStatus, JobView, Role, ScheduleEvent, ScheduleView,
    Scope, StuckAttempt,
};

/// The migrations of `migrations/postgres`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// A [`Store`] on PostgreSQL.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    bell: Arc<WorkBell>,
    losses: Arc<Losses>,
}

/// When this engine last saw the server drop one of its connections (the LISTEN relay's,
/// which is always reading and so notices a restart at once, or one that failed its
/// check before use). A server that drops one connection has usually dropped them all
/// (a restart, a failover, a proxy that went away): from then on, a pooled connection
/// that went idle before that moment is checked before it is handed out, as one idle for
/// [`PING_AFTER_IDLE`] is, so that no request is given a connection the server already
/// closed. Connections used since were checked when they were given back to the pool.
#[derive(Debug)]
struct Losses {
    since: std::time::Instant,
    /// Microseconds from `since` to the latest loss, plus one; 0 for none yet.
    latest: std::sync::atomic::AtomicU64,
}

impl Losses {
    fn new() -> Arc<Self> {
        Arc::new(Losses {
            since: std::time::Instant::now(),
            latest: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Records that the server dropped a connection now.
    fn mark(&self) {
        let at = u64::try_from(self.since.elapsed().as_micros()).unwrap_or(u64::MAX - 1) + 1;
        self.latest.fetch_max(at, Ordering::AcqRel);
    }

    /// Whether a connection idle for `idle_for` went idle at or before the latest loss.
    fn idle_since_a_loss(&self, idle_for: std::time::Duration) -> bool {
        let latest = self.latest.load(Ordering::Acquire);
        if latest == 0 {
            return false;
        }
        let now = u64::try_from(self.since.elapsed().as_micros()).unwrap_or(u64::MAX - 1) + 1;
        let idle = u64::try_from(idle_for.as_micros()).unwrap_or(u64::MAX);
        now.saturating_sub(idle) <= latest
    }
}

/// The least time between two `NOTIFY`s of one engine.
const NOTIFY_GAP: std::time::Duration = std::time::Duration::from_millis(10);

/// Wake-up hints, merged. When a transaction that scheduled work commits, this
/// process's waiting pollers are woken at once, and one `NOTIFY` tells the other engines
/// about everything committed since the previous one. The `NOTIFY` is sent outside the
/// job transactions: PostgreSQL serializes commits that notify, and the hot path must not.
/// A hint lost on the way costs a poller one re-check interval, nothing more.
#[derive(Debug)]
struct WorkBell {
    pool: PgPool,
    pending: AtomicBool,
    ring: Notify,
    sender: OnceLock<()>,
    local: StdMutex<Vec<Arc<Notify>>>,
}

impl WorkBell {
    fn new(pool: PgPool) -> Arc<Self> {
        Arc::new(WorkBell {
            pool,
            pending: AtomicBool::new(false),
            ring: Notify::new(),
            sender: OnceLock::new(),
            local: StdMutex::new(Vec::new()),
        })
    }

    fn ring(self: &Arc<Self>) {
        if let Ok(local) = self.local.lock() {
            local.iter().for_each(|l| l.notify_waiters());
        }
        self.pending.store(true, Ordering::Release);
        self.sender.get_or_init(|| {
            let bell = self.clone();
            tokio::spawn(async move { bell.send_notifications().await });
        });
        self.ring.notify_one();
    }

    async fn send_notifications(&self) {
        loop {
            self.ring.notified().await;
            while self.pending.swap(false, Ordering::AcqRel) {
                if let Err(e) = sqlx::query("SELECT pg_notify($1, '')")
                    .bind(WORK_CHANNEL)
                    .execute(&self.pool)
                    .await
                {
                    tracing::debug!(error = %e, "NOTIFY failed; pollers fall back to re-checking");
                }
                // Rings during the gap are merged into the next NOTIFY: a busy engine sends
                // at most one per gap, other engines' pollers wake at most a gap later.
                tokio::time::sleep(NOTIFY_GAP).await;
            }
        }
    }
}

/// A pooled connection idle this long is pinged before use. One in steady use is not:
/// if the server went away since, its statement fails like any statement that meets a
/// dropped connection, and the connection is discarded.
pub const PING_AFTER_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

impl PgStore {
    /// Wraps an existing pool.
    pub fn new(pool: PgPool) -> Self {
        Self::with_losses(pool, Losses::new())
    }

    fn with_losses(pool: PgPool, losses: Arc<Losses>) -> Self {
        PgStore {
            bell: WorkBell::new(pool.clone()),
            pool,
            losses,
        }
    }

    /// Connects to `url` with a pool of at most `max_connections` and the other
    /// [`ConnectSettings`] at their defaults; see [`PgStore::connect_with`].
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        Self::connect_with(url, &ConnectSettings::with_max_connections(max_connections)).await
    }

    /// Connects to `url` with a pool of at most `settings.max_connections`. A connection
    /// that sat idle for [`PING_AFTER_IDLE`] or more is checked (and replaced if the
    /// server hung up) before it is handed out; one in steady use is handed out as it is.
    ///
    /// Every pooled connection runs with `statement_timeout` and
    /// `idle_in_transaction_session_timeout` as `settings` say (see [`connect_options`]),
    /// so no statement and no open transaction holds the database for longer; a statement
    /// cut short answers [`StoreError::is_unavailable`]. Migrations and retention lift the
    /// statement timeout for themselves (they are not on any request's path).
    ///
    /// Its connections also run with `jit = off`: the engine's statements touch a few rows
    /// each, but a lookup over an array of keys is estimated at a thousand rows (the
    /// planner's guess for `generate_subscripts`), which can pass `jit_above_cost` and
    /// spend 20–30 ms compiling a statement that runs in 0.1 ms (seen on replays).
    ///
    /// The pool never asks for more connections than the server has room for when it
    /// starts: a pool larger than that would, under load, keep retrying refused connections
    /// (`too many clients`) until its acquire timeout and answer `unavailable`, although
    /// the connections it has could serve every request in turn. A larger request is
    /// lowered to the room left (with a warning; see [`connection_room`]), but never below
    /// [`MIN_POOL_CONNECTIONS`] (or the size asked for, if that is smaller): when the
    /// server has no room for that minimum, connecting fails with
    /// [`StoreError::PoolTooSmall`], which says the room, the minimum and what to do.
    ///
    /// TLS follows the URL's `sslmode` (`disable`, `prefer` (the default), `require`,
    /// `verify-ca`, `verify-full`) and `sslrootcert` (CA certificates trusted besides the
    /// system's roots), through sqlx's rustls. If the process has no default rustls crypto
    /// provider yet, this installs aws-lc-rs as the default (see
    /// [`ensure_crypto_provider`]).
    pub async fn connect_with(url: &str, settings: &ConnectSettings) -> StoreResult<Self> {
        ensure_crypto_provider();
        let options = connect_options(url, settings)?;
        let requested = settings.max_connections.max(1);
        let minimum = requested.min(MIN_POOL_CONNECTIONS);
        let max_connections = {
            use sqlx::Connection;
            let mut probe = sqlx::PgConnection::connect_with(&options).await?;
            let room = connection_room(&mut probe).await;
            probe.close().await.ok();
            match room {
                Ok(room) if room < minimum => {
                    return Err(StoreError::PoolTooSmall { room, minimum });
                }
                Ok(room) if room < requested => {
                    tracing::warn!(
                        requested,
                        pool = room,
                        "the database server has room for fewer connections than requested; the pool is lowered to fit"
                    );
                    room
                }
                Ok(_) => requested,
                Err(e) => {
                    tracing::debug!(error = %e, "could not read the server's connection limit; the pool keeps its size");
                    requested
                }
            }
        };
        let losses = Losses::new();
        let seen = losses.clone();
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(std::time::Duration::from_secs(10))
            // The default pings every connection on every acquire: a round trip before
            // each statement or transaction of the hot path.
            .test_before_acquire(false)
            .before_acquire(move |conn, meta| {
                let losses = seen.clone();
                Box::pin(async move {
                    if meta.idle_for >= PING_AFTER_IDLE || losses.idle_since_a_loss(meta.idle_for) {
                        if let Err(e) = sqlx::Connection::ping(conn).await {
                            losses.mark();
                            return Err(e);
                        }
                    }
                    Ok(true)
                })
            })
            .connect_with(options)
            .await?;
        Ok(PgStore::with_losses(pool, losses))
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

/// The fewest connections an engine's pool works with when it serves: one held for good
/// by the LISTEN relay (long-poll wake-ups), two for a worker's poll cycle (on PostgreSQL
/// the claim runs beside the completions, on a connection of its own), and one each for
/// the background loops that run beside requests: the lease reaper, the scheduler and
/// retention. A pool lowered to the server's room at start-up never goes below it.
pub const MIN_POOL_CONNECTIONS: u32 = 6;

/// The options of the engine's pooled connections to `url`: `jit = off`,
/// `statement_timeout` and `idle_in_transaction_session_timeout` from `settings`, in
/// milliseconds (zero turns a timeout off, as in PostgreSQL; a nonzero duration under a
/// millisecond counts as one). They are sent at connection start-up, so they hold for every
/// connection the pool ever opens, including those it opens again after the server
/// restarted.
pub fn connect_options(url: &str, settings: &ConnectSettings) -> StoreResult<PgConnectOptions> {
    let millis = |d: std::time::Duration| -> String {
        if d.is_zero() {
            "0".to_owned()
        } else {
            d.as_millis().clamp(1, i32::MAX as u128).to_string()
        }
    };
    Ok(PgConnectOptions::from_str(url)?.options([
        ("jit", "off".to_owned()),
        ("statement_timeout", millis(settings.statement_timeout)),
        (
            "idle_in_transaction_session_timeout",
            millis(settings.idle_in_transaction_timeout),
        ),
    ]))
}

/// How a transaction begins that must not be cut by `statement_timeout`: retention's
/// batches, which are bounded (at most `PRUNE_BATCH` jobs) and paced, but whose scan for
/// prunable jobs may be long over a large history of unfinished ones, and which would
/// otherwise fail at the same place every pass and never progress.
/// `idle_in_transaction_session_timeout` still ends one whose engine stalled.
const BEGIN_UNTIMED_SQL: &str = "BEGIN; SET LOCAL statement_timeout = 0";

/// Makes sure the process has a default rustls crypto provider, installing aws-lc-rs
/// (the provider of the engine's HTTP server and clients) when none is set; one set
/// before is kept. sqlx's `sslmode=verify-ca` builds its certificate verifier with the
/// process default, and rustls cannot pick one by itself when more than one provider is
/// compiled in (ring for sqlx, aws-lc-rs for reqwest): it would panic there.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread's install is fine: a default is set either way.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

/// How many more connections the server behind `conn` admits for this role now: its
/// `max_connections`, less the slots reserved for superusers (unless the role is one),
/// and (PostgreSQL 16 on) for `pg_use_reserved_connections`, less the sessions already open, counting `conn` as free (it is about to close).
pub async fn connection_room(conn: &mut sqlx::PgConnection) -> StoreResult<u32> {
    // Sessions in pg_stat_activity include background workers, which take no client slot.
    let room: i64 = sqlx::query_scalar(
        "SELECT current_setting('max_connections')::int
              - CASE WHEN (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN 0
                     ELSE current_setting('superuser_reserved_connections')::int
                        + coalesce(current_setting('reserved_connections', true)::int, 0) END
              - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')
              + 1",
    )
    .fetch_one(conn)
    .await?;
    Ok(u32::try_from(room.max(0)).unwrap_or(u32::MAX))
}

/// Retention, first statement: locks up to `$2` jobs finished more than `$1` seconds ago
/// (database clock), with ids above `$3` if given. Job ids are UUIDv7, so "created before the cutoff" is an id range:
/// the scan walks `jobs_id_unique` from the oldest job and stops at the cutoff, whatever
/// the history.
pub const LOCK_PRUNABLE_JOBS_SQL: &str = "
WITH cutoff AS (
    SELECT now() - make_interval(secs => $1) AS at
)
SELECT j.owner_id, j.id
FROM jobs j, cutoff
WHERE j.id < (lpad(to_hex((extract(epoch FROM cutoff.at) * 1000)::bigint), 12, '0')
              || '00000000000000000000')::uuid
  -- Retention: only a job finished longer ago than the retention, and none of whose
  -- attempts is live (a late completion of a live attempt still finds its job).
  AND ($3::uuid IS NULL OR j.id > $3)
  AND j.finished_at < cutoff.at
  AND j.status IN ('succeeded', 'failed', 'cancelled')
  AND NOT EXISTS (
      SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
      WHERE ac.owner_id = j.owner_id AND ac.job_id = j.id AND a.live)
ORDER BY j.id
LIMIT $2
-- A job another transaction holds (a replay, an operator) waits for a later pass.
FOR UPDATE OF j SKIP LOCKED";

/// Retention, second statement, in the same transaction once the jobs are locked: deletes
/// each with its activities, attempts, events and timers. It runs apart from the lock so
/// that its snapshot is taken after the locks are held: rows a transaction added to a job
/// just before this one locked it (a replay's event) are seen and deleted with it, never
/// left behind; every writer of a job's rows holds the job's row lock or creates the job.
pub const DELETE_PRUNED_JOBS_SQL: &str = "
WITH doomed AS (
    SELECT j.owner_id, j.id
    FROM unnest($1::text[], $2::uuid[]) AS d(owner_id, id)
    JOIN jobs j ON j.owner_id = d.owner_id AND j.id = d.id
    -- Retention, checked again on the newest rows: still finished, still no live attempt.
    WHERE j.status IN ('succeeded', 'failed', 'cancelled')
      AND NOT EXISTS (
          SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
          WHERE ac.owner_id = j.owner_id AND ac.job_id = j.id AND a.live)
), doomed_activities AS (
    SELECT ac.owner_id, ac.id FROM activities ac JOIN doomed d ON ac.owner_id = d.owner_id AND ac.job_id = d.id
), gone_attempts AS (
    DELETE FROM attempts a USING doomed_activities da WHERE a.owner_id = da.owner_id AND a.activity_id = da.id
), gone_activities AS (
    DELETE FROM activities ac USING doomed_activities da WHERE ac.owner_id = da.owner_id AND ac.id = da.id
), gone_events AS (
    DELETE FROM job_events e USING doomed d WHERE e.owner_id = d.owner_id AND e.job_id = d.id
), gone_timers AS (
    DELETE FROM timers t USING doomed d WHERE t.owner_id = d.owner_id AND t.job_id = d.id
), gone AS (
    DELETE FROM jobs j USING doomed d WHERE j.owner_id = d.owner_id AND j.id = d.id RETURNING 1
)
SELECT count(*) FROM gone";

const JOB_COLUMNS: &str = "owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, \
     task_queue, input, status, version, result, error, completed_by, created_at, updated_at, \
     finished_at, wf_ready, wf_lease_token, wf_parked";

const ACTIVITY_COLUMNS: &str = "owner_id, id, job_id, seq, name, providers, options, task_queue, \
     input, status, version, completed_by, result, error, finished_at";

const ATTEMPT_COLUMNS: &str = "owner_id, id, activity_id, job_id, number, activity, task_queue, \
     provider, status, worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, \
     started_at, unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason, \
     created_at";

const CONTRACT_COLUMNS: &str = "owner_id, activity, contract_hash, output_schema";

const SCHEDULE_COLUMNS: &str = "owner_id, name, cron, timezone, job, overlap, catchup_window_s, paused, \
     next_fire_at, last_fired_at, last_job_id, fired_count, skipped_overlap_count, skipped_too_old_count, \
     version, created_at, updated_at";

fn schedule_row(row: &PgRow) -> StoreResult<ScheduleRow> {
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
            overlap: super::overlap_of(&overlap)?,
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

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("unknown {what} `{value}`"))
}

/// One table's columns in a row: under `prefix` when a statement returns the rows of
/// several tables side by side (see [`prefixed`]), else under their own names.
#[derive(Clone, Copy)]
struct Cols<'r> {
    row: &'r PgRow,
    prefix: &'static str,
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

/// `columns` of the table aliased `alias`, each renamed `{prefix}{column}` (read back
/// with [`Cols`] under that prefix).
fn prefixed(columns: &str, alias: &str, prefix: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{c} AS {prefix}{c}", c = c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn job_row(row: &PgRow) -> StoreResult<JobRow> {
    job_row_in(Cols::of(row))
}

fn job_row_in(row: Cols) -> StoreResult<JobRow> {
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
    })
}

fn activity_row(row: &PgRow) -> StoreResult<ActivityRow> {
    activity_row_in(Cols::of(row))
}

fn activity_row_in(row: Cols) -> StoreResult<ActivityRow> {
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

fn attempt_row(row: &PgRow) -> StoreResult<AttemptRow> {
    attempt_row_in(Cols::of(row))
}

fn attempt_row_in(row: Cols) -> StoreResult<AttemptRow> {
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

fn contract_row(row: &PgRow) -> StoreResult<Contract> {
    contract_row_in(Cols::of(row))
}

fn contract_row_in(row: Cols) -> StoreResult<Contract> {
    Ok(Contract {
        owner: row.get("owner_id")?,
        activity: row.get("activity")?,
        contract_hash: row.get("contract_hash")?,
        output_schema: row.get("output_schema")?,
    })
}

fn certification_row(row: &PgRow) -> StoreResult<Certification> {
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

fn token_row(r: &PgRow) -> StoreResult<TokenRow> {
    let role: String = r.try_get("role")?;
    Ok(TokenRow {
        owner_id: r.try_get("owner_id")?,
        id: r.try_get("id")?,
        role: Role::parse(&role).ok_or_else(|| corrupt("role", &role))?,
        token_hash: r.try_get("token_hash")?,
    })
}

fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<Value> {
    serde_json::to_value(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn status_words(statuses: &[AttemptStatus]) -> Vec<String> {
    statuses.iter().map(|s| s.as_str().to_owned()).collect()
}

impl AttemptRow {
    /// The attempt as API.md shows it.
    pub fn view(&self) -> AttemptView {
        AttemptView {
            id: self.id,
            number: self.number,
            provider: self.provider.clone(),
            status: self.status,
            created_at: self.created_at,
            started_at: self.started_at,
            heartbeat_at: self.heartbeat_at,
            lease_expires_at: self.lease_expires_at,
            finished_at: self.finished_at,
            error: self.error.clone(),
            cancelled_by: self.cancelled_by.clone(),
            cancel_reason: self.cancel_reason.clone(),
        }
    }
}

/// Assembles job views from rows fetched in three queries.
async fn assemble_views(pool: &PgPool, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let owners: Vec<String> = jobs.iter().map(|j| j.owner_id.clone()).collect();
    let ids: Vec<Uuid> = jobs.iter().map(|j| j.id).collect();
    let activity_rows = sqlx::query(&ACTIVITIES_OF_JOBS_SQL)
        .bind(&owners)
        .bind(&ids)
        .fetch_all(pool)
        .await?;
    let activities: Vec<ActivityRow> = activity_rows
        .iter()
        .map(activity_row)
        .collect::<StoreResult<_>>()?;
    // By activity, on the (owner, activity, number) key: no index leads with the job.
    let activity_owners: Vec<&str> = activities.iter().map(|a| a.owner_id.as_str()).collect();
    let activity_ids: Vec<Uuid> = activities.iter().map(|a| a.id).collect();
    let attempt_rows = sqlx::query(&ATTEMPTS_OF_ACTIVITIES_SQL)
        .bind(&activity_owners)
        .bind(&activity_ids)
        .fetch_all(pool)
        .await?;
    let attempts: Vec<AttemptRow> = attempt_rows
        .iter()
        .map(attempt_row)
        .collect::<StoreResult<_>>()?;
    Ok(jobs
        .into_iter()
        .map(|job| view_of(job, &activities, &attempts))
        .collect())
}

/// A job's view, with those of `activities` and `attempts` that are its own.
fn view_of(job: JobRow, activities: &[ActivityRow], attempts: &[AttemptRow]) -> JobView {
    let activities = activities
        .iter()
        .filter(|a| a.job_id == job.id && a.owner_id == job.owner_id)
        .map(|a| ActivityView {
            seq: a.seq,
            name: a.name.clone(),
            providers: a.providers.clone(),
            status: a.status,
            version: a.version,
            completed_by: a.completed_by,
            result: a.result.clone(),
            error: a.error.clone(),
            attempts: attempts
                .iter()
                .filter(|t| t.activity_id == a.id && t.owner_id == a.owner_id)
                .map(AttemptRow::view)
                .collect(),
        })
        .collect();
    JobView {
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
    }
}

#[async_trait]
impl Store for PgStore {
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx>> {
        Ok(Box::new(PgTx {
            tx: self.pool.begin_with(BEGIN_TRANSACTION_SQL).await?,
            bell: self.bell.clone(),
            wake: false,
            now: None,
        }))
    }

    /// Transactions on separate connections run at the same time, each under its own
    /// row locks.
    fn concurrent_writes(&self) -> bool {
        true
    }

    async fn insert_activity_job_now(
        &self,
        job: &NewJob,
        activity: &NewActivity,
        attempt: &NewAttempt,
        events: &[NewEvent],
    ) -> StoreResult<Option<(JobRow, AttemptRow)>> {
        // One autocommit statement: all of the new job, or (a taken key) nothing.
        let inserted = insert_activity_job_on(&self.pool, job, activity, attempt, events).await?;
        if inserted.is_some() {
            self.bell.ring();
        }
        Ok(inserted)
    }

    async fn insert_activity_jobs_now(
        &self,
        jobs: &[NewActivityJob],
    ) -> StoreResult<Vec<Option<(JobRow, AttemptRow)>>> {
        // One autocommit statement: each job all or nothing, keys taken insert nothing.
        let answers = insert_activity_jobs_on(&self.pool, jobs).await?;
        if answers.iter().any(Option::is_some) {
            self.bell.ring();
        }
        Ok(answers)
    }

    /// Runs the migrations on a connection of their own, opened with the pool's options
    /// but without its timeouts (later startup options win over earlier ones): a
    /// migration may rewrite a large table, and waits for another engine's migration
    /// lock. The connection is closed afterwards; it never joins the pool.
    async fn migrate(&self) -> StoreResult<()> {
        use sqlx::Connection;
        let options = (*self.pool.connect_options()).clone().options([
            ("statement_timeout", "0"),
            ("idle_in_transaction_session_timeout", "0"),
        ]);
        let mut conn = sqlx::PgConnection::connect_with(&options).await?;
        let migrated = MIGRATOR.run_direct(&mut conn).await;
        conn.close().await.ok();
        Ok(migrated?)
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
            "SELECT owner_id, job_id FROM attempts
             WHERE id = $1 AND ($2::text IS NULL OR owner_id = $2)",
        )
        .bind(attempt_id)
        .bind(scope.owner())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(AttemptLocation {
                owner_id: r.try_get("owner_id")?,
                job_id: r.try_get("job_id")?,
            })
        })
        .transpose()
    }

    async fn job_owner(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<String>> {
        // Owner isolation: a job outside the scope is not found.
        Ok(sqlx::query_scalar(
            "SELECT owner_id FROM jobs WHERE id = $1 AND ($2::text IS NULL OR owner_id = $2)",
        )
        .bind(job_id)
        .bind(scope.owner())
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn job_view(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<JobView>> {
        // Owner isolation: a job outside the scope is not found.
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1 AND ($2::text IS NULL OR owner_id = $2)"
        ))
        .bind(job_id)
        .bind(scope.owner())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(assemble_views(&self.pool, vec![job_row(&row)?])
            .await?
            .pop())
    }

    async fn job_views(&self, jobs: &[(String, Uuid)]) -> StoreResult<Vec<JobView>> {
        let (owners, ids): (Vec<String>, Vec<Uuid>) = jobs.iter().cloned().unzip();
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE (owner_id, id) IN (SELECT * FROM unnest($1::text[], $2::uuid[]))"
        ))
        .bind(&owners)
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        let rows = rows.iter().map(job_row).collect::<StoreResult<Vec<_>>>()?;
        assemble_views(&self.pool, rows).await
    }

    async fn views_of(&self, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
        assemble_views(&self.pool, jobs).await
    }

    async fn replay_now(&self, replays: &[NewReplay]) -> StoreResult<Vec<ReplayedJob>> {
        let mut keys: Vec<(&str, &str)> = replays
            .iter()
            .map(|r| (r.owner_id.as_str(), r.idempotency_key.as_str()))
            .collect();
        keys.sort();
        keys.dedup();
        let (key_owners, key_names): (Vec<&str>, Vec<&str>) = keys.into_iter().unzip();
        let owners: Vec<&str> = replays.iter().map(|r| r.owner_id.as_str()).collect();
        let names: Vec<&str> = replays.iter().map(|r| r.idempotency_key.as_str()).collect();
        let fingerprints: Vec<&str> = replays.iter().map(|r| r.fingerprint.as_str()).collect();
        let actors: Vec<&str> = replays.iter().map(|r| r.actor.as_str()).collect();
        let data: Vec<&Value> = replays.iter().map(|r| &r.data).collect();
        // One autocommit statement: the jobs locked in (owner, id) order, their replays
        // numbered after their last event (see REPLAY_JOBS_SQL for why that is safe), and
        // their views read with them.
        let rows = sqlx::query(&REPLAY_JOBS_SQL)
            .bind(&key_owners)
            .bind(&key_names)
            .bind(&owners)
            .bind(&names)
            .bind(&fingerprints)
            .bind(&actors)
            .bind(&data)
            .fetch_all(&self.pool)
            .await?;
        let mut replayed: Vec<(JobRow, Vec<ActivityRow>, Vec<AttemptRow>)> = Vec::new();
        for row in &rows {
            let job = job_row_in(Cols { row, prefix: "j_" })?;
            if replayed
                .last()
                .is_none_or(|(last, _, _)| (&last.owner_id, last.id) != (&job.owner_id, job.id))
            {
                replayed.push((job, Vec::new(), Vec::new()));
            }
            let Some((_, activities, attempts)) = replayed.last_mut() else {
                continue;
            };
            let activity_id: Option<Uuid> = row.try_get("a_id")?;
            if activity_id.is_some() && activities.last().map(|a| a.id) != activity_id {
                activities.push(activity_row_in(Cols { row, prefix: "a_" })?);
            }
            let attempt_id: Option<Uuid> = row.try_get("id")?;
            if attempt_id.is_some() {
                attempts.push(attempt_row(row)?);
            }
        }
        Ok(replayed
            .into_iter()
            .map(|(job, activities, attempts)| ReplayedJob {
                view: Some(view_of(job.clone(), &activities, &attempts)),
                job,
            })
            .collect())
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
             WHERE owner_id = $1 AND job_id = $2 AND seq > $3 ORDER BY seq LIMIT $4",
        )
        .bind(&owner)
        .bind(job_id)
        .bind(after_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let events = rows
            .iter()
            .map(|r| {
                Ok(JobEvent {
                    seq: r.try_get("seq")?,
                    at: r.try_get("at")?,
                    kind: r.try_get("type")?,
                    attempt_id: r.try_get("attempt_id")?,
                    actor: r.try_get("actor")?,
                    data: r.try_get("data")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(Some(events))
    }

    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobView>> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs
             WHERE ($1::text IS NULL OR owner_id = $1)
               AND ($2::text IS NULL OR status = $2)
               AND ($3::text IS NULL OR workflow = $3)
               AND ($4::text IS NULL OR activity = $4)
               AND ($5::uuid IS NULL OR id < $5)
               AND ($7::timestamptz IS NULL OR created_at >= $7)
               AND ($8::timestamptz IS NULL OR created_at < $8)
             ORDER BY id DESC
             LIMIT $6"
        ))
        .bind(query.owner.as_deref())
        .bind(query.status.map(|s| s.as_str()))
        .bind(query.workflow.as_deref())
        .bind(query.activity.as_deref())
        .bind(query.before_id)
        .bind(query.limit)
        .bind(query.created_after)
        .bind(query.created_before)
        .fetch_all(&self.pool)
        .await?;
        let jobs = rows.iter().map(job_row).collect::<StoreResult<Vec<_>>>()?;
        assemble_views(&self.pool, jobs).await
    }

    async fn list_contracts(&self, owners: Option<&[String]>) -> StoreResult<Vec<ContractRecord>> {
        let rows = sqlx::query(
            "SELECT owner_id, activity, contract_hash, output_schema, registered_at FROM contracts
             WHERE ($1::text[] IS NULL OR owner_id = ANY($1))
             ORDER BY owner_id, activity, registered_at DESC, contract_hash",
        )
        .bind(owners.map(<[String]>::to_vec))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ContractRecord {
                    contract: contract_row(r)?,
                    registered_at: r.try_get("registered_at")?,
                })
            })
            .collect()
    }

    async fn latest_certifications(
        &self,
        owners: Option<&[String]>,
    ) -> StoreResult<Vec<Certification>> {
        // Invariant 6: only the latest certification of a provider for a contract hash
        // counts, latest by the database's clock that stamped it.
        let rows = sqlx::query(
            "SELECT DISTINCT ON (owner_id, activity, contract_hash, provider)
                    id, owner_id, activity, provider, contract_hash, passed, report, created_at
             FROM certifications
             WHERE ($1::text[] IS NULL OR owner_id = ANY($1))
             ORDER BY owner_id, activity, contract_hash, provider, created_at DESC, id DESC",
        )
        .bind(owners.map(<[String]>::to_vec))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(certification_row).collect()
    }

    async fn stuck_attempts(&self, query: &StuckQuery) -> StoreResult<Vec<StuckAttempt>> {
        let rows = sqlx::query(&format!(
            "SELECT * FROM (
                 SELECT {ATTEMPT_COLUMNS},
                        CASE status WHEN 'unknown' THEN unknown_at ELSE started_at END AS since
                 FROM attempts
                 -- `live`: the partial index of live attempts, whatever the history.
                 WHERE live AND status = ANY($1) AND status IN ('started', 'unknown')
             ) s
             WHERE since <= now() - make_interval(secs => $2)
             ORDER BY since, id
             LIMIT $3"
        ))
        .bind(status_words(&query.statuses))
        .bind(query.older_than_s as f64)
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
                    since: r.try_get("since")?,
                })
            })
            .collect()
    }

    async fn live_attempt_counts(&self) -> StoreResult<(Vec<(String, i64)>, i64)> {
        // Served by the partial index of live attempts, whatever the history.
        let rows =
            sqlx::query("SELECT status, count(*) AS n FROM attempts WHERE live GROUP BY status")
                .fetch_all(&self.pool)
                .await?;
        let live = rows
            .iter()
            .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
            .collect::<StoreResult<Vec<_>>>()?;
        let oldest: Option<f64> = sqlx::query_scalar(
            "SELECT extract(epoch FROM now() - min(unknown_at))::float8 FROM attempts WHERE status = 'unknown'",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((live, oldest.unwrap_or(0.0).max(0.0) as i64))
    }

    async fn prune_schedule_events(
        &self,
        retention: std::time::Duration,
        limit: i64,
    ) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with(BEGIN_UNTIMED_SQL).await?;
        let deleted = sqlx::query(
            // Retention: only events older than the retention, oldest first (schedule_events_by_time).
            "DELETE FROM schedule_events WHERE ctid = ANY (ARRAY(
                 SELECT ctid FROM schedule_events WHERE at < now() - make_interval(secs => $1) ORDER BY at LIMIT $2))",
        )
        .bind(retention.as_secs_f64())
        .bind(limit)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(deleted.rows_affected())
    }

    async fn prune_finished_jobs(
        &self,
        retention: std::time::Duration,
        limit: i64,
        after: Option<Uuid>,
    ) -> StoreResult<PrunedJobs> {
        let mut tx = self.pool.begin_with(BEGIN_UNTIMED_SQL).await?;
        let doomed: Vec<(String, Uuid)> = sqlx::query_as(LOCK_PRUNABLE_JOBS_SQL)
            .bind(retention.as_secs_f64())
            .bind(limit)
            .bind(after)
            .fetch_all(&mut *tx)
            .await?;
        if doomed.is_empty() {
            return Ok(PrunedJobs::default());
        }
        let (owners, ids): (Vec<String>, Vec<Uuid>) = doomed.into_iter().unzip();
        let pruned: i64 = sqlx::query_scalar(DELETE_PRUNED_JOBS_SQL)
            .bind(&owners)
            .bind(&ids)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(PrunedJobs {
            deleted: u64::try_from(pruned).unwrap_or(0),
            chosen: ids.len() as u64,
            last: ids.iter().max().copied(),
        })
    }

    async fn extend_lease(
        &self,
        location: &AttemptLocation,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<LeaseExtension> {
        // Fencing (invariant 5): only the holder of the lease token of a started attempt
        // extends its lease, never past start-to-close.
        let result = sqlx::query(
            "UPDATE attempts t
             SET heartbeat_at = now(),
                 heartbeat_details = COALESCE($4, t.heartbeat_details),
                 lease_expires_at = LEAST(
                     now() + make_interval(secs => (a.options->>'heartbeat_timeout_s')::float8),
                     t.started_at + make_interval(secs => (a.options->>'start_to_close_timeout_s')::float8))
             FROM activities a
             WHERE t.owner_id = $1 AND t.id = $2 AND t.lease_token = $3 AND t.status = 'started'
               AND a.owner_id = t.owner_id AND a.id = t.activity_id",
        )
        .bind(&location.owner_id)
        .bind(attempt_id)
        .bind(token)
        .bind(details)
        .execute(&self.pool)
        .await?;
        Ok(if result.rows_affected() == 1 {
            LeaseExtension::Extended
        } else {
            LeaseExtension::NotExtended
        })
    }

    async fn extend_leases(&self, renewals: &[LeaseRenewal]) -> StoreResult<Vec<bool>> {
        let mut ids = Vec::with_capacity(renewals.len());
        let mut tokens = Vec::with_capacity(renewals.len());
        let mut owners = Vec::with_capacity(renewals.len());
        let mut details = Vec::with_capacity(renewals.len());
        for r in renewals {
            ids.push(r.attempt_id);
            tokens.push(r.token);
            owners.push(r.owner.clone());
            details.push(r.details.clone());
        }
        let rows = sqlx::query(EXTEND_LEASES_SQL)
            .bind(&ids)
            .bind(&tokens)
            .bind(&owners)
            .bind(&details)
            .fetch_all(&self.pool)
            .await?;
        let mut extended = Vec::with_capacity(rows.len());
        for row in rows {
            extended.push((
                row.try_get::<Uuid, _>("id")?,
                row.try_get::<Uuid, _>("lease_token")?,
                row.try_get::<String, _>("owner_id")?,
            ));
        }
        // A renewal counts only with the token and the owner it presented: one with a wrong
        // token, or from another owner's scope, for an attempt another renewal extended was
        // not extended (and must not learn that it exists).
        Ok(renewals
            .iter()
            .map(|r| {
                extended.iter().any(|(id, token, owner)| {
                    *id == r.attempt_id
                        && *token == r.token
                        && r.owner.as_deref().is_none_or(|o| o == owner)
                })
            })
            .collect())
    }

    async fn register_contract(&self, contract: &Contract) -> StoreResult<()> {
        // Registering a known schema again makes it the current contract again.
        sqlx::query(
            "INSERT INTO contracts (owner_id, activity, contract_hash, output_schema)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (owner_id, activity, contract_hash)
             DO UPDATE SET registered_at = clock_timestamp()",
        )
        .bind(&contract.owner)
        .bind(&contract.activity)
        .bind(&contract.contract_hash)
        .bind(&contract.output_schema)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn insert_certification(&self, c: &NewCertification) -> StoreResult<Certification> {
        // Certification order (invariant 6): stamped by the database's clock as it writes
        // (clock_timestamp), never an engine's, so the later run is the latest one.
        let created_at = sqlx::query_scalar(
            "INSERT INTO certifications
                 (owner_id, id, activity, provider, contract_hash, passed, report, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp())
             RETURNING created_at",
        )
        .bind(&c.owner)
        .bind(c.id)
        .bind(&c.activity)
        .bind(&c.provider)
        .bind(&c.contract_hash)
        .bind(c.passed)
        .bind(&c.report)
        .fetch_one(&self.pool)
        .await?;
        Ok(Certification {
            id: c.id,
            owner: c.owner.clone(),
            activity: c.activity.clone(),
            provider: c.provider.clone(),
            contract_hash: c.contract_hash.clone(),
            passed: c.passed,
            report: c.report.clone(),
            created_at,
        })
    }

    async fn insert_token(&self, token: &TokenRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO api_tokens (owner_id, id, role, token_hash) VALUES ($1, $2, $3, $4)",
        )
        .bind(&token.owner_id)
        .bind(token.id)
        .bind(token.role.as_str())
        .bind(&token.token_hash)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRow>> {
        // A revoked token stops working at once.
        let row = sqlx::query(
            "SELECT owner_id, id, role, token_hash FROM api_tokens
             WHERE token_hash = $1 AND revoked_at IS NULL",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(token_row).transpose()
    }

    async fn tokens_by_hash(&self, token_hashes: &[String]) -> StoreResult<Vec<TokenRow>> {
        // A revoked token stops working at once: each lookup is read after its request came.
        let rows = sqlx::query(
            "SELECT owner_id, id, role, token_hash FROM api_tokens
             WHERE token_hash = ANY($1) AND revoked_at IS NULL",
        )
        .bind(token_hashes)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(token_row).collect()
    }

    async fn revoke_token(&self, token_id: Uuid) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(token_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn schedule(&self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>> {
        let row = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE owner_id = $1 AND name = $2"
        ))
        .bind(owner)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(schedule_row).transpose()
    }

    async fn list_schedules(&self, owner: &str) -> StoreResult<Vec<ScheduleRow>> {
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE owner_id = $1 ORDER BY name"
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
                            WHERE owner_id = $1 AND schedule_name = $2 ORDER BY id DESC LIMIT $3) latest
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
                    at: r.try_get("at")?,
                    kind: r.try_get("type")?,
                    tick_at: r.try_get("tick_at")?,
                    job_id: r.try_get("job_id")?,
                    data: r.try_get("data")?,
                })
            })
            .collect()
    }

    async fn next_schedule_fire(&self) -> StoreResult<NextScheduleFire> {
        let row = sqlx::query(
            "SELECT min(next_fire_at) AS next_fire_at, clock_timestamp() AS now
             FROM schedules WHERE NOT paused",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(NextScheduleFire {
            at: row.try_get("next_fire_at")?,
            now: row.try_get("now")?,
        })
    }

    /// Relays `NOTIFY onceflow_work` to `signal` until `shutdown`, on a connection of its
    /// own (held for good, one of the pool's). When that connection is lost (a restart of
    /// the server, a dropped session) it marks the loss at once, so that the pool checks
    /// every connection that went idle before it (`Losses`), then connects and
    /// `LISTEN`s again, waiting `LISTEN_RETRY` (500 ms) between tries while the server is away,
    /// and wakes the pollers once it listens: work may have been scheduled while nobody
    /// listened.
    async fn listen_for_work(&self, signal: Arc<Notify>, shutdown: CancellationToken) {
        if let Ok(mut local) = self.bell.local.lock() {
            local.push(signal.clone());
        }
        let mut lost = false;
        while !shutdown.is_cancelled() {
            let listening = async {
                let mut listener = PgListener::connect_with(&self.pool).await?;
                // A lost connection is answered at once (and marked), not after the
                // server is back.
                listener.eager_reconnect(false);
                listener.listen(WORK_CHANNEL).await?;
                Ok::<_, sqlx::Error>(listener)
            };
            let mut listener = tokio::select! {
                _ = shutdown.cancelled() => return,
                listening = listening => match listening {
                    Ok(listener) => listener,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot LISTEN for work; pollers fall back to re-checking until it can");
                        lost = true;
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(LISTEN_RETRY) => continue,
                        }
                    }
                },
            };
            if lost {
                tracing::info!("LISTEN for work again");
                // Work may have been scheduled while nobody listened.
                signal.notify_waiters();
            }
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    received = listener.try_recv() => match received {
                        Ok(Some(_)) => signal.notify_waiters(),
                        // The server closed the connection (a restart, say).
                        Ok(None) => {
                            tracing::warn!("LISTEN connection lost; reconnecting");
                            self.losses.mark();
                            signal.notify_waiters();
                            lost = true;
                            break;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                            self.losses.mark();
                            signal.notify_waiters();
                            lost = true;
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// How long the LISTEN relay waits before it tries again to connect and `LISTEN`.
const LISTEN_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// How every engine transaction begins (one round trip, as a plain `BEGIN`). Each of its
/// statements reaches rows by index probes, index ranges or the ctids of rows it locked
/// (tests/plans.rs), so the planner is told not to scan tables and not to hash- or
/// merge-join them: PostgreSQL keeps a connection's cached plan for as long as the
/// connection lives, and a plan cached while the tables were tiny (a fresh database, or a
/// server whose autovacuum never analyzes them) would otherwise keep scanning them as they
/// grow. Seen: the batched win's cached plan scanned every activity on every worker cycle.
pub const BEGIN_TRANSACTION_SQL: &str =
    "BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off";

// The hot statements, public so that a test can EXPLAIN them against a large history.

/// Dispatch: hands out scheduled attempts (`$1` queue, `$2` owner or NULL, `$3`/`$4` activity and provider arrays, `$5` limit, `$6` worker).
pub static CLAIM_ATTEMPTS_SQL: LazyLock<String> = LazyLock::new(|| {
    // Every row is reached by an index range or probe, or by the ctid of a row this
    // statement locked, whatever the tables' size when the plan was cached (see
    // ARRAY_LOOKUPS): PostgreSQL keeps one plan for it.
    format!(
            "WITH candidates AS (
                 -- Per registered (activity, provider): an index range in dispatch order
                 -- that stops at the limit, whatever the backlog.
                 SELECT c.owner_id, c.id, c.job_id, c.activity_id, c.available_at, c.row_ctid
                 FROM generate_subscripts($3::text[], 1) AS pair(i)
                 CROSS JOIN LATERAL (
                     SELECT a.owner_id, a.id, a.job_id, a.activity_id, a.available_at, a.ctid AS row_ctid
                     FROM attempts a
                     -- `dispatchable` names the partial index (status = 'scheduled').
                     WHERE a.dispatchable AND a.status = 'scheduled' AND a.task_queue = $1
                       AND a.activity = ($3::text[])[pair.i] AND a.provider = ($4::text[])[pair.i]
                       AND a.available_at <= now()
                       -- One owner's or all owners' ($2 NULL), as a filter on this range:
                       -- written so no plan can turn it into an index condition on an
                       -- index led by owner_id, which would read all the owner's live
                       -- attempts of every queue (tests/plans.rs, owner_claim).
                       AND (a.owner_id = $2) IS NOT FALSE
                     ORDER BY a.available_at, a.id
                     LIMIT $5
                     FOR UPDATE OF a SKIP LOCKED
                 ) c
             ),
             -- Their jobs, without waiting: an attempt whose job another transaction
             -- holds is left for the next claim (lock order stays job-safe, no waits).
             locked_jobs AS (
                 SELECT j.owner_id, j.id, j.row_ctid FROM (SELECT DISTINCT owner_id, job_id FROM candidates) c
                 CROSS JOIN LATERAL (
                     SELECT j.owner_id, j.id, j.ctid AS row_ctid FROM jobs j
                     WHERE j.owner_id = c.owner_id AND j.id = c.job_id OFFSET 0
                     FOR UPDATE SKIP LOCKED
                 ) j
             ),
             picked AS (
                 SELECT c.owner_id, c.id, c.activity_id, c.row_ctid FROM candidates c
                 JOIN locked_jobs l ON l.owner_id = c.owner_id AND l.id = c.job_id
                 ORDER BY c.available_at, c.id
                 LIMIT $5
             ),
             started AS (
                 UPDATE attempts t
                 SET status = 'started', lease_token = gen_random_uuid(), worker_id = $6,
                     started_at = now(), heartbeat_at = now(), read_version = act.version,
                     lease_expires_at = LEAST(
                         now() + make_interval(secs => (act.options->>'heartbeat_timeout_s')::float8),
                         now() + make_interval(secs => (act.options->>'start_to_close_timeout_s')::float8))
                 FROM picked p
                 -- The attempt's activity, locked (its job is held, so nobody waits) so
                 -- that it is read as it is now and its ctid holds.
                 CROSS JOIN LATERAL (
                     SELECT x.ctid AS act_ctid, x.version, x.options, x.seq, x.input FROM activities x
                     WHERE x.owner_id = p.owner_id AND x.id = p.activity_id OFFSET 0
                     FOR UPDATE
                 ) act
                 -- The rows are locked by this statement, so their ctid holds: a direct hit,
                 -- whatever the statistics say.
                 WHERE t.ctid = p.row_ctid AND t.owner_id = p.owner_id AND t.id = p.id AND t.status = 'scheduled'
                 RETURNING {}, act.seq AS activity_seq, act.input AS activity_input,
                           act.options AS activity_options, act.act_ctid
             ),
             -- Activity status: scheduled → running with its attempt.
             running_activities AS (
                 UPDATE activities a SET status = 'running', updated_at = now()
                 FROM started s
                 WHERE a.ctid = s.act_ctid AND a.owner_id = s.owner_id AND a.id = s.activity_id AND a.status = 'scheduled'
             ),
             -- Job status: queued → running with its first attempt.
             running_jobs AS (
                 UPDATE jobs j SET status = 'running', updated_at = now()
                 FROM started s JOIN locked_jobs l ON l.owner_id = s.owner_id AND l.id = s.job_id
                 WHERE j.ctid = l.row_ctid AND j.owner_id = s.owner_id AND j.id = s.job_id AND j.status = 'queued'
             )
             SELECT * FROM started",
            ATTEMPT_COLUMNS
                .split(", ")
                .map(|c| format!("t.{}", c.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        )
});

/// Dispatch of workflow tasks (`$1` queue, `$2` workflows, `$3` owner or NULL, `$4` limit, `$5` worker, `$6` lease seconds).
pub static CLAIM_WORKFLOW_TASKS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH picked AS (
                 SELECT owner_id, id FROM jobs
                 -- wf_open: the partial index's predicate (see the hot_job_updates migration).
                 WHERE wf_open AND status IN ('queued', 'running')
                   AND task_queue = $1 AND workflow = ANY($2)
                   -- One owner's or all owners' ($3 NULL), as a filter (see CLAIM_ATTEMPTS_SQL).
                   AND (owner_id = $3) IS NOT FALSE
                   AND ((wf_ready AND wf_lease_token IS NULL) OR wf_lease_expires_at < now())
                 ORDER BY updated_at, id
                 LIMIT $4
                 FOR UPDATE SKIP LOCKED
             )
             UPDATE jobs j
             SET wf_ready = false, wf_lease_token = gen_random_uuid(), wf_worker_id = $5,
                 wf_lease_expires_at = now() + make_interval(secs => $6),
                 status = CASE WHEN j.status = 'queued' THEN 'running' ELSE j.status END,
                 updated_at = now()
             FROM picked p
             WHERE j.owner_id = p.owner_id AND j.id = p.id
             RETURNING {}",
        JOB_COLUMNS
            .split(", ")
            .map(|c| format!("j.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ")
    )
});

/// The winning commits of a batch of results of distinct activity jobs, each with the
/// guards of `commit_activity_job_result`: `$1`–`$7` one element per result (owner, job,
/// job version, activity, read version, attempt, result), `$8` the attempt statuses a
/// win may leave. Answers `ord` (1-based position), `activity_won`, `job_won` per result.
pub static COMMIT_ACTIVITY_JOB_RESULTS_SQL: LazyLock<String> = LazyLock::new(|| {
    "WITH w AS MATERIALIZED (
         SELECT w.*, j.job_ctid, x.act_ctid, t.att_ctid
         FROM unnest($1::text[], $2::uuid[], $3::int8[], $4::uuid[], $5::int8[], $6::uuid[], $7::jsonb[])
             WITH ORDINALITY AS w(owner_id, job_id, job_version, activity_id, read_version, attempt_id, result, ord)
         -- Each row by an index probe, locked (its job and attempt are held by this
         -- transaction's completion lock, and every writer of an activity holds its job
         -- first, so nobody waits), so that its ctid holds: each update below is a direct
         -- hit, whatever the tables' size when the plan was cached (see ARRAY_LOOKUPS).
         CROSS JOIN LATERAL (
             SELECT j.ctid AS job_ctid FROM jobs j WHERE j.owner_id = w.owner_id AND j.id = w.job_id OFFSET 0 FOR UPDATE
         ) j
         CROSS JOIN LATERAL (
             SELECT x.ctid AS act_ctid FROM activities x WHERE x.owner_id = w.owner_id AND x.id = w.activity_id OFFSET 0 FOR UPDATE
         ) x
         CROSS JOIN LATERAL (
             SELECT t.ctid AS att_ctid FROM attempts t WHERE t.owner_id = w.owner_id AND t.id = w.attempt_id OFFSET 0 FOR UPDATE
         ) t
     ), act AS (
         -- Invariant 4: each activity CAS takes its slot only at the version its attempt
         -- read and while nobody completed it; nothing else moves for a result that lost.
         UPDATE activities a
         SET status = 'succeeded', result = w.result, completed_by = w.attempt_id, version = a.version + 1,
             updated_at = now(), finished_at = now()
         FROM w
         WHERE a.ctid = w.act_ctid AND a.owner_id = w.owner_id AND a.id = w.activity_id
           AND a.version = w.read_version AND a.completed_by IS NULL
         RETURNING w.ord
     ), att AS (
         UPDATE attempts t
         SET status = 'succeeded', completion_outcome = 'won',
             finished_at = COALESCE(t.finished_at, now()), lease_expires_at = NULL
         FROM w JOIN act ON act.ord = w.ord
         WHERE t.ctid = w.att_ctid AND t.owner_id = w.owner_id AND t.id = w.attempt_id AND t.status = ANY($8)
         RETURNING w.ord
     ), jb AS (
         -- The job CAS, from the activity CAS's rows only, at the version locked.
         UPDATE jobs j
         SET status = 'succeeded', result = w.result, completed_by = w.attempt_id, version = j.version + 1,
             updated_at = now(), finished_at = now()
         FROM w JOIN act ON act.ord = w.ord
         WHERE j.ctid = w.job_ctid AND j.owner_id = w.owner_id AND j.id = w.job_id AND j.version = w.job_version
           AND j.completed_by IS NULL
           AND j.status IN ('queued', 'running')
         RETURNING w.ord
     )
     SELECT w.ord, EXISTS (SELECT 1 FROM act WHERE act.ord = w.ord) AS activity_won,
            EXISTS (SELECT 1 FROM jb WHERE jb.ord = w.ord) AS job_won
     FROM w".to_owned()
});

/// Completions in a batch: locks the jobs of the attempts `$1` (distinct ids) in
/// (owner, id) order, each job once. Each id is looked up by index, one at a time (see
/// ARRAY_LOOKUPS), whatever the tables' size or statistics when the plan was cached.
pub static LOCK_JOBS_OF_ATTEMPTS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH found AS MATERIALIZED (
             SELECT a.owner_id, a.job_id, array_agg(a.id) AS attempt_ids
             FROM generate_subscripts($1::uuid[], 1) AS x(i)
             CROSS JOIN LATERAL (SELECT a.owner_id, a.job_id, a.id FROM attempts a WHERE a.id = ($1::uuid[])[x.i] OFFSET 0) a
             GROUP BY a.owner_id, a.job_id
             ORDER BY a.owner_id, a.job_id
         ), locked AS MATERIALIZED (
             -- Locking discipline: jobs in (owner, id) order (the nested loop keeps found's).
             SELECT j.*, f.attempt_ids FROM found f
             CROSS JOIN LATERAL (
                 SELECT {jobs} FROM jobs j WHERE j.owner_id = f.owner_id AND j.id = f.job_id OFFSET 0 FOR UPDATE
             ) j
         )
         SELECT {job_columns}, {contract_columns}, t.*
         FROM locked l
         CROSS JOIN LATERAL unnest(l.attempt_ids) AS u(id)
         -- Lock order: each attempt after its job. Locked, so read as it is now (after
         -- any wait for its job), not as the statement's snapshot saw it.
         CROSS JOIN LATERAL (
             SELECT {ATTEMPT_COLUMNS} FROM attempts a WHERE a.id = u.id AND a.owner_id = l.owner_id OFFSET 0 FOR UPDATE
         ) t
         -- The current output contract (the owner's own, else the platform's), so that
         -- judging the results needs no statement of its own.
         LEFT JOIN LATERAL (
             SELECT c.owner_id, c.activity, c.contract_hash, c.output_schema FROM contracts c
             WHERE c.owner_id IN (l.owner_id, '*') AND c.activity = t.activity
             ORDER BY (c.owner_id = l.owner_id) DESC, c.registered_at DESC
             LIMIT 1
         ) c ON true",
        jobs = JOB_COLUMNS.split(", ").map(|c| format!("j.{}", c.trim())).collect::<Vec<_>>().join(", "),
        job_columns = prefixed(JOB_COLUMNS, "l", "j_"),
        contract_columns = prefixed(CONTRACT_COLUMNS, "c", "c_"),
    )
});

// ARRAY_LOOKUPS: the statements below look rows up by arrays of keys the same way.
// - One index probe per key, in a lateral subquery fenced by `OFFSET 0`: it cannot be
//   turned into a hash join over a scan of the table, so a plan made while the table was
//   small (and cached by PostgreSQL) stays right as the table grows.
// - Lookups by a key other than the primary key (jobs by idempotency key, activities by
//   job, attempts by activity) go through an index not led by `owner_id`, with the owner
//   as a filter written so that it cannot become an index condition: while the tables
//   are tiny, a probe of the primary key by the owner alone costs the same (one row
//   estimated), and the older index wins the tie and is cached, reading every row of the
//   owner per key once the tables are large.
// - The keys are walked with `generate_subscripts`, whose row estimate does not depend on
//   the array's length (`unnest`'s does): the plan for one call costs the same as the
//   cached generic plan, so PostgreSQL settles on that plan after a few calls instead of
//   planning again on every call (planning cost more than running them).
// tests/plans.rs checks both on small and large tables.

/// The heartbeat fast path, batched: extends the leases of attempts `$1[i]` held by tokens
/// `$2[i]`, each within owner `$3[i]` (NULL: any), keeping details `$4[i]` (NULL: the last
/// ones); answers the extended attempts with their tokens and owners. One index probe per
/// attempt (see ARRAY_LOOKUPS); each row updated is reached by the ctid it locked; an
/// attempt another transaction holds is skipped, never waited for.
pub const EXTEND_LEASES_SQL: &str = "
    WITH found AS MATERIALIZED (
        SELECT f.row_ctid, ($2::uuid[])[k.i] AS token, ($4::jsonb[])[k.i] AS details,
               f.heartbeat_timeout_s, f.start_to_close_timeout_s
        FROM generate_subscripts($1::uuid[], 1) AS k(i)
        CROSS JOIN LATERAL (
            SELECT t.ctid AS row_ctid,
                   (x.options->>'heartbeat_timeout_s')::float8 AS heartbeat_timeout_s,
                   (x.options->>'start_to_close_timeout_s')::float8 AS start_to_close_timeout_s
            FROM attempts t
            -- An activity's options never change after it is created.
            CROSS JOIN LATERAL (
                SELECT x.options FROM activities x WHERE x.owner_id = t.owner_id AND x.id = t.activity_id OFFSET 0
            ) x
            -- Owner isolation: an attempt outside the renewal's owner is not found.
            WHERE t.id = ($1::uuid[])[k.i] AND (t.owner_id = ($3::text[])[k.i]) IS NOT FALSE
            -- An attempt another transaction holds is left to the single path, which
            -- waits for it alone: the others' leases are not held up behind it.
            OFFSET 0
            FOR UPDATE OF t SKIP LOCKED
        ) f
    )
    -- Fencing (invariant 5): only the holder of the lease token of a started attempt
    -- extends its lease, never past start-to-close; checked on the row as it is now.
    UPDATE attempts t
    SET heartbeat_at = now(),
        heartbeat_details = COALESCE(f.details, t.heartbeat_details),
        lease_expires_at = LEAST(
            now() + make_interval(secs => f.heartbeat_timeout_s),
            t.started_at + make_interval(secs => f.start_to_close_timeout_s))
    FROM found f
    WHERE t.ctid = f.row_ctid AND t.lease_token = f.token AND t.status = 'started'
    RETURNING t.id, t.lease_token, t.owner_id";

/// Views: the activities of the jobs (owner `$1[i]`, job `$2[i]`), by job and position;
/// one index probe per job (see ARRAY_LOOKUPS).
pub static ACTIVITIES_OF_JOBS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT a.* FROM generate_subscripts($1::text[], 1) AS k(i)
         CROSS JOIN LATERAL (
             SELECT {ACTIVITY_COLUMNS} FROM activities x
             WHERE x.job_id = ($2::uuid[])[k.i] AND (x.owner_id = ($1::text[])[k.i]) IS TRUE OFFSET 0
         ) a
         ORDER BY a.job_id, a.seq"
    )
});

/// Views: the attempts of the activities (owner `$1[i]`, activity `$2[i]`), by activity
/// and number; one index probe per activity, as [`ACTIVITIES_OF_JOBS_SQL`].
pub static ATTEMPTS_OF_ACTIVITIES_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT t.* FROM generate_subscripts($1::text[], 1) AS k(i)
         CROSS JOIN LATERAL (
             SELECT {ATTEMPT_COLUMNS} FROM attempts x
             WHERE x.activity_id = ($2::uuid[])[k.i] AND (x.owner_id = ($1::text[])[k.i]) IS TRUE OFFSET 0
         ) t
         ORDER BY t.activity_id, t.number"
    )
});

/// Replays in one statement: the jobs holding the keys (owner `$1[i]`, key `$2[i]`)
/// locked in (owner, id) order, and a `job_replayed` for each replay (owner `$3[i]`, key
/// `$4[i]`, fingerprint `$5[i]`, actor `$6[i]`, data `$7[i]`) whose fingerprint is its
/// job's; answers the jobs as locked.
pub static REPLAY_JOBS_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH found AS MATERIALIZED (
             -- One index probe per key (see ARRAY_LOOKUPS): the jobs as the statement's
             -- snapshot shows them.
             SELECT x.* FROM generate_subscripts($1::text[], 1) AS k(i)
             CROSS JOIN LATERAL (
                 SELECT {found} FROM jobs x
                 -- By key on jobs_one_per_idempotency_key, the owner as a filter (ARRAY_LOOKUPS).
                 WHERE x.idempotency_key = ($2::text[])[k.i] AND (x.owner_id = ($1::text[])[k.i]) IS TRUE OFFSET 0
             ) x
             ORDER BY x.owner_id, x.id
         ), locked AS (
             -- Locking discipline: jobs in (owner, id) order (the nested loop keeps found's).
             SELECT j.owner_id, j.id, j.idempotency_key, j.fingerprint FROM found f
             CROSS JOIN LATERAL (
                 SELECT j.owner_id, j.id, j.idempotency_key, j.fingerprint FROM jobs j
                 WHERE j.owner_id = f.owner_id AND j.id = f.id OFFSET 0 FOR UPDATE
             ) j
         ), replayed AS (
             -- Event order: numbered after the job's last event. The numbers are read from
             -- the statement's snapshot: if it waited on a job whose holder appended events,
             -- they collide with those (job_events_pkey) and the statement fails whole.
             INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
             SELECT l.owner_id, l.id,
                    COALESCE((SELECT max(x.seq) FROM job_events x WHERE x.owner_id = l.owner_id AND x.job_id = l.id), 0)
                    + row_number() OVER (PARTITION BY l.owner_id, l.id ORDER BY r.i),
                    'job_replayed', NULL, ($6::text[])[r.i], ($7::jsonb[])[r.i]
             FROM generate_subscripts($3::text[], 1) AS r(i)
             JOIN locked l ON l.owner_id = ($3::text[])[r.i] AND l.idempotency_key = ($4::text[])[r.i]
                          AND l.fingerprint = ($5::text[])[r.i]
         )
         -- Each replayed job with its activities and attempts, one row per attempt, all
         -- as of the statement's snapshot (taken once the calls had arrived): a view
         -- that was true at one instant, whatever committed during the lock wait.
         SELECT {job}, {activity}, t.*
         FROM found f
         JOIN locked l ON l.owner_id = f.owner_id AND l.id = f.id
         LEFT JOIN LATERAL (
             SELECT {ACTIVITY_COLUMNS} FROM activities a WHERE a.job_id = f.id AND (a.owner_id = f.owner_id) IS TRUE OFFSET 0
         ) a ON true
         LEFT JOIN LATERAL (
             SELECT {ATTEMPT_COLUMNS} FROM attempts t WHERE t.activity_id = a.id AND (t.owner_id = a.owner_id) IS TRUE OFFSET 0
         ) t ON true
         ORDER BY f.owner_id, f.id, a.seq, t.number",
        found = JOB_COLUMNS.split(", ").map(|c| format!("x.{}", c.trim())).collect::<Vec<_>>().join(", "),
        job = prefixed(JOB_COLUMNS, "f", "j_"),
        activity = prefixed(ACTIVITY_COLUMNS, "a", "a_"),
    )
});

/// The timer loop (`$1` limit).
pub static DUE_TIMERS_SQL: LazyLock<String> = LazyLock::new(|| {
    "SELECT t.owner_id, t.job_id, t.seq FROM timers t
             JOIN jobs j ON j.owner_id = t.owner_id AND j.id = t.job_id
             WHERE t.fired_at IS NULL AND t.fire_at <= now()
             ORDER BY t.fire_at
             LIMIT $1
             FOR UPDATE OF j, t SKIP LOCKED"
        .to_owned()
});

/// The lease reaper (`$1` limit).
pub static EXPIRED_LEASES_SQL: LazyLock<String> = LazyLock::new(|| {
    "SELECT a.owner_id, a.id FROM attempts a
             JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
             WHERE a.status = 'started' AND a.lease_expires_at < now()
             ORDER BY a.lease_expires_at
             LIMIT $1
             FOR UPDATE OF j, a SKIP LOCKED"
        .to_owned()
});

/// Schedule-to-start expiry (`$1` limit).
pub static OVERDUE_SCHEDULED_SQL: LazyLock<String> = LazyLock::new(|| {
    // The overdue attempts are read in deadline order from their partial index and the
    // limit stops the scan; only those are joined and locked.
    "SELECT a.owner_id, a.id
             FROM (SELECT owner_id, id FROM attempts
                   WHERE status = 'scheduled' AND start_deadline_at IS NOT NULL AND start_deadline_at < now()
                   ORDER BY start_deadline_at
                   LIMIT $1) due
             JOIN attempts a ON a.owner_id = due.owner_id AND a.id = due.id
             JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
             WHERE a.status = 'scheduled'
             FOR UPDATE OF j, a SKIP LOCKED".to_owned()
});

/// The row of an activity job just inserted: what was inserted, with the status,
/// version and times the statement returned (`job_status`, `job_version`,
/// `job_created_at`, `job_updated_at`).
fn inserted_job_row(job: &NewJob, row: &PgRow) -> StoreResult<JobRow> {
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
    })
}

/// Runs [`INSERT_ACTIVITY_JOB_SQL`] on `exec`.
async fn insert_activity_job_on<'e, E: sqlx::PgExecutor<'e>>(
    exec: E,
    job: &NewJob,
    activity: &NewActivity,
    attempt: &NewAttempt,
    events: &[NewEvent],
) -> StoreResult<Option<(JobRow, AttemptRow)>> {
    let kinds: Vec<&str> = events.iter().map(|e| e.kind).collect();
    let attempts: Vec<Option<Uuid>> = events.iter().map(|e| e.attempt_id).collect();
    let actors: Vec<&str> = events.iter().map(|e| e.actor.as_str()).collect();
    let data: Vec<&Value> = events.iter().map(|e| &e.data).collect();
    // One round trip for the whole submission. Invariant 1: the job insert is
    // ON CONFLICT DO NOTHING, and the activity, attempt and events are inserted only
    // from the row it returns, so a taken key inserts nothing at all.
    let row = sqlx::query(&INSERT_ACTIVITY_JOB_SQL)
        .bind(&job.owner_id)
        .bind(job.id)
        .bind(&job.idempotency_key)
        .bind(&job.fingerprint)
        .bind(job.kind.as_str())
        .bind(&job.activity)
        .bind(&job.task_queue)
        .bind(&job.input)
        .bind(activity.id)
        .bind(&activity.name)
        .bind(&activity.providers)
        .bind(to_json(&activity.options)?)
        .bind(&activity.input)
        .bind(attempt.id)
        .bind(attempt.number)
        .bind(&attempt.provider)
        .bind(attempt.delay_ms as f64 / 1000.0)
        .bind(attempt.schedule_to_start_timeout_s.map(|s| s as f64))
        .bind(&kinds)
        .bind(&attempts)
        .bind(&actors)
        .bind(&data)
        .fetch_optional(exec)
        .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some((inserted_job_row(job, &row)?, attempt_row(&row)?)))
}

/// The submission of an activity job in one statement: job (dedup insert), activity 0,
/// attempt 1 and the job's first events, each inserted only from the row before it.
static INSERT_ACTIVITY_JOB_SQL: LazyLock<String> = LazyLock::new(|| {
    let attempt_columns: String = ATTEMPT_COLUMNS
        .split(',')
        .map(|c| format!("t.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "WITH j AS (
             INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, wf_ready)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false)
             ON CONFLICT (owner_id, idempotency_key) DO NOTHING
             RETURNING owner_id, id, status, version, created_at, updated_at
         ), a AS (
             INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input)
             SELECT j.owner_id, $9, j.id, 0, $10, $11, $12, $7, $13 FROM j
             RETURNING owner_id, id, job_id
         ), t AS (
             INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue,
                                   provider, available_at, start_deadline_at)
             SELECT a.owner_id, $14, a.id, a.job_id, $15, $10, $7, $16,
                    now() + make_interval(secs => $17),
                    now() + make_interval(secs => $17) + make_interval(secs => $18)
             FROM a
             RETURNING {ATTEMPT_COLUMNS}
         ), e AS (
             INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
             SELECT j.owner_id, j.id, ev.ord, ev.type, ev.attempt_id, ev.actor, ev.data
             FROM j, unnest($19::text[], $20::uuid[], $21::text[], $22::jsonb[])
                     WITH ORDINALITY AS ev(type, attempt_id, actor, data, ord)
         )
         SELECT {attempt_columns}, j.status AS job_status, j.version AS job_version,
                j.created_at AS job_created_at, j.updated_at AS job_updated_at
         FROM j, t"
    )
});

/// [`INSERT_ACTIVITY_JOBS_SQL`]: many submissions in one autocommit statement. Jobs go in
/// sorted by (owner, key), so two such statements never wait on each other's keys in
/// opposite orders; a key given twice is inserted once (the later ones answer `None`).
async fn insert_activity_jobs_on(
    pool: &PgPool,
    jobs: &[NewActivityJob],
) -> StoreResult<Vec<Option<(JobRow, AttemptRow)>>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&x, &y| {
        (&jobs[x].job.owner_id, &jobs[x].job.idempotency_key)
            .cmp(&(&jobs[y].job.owner_id, &jobs[y].job.idempotency_key))
    });
    order.dedup_by(|&mut later, &mut earlier| {
        jobs[later].job.owner_id == jobs[earlier].job.owner_id
            && jobs[later].job.idempotency_key == jobs[earlier].job.idempotency_key
    });
    let n = order.len();
    let (
        mut owners,
        mut ids,
        mut keys,
        mut fingerprints,
        mut kinds,
        mut activities,
        mut queues,
        mut inputs,
    ) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (
        mut activity_ids,
        mut providers,
        mut options,
        mut activity_inputs,
        mut attempt_ids,
        mut numbers,
        mut first_providers,
        mut delays,
        mut start_timeouts,
    ) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut ev_jobs, mut ev_seqs, mut ev_kinds, mut ev_attempts, mut ev_actors, mut ev_data) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for &k in &order {
        let NewActivityJob {
            job,
            activity,
            attempt,
            events,
        } = &jobs[k];
        owners.push(job.owner_id.as_str());
        ids.push(job.id);
        keys.push(job.idempotency_key.as_str());
        fingerprints.push(job.fingerprint.as_str());
        kinds.push(job.kind.as_str());
        activities.push(activity.name.as_str());
        queues.push(job.task_queue.as_str());
        inputs.push(&job.input);
        activity_ids.push(activity.id);
        providers.push(to_json(&activity.providers)?);
        options.push(to_json(&activity.options)?);
        activity_inputs.push(&activity.input);
        attempt_ids.push(attempt.id);
        numbers.push(attempt.number);
        first_providers.push(attempt.provider.as_str());
        delays.push(attempt.delay_ms as f64 / 1000.0);
        start_timeouts.push(attempt.schedule_to_start_timeout_s.map(|s| s as f64));
        for (seq, e) in events.iter().enumerate() {
            ev_jobs.push(job.id);
            ev_seqs.push(seq as i64 + 1);
            ev_kinds.push(e.kind);
            ev_attempts.push(e.attempt_id);
            ev_actors.push(e.actor.as_str());
            ev_data.push(&e.data);
        }
    }
    // Invariant 1: each job insert is ON CONFLICT DO NOTHING, and its activity, attempt
    // and events are inserted only from the row it returns: a taken key inserts nothing.
    let rows = sqlx::query(&INSERT_ACTIVITY_JOBS_SQL)
        .bind(&owners)
        .bind(&ids)
        .bind(&keys)
        .bind(&fingerprints)
        .bind(&kinds)
        .bind(&activities)
        .bind(&queues)
        .bind(&inputs)
        .bind(&activity_ids)
        .bind(&providers)
        .bind(&options)
        .bind(&activity_inputs)
        .bind(&attempt_ids)
        .bind(&numbers)
        .bind(&first_providers)
        .bind(&delays)
        .bind(&start_timeouts)
        .bind(&ev_jobs)
        .bind(&ev_seqs)
        .bind(&ev_kinds)
        .bind(&ev_attempts)
        .bind(&ev_actors)
        .bind(&ev_data)
        .fetch_all(pool)
        .await?;
    let mut answers: Vec<Option<(JobRow, AttemptRow)>> = vec![None; jobs.len()];
    for row in &rows {
        let attempt = attempt_row(row)?;
        let Some(&k) = order.iter().find(|&&k| jobs[k].job.id == attempt.job_id) else {
            return Err(StoreError::Corrupt(
                "a batched submission returned a job it was not given".into(),
            ));
        };
        answers[k] = Some((inserted_job_row(&jobs[k].job, row)?, attempt));
    }
    Ok(answers)
}

/// Many submissions of activity jobs in one statement: [`INSERT_ACTIVITY_JOB_SQL`] over
/// arrays, one element per job (`$1`–`$17`), and the events of every job (`$18`–`$23`).
static INSERT_ACTIVITY_JOBS_SQL: LazyLock<String> = LazyLock::new(|| {
    let attempt_columns: String = ATTEMPT_COLUMNS
        .split(',')
        .map(|c| format!("t.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "WITH i AS (
             SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                                  $8::jsonb[], $9::uuid[], $10::jsonb[], $11::jsonb[], $12::jsonb[], $13::uuid[],
                                  $14::int4[], $15::text[], $16::float8[], $17::float8[])
                 WITH ORDINALITY AS i(owner_id, job_id, idempotency_key, fingerprint, kind, activity, task_queue,
                                      input, activity_id, providers, options, activity_input, attempt_id,
                                      number, provider, delay_s, start_timeout_s, ord)
         ), j AS (
             INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, wf_ready)
             SELECT owner_id, job_id, idempotency_key, fingerprint, kind, activity, task_queue, input, false
             FROM i ORDER BY ord
             ON CONFLICT (owner_id, idempotency_key) DO NOTHING
             RETURNING owner_id, id, status, version, created_at, updated_at
         ), a AS (
             INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input)
             SELECT i.owner_id, i.activity_id, i.job_id, 0, i.activity,
                    ARRAY(SELECT p FROM jsonb_array_elements_text(i.providers) WITH ORDINALITY AS x(p, n) ORDER BY n),
                    i.options, i.task_queue, i.activity_input
             FROM i JOIN j ON j.owner_id = i.owner_id AND j.id = i.job_id
             RETURNING owner_id, id, job_id
         ), t AS (
             INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue,
                                   provider, available_at, start_deadline_at)
             SELECT i.owner_id, i.attempt_id, a.id, a.job_id, i.number, i.activity, i.task_queue, i.provider,
                    now() + make_interval(secs => i.delay_s),
                    now() + make_interval(secs => i.delay_s) + make_interval(secs => i.start_timeout_s)
             FROM i JOIN a ON a.owner_id = i.owner_id AND a.id = i.activity_id
             RETURNING {ATTEMPT_COLUMNS}
         ), e AS (
             INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
             SELECT j.owner_id, j.id, ev.seq, ev.type, ev.attempt_id, ev.actor, ev.data
             FROM unnest($18::uuid[], $19::int8[], $20::text[], $21::uuid[], $22::text[], $23::jsonb[])
                     AS ev(job_id, seq, type, attempt_id, actor, data)
             JOIN j ON j.id = ev.job_id
         )
         SELECT {attempt_columns}, j.status AS job_status, j.version AS job_version,
                j.created_at AS job_created_at, j.updated_at AS job_updated_at
         FROM j JOIN t ON t.owner_id = j.owner_id AND t.job_id = j.id"
    )
});

/// The channel on which PostgreSQL engines tell each other that work was scheduled.
const WORK_CHANNEL: &str = "onceflow_work";

/// A PostgreSQL transaction.
pub struct PgTx {
    tx: Transaction<'static, Postgres>,
    bell: Arc<WorkBell>,
    wake: bool,
    /// The transaction's `now()`, once read.
    now: Option<chrono::DateTime<chrono::Utc>>,
}

#[async_trait]
impl StoreTx for PgTx {
    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let PgTx { tx, bell, wake, .. } = *self;
        tx.commit().await?;
        if wake {
            bell.ring();
        }
        Ok(())
    }

    async fn now(&mut self) -> StoreResult<chrono::DateTime<chrono::Utc>> {
        if let Some(now) = self.now {
            return Ok(now);
        }
        let now = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *self.tx)
            .await?;
        self.now = Some(now);
        Ok(now)
    }

    async fn insert_job(&mut self, job: &NewJob) -> StoreResult<Option<JobRow>> {
        // Invariant 1: one job per (owner, idempotency key); the loser inserts nothing.
        let row = sqlx::query(&format!(
            "INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, workflow,
                               activity, task_queue, input, wf_ready)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $5 = 'workflow')
             ON CONFLICT (owner_id, idempotency_key) DO NOTHING
             RETURNING {JOB_COLUMNS}"
        ))
        .bind(&job.owner_id)
        .bind(job.id)
        .bind(&job.idempotency_key)
        .bind(&job.fingerprint)
        .bind(job.kind.as_str())
        .bind(&job.workflow)
        .bind(&job.activity)
        .bind(&job.task_queue)
        .bind(&job.input)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn insert_activity_job(
        &mut self,
        job: &NewJob,
        activity: &NewActivity,
        attempt: &NewAttempt,
        events: &[NewEvent],
    ) -> StoreResult<Option<(JobRow, AttemptRow)>> {
        let inserted =
            insert_activity_job_on(&mut *self.tx, job, activity, attempt, events).await?;
        if inserted.is_some() {
            self.wake = true;
        }
        Ok(inserted)
    }

    async fn job_by_idempotency_key(
        &mut self,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(&format!(
            // By key on jobs_one_per_idempotency_key, the owner as a filter (ARRAY_LOOKUPS).
            "SELECT {JOB_COLUMNS} FROM jobs WHERE idempotency_key = $2 AND (owner_id = $1) IS TRUE"
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
             WHERE (owner_id, id) = (SELECT owner_id, job_id FROM attempts
                                     WHERE id = $1 AND ($2::text IS NULL OR owner_id = $2))
             FOR UPDATE"
        ))
        .bind(attempt_id)
        .bind(scope.owner())
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn lock_jobs_of_attempts(
        &mut self,
        attempt_ids: &[Uuid],
    ) -> StoreResult<Vec<LockedAttempt>> {
        // Locking discipline: the jobs first, in (owner, id) order, so that batches never
        // wait on each other in a cycle; each attempt is read once its job is held.
        let rows = sqlx::query(&LOCK_JOBS_OF_ATTEMPTS_SQL)
            .bind(attempt_ids)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|row| {
                let contract: Option<String> = row.try_get("c_contract_hash")?;
                Ok(LockedAttempt {
                    job: job_row_in(Cols { row, prefix: "j_" })?,
                    attempt: attempt_row(row)?,
                    contract: contract
                        .map(|_| contract_row_in(Cols { row, prefix: "c_" }))
                        .transpose()?,
                })
            })
            .collect()
    }

    async fn lock_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE owner_id = $1 AND id = $2 FOR UPDATE"
        ))
        .bind(owner)
        .bind(job_id)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn mark_job_running(&mut self, owner: &str, job_id: Uuid) -> StoreResult<bool> {
        // Job status: only a queued job starts running.
        let result = sqlx::query(
            "UPDATE jobs SET status = 'running', updated_at = now()
             WHERE owner_id = $1 AND id = $2 AND status = 'queued'",
        )
        .bind(owner)
        .bind(job_id)
        .execute(&mut *self.tx)
        .await?;
        Ok(result.rows_affected() == 1)
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
            "UPDATE jobs
             SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
                 updated_at = now(), finished_at = now()
             WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
               AND status IN ('queued', 'running')",
        )
        .bind(owner)
        .bind(job_id)
        .bind(version)
        .bind(attempt_id)
        .bind(result)
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
        let error = error.map(to_json).transpose()?;
        // Invariant 4: closing moves the version, so no later result takes the slot.
        let done = sqlx::query(
            "UPDATE jobs
             SET status = $4, error = $5, version = version + 1,
                 updated_at = now(), finished_at = now()
             WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
               AND status IN ('queued', 'running')",
        )
        .bind(owner)
        .bind(job_id)
        .bind(version)
        .bind(status.as_str())
        .bind(error)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_activity(&mut self, a: &NewActivity) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options,
                                     task_queue, input)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&a.owner_id)
        .bind(a.id)
        .bind(a.job_id)
        .bind(a.seq)
        .bind(&a.name)
        .bind(&a.providers)
        .bind(to_json(&a.options)?)
        .bind(&a.task_queue)
        .bind(&a.input)
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
            "SELECT {ACTIVITY_COLUMNS} FROM activities WHERE owner_id = $1 AND id = $2"
        ))
        .bind(owner)
        .bind(activity_id)
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
        // By job on activities_one_per_seq, the owner as a filter (ARRAY_LOOKUPS).
        let row = sqlx::query(&format!(
            "SELECT {ACTIVITY_COLUMNS} FROM activities WHERE job_id = $2 AND seq = $3 AND (owner_id = $1) IS TRUE"
        ))
        .bind(owner)
        .bind(job_id)
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
        // By job on activities_one_per_seq, the owner as a filter (ARRAY_LOOKUPS).
        let rows = sqlx::query(&format!(
            "SELECT {ACTIVITY_COLUMNS} FROM activities WHERE job_id = $2 AND (owner_id = $1) IS TRUE ORDER BY seq"
        ))
        .bind(owner)
        .bind(job_id)
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
        // Activity status: moves only from the expected open statuses, never out of a
        // closed one.
        let done = sqlx::query(
            "UPDATE activities SET status = $4, updated_at = now()
             WHERE owner_id = $1 AND id = $2 AND status = ANY($3)
               AND status NOT IN ('succeeded', 'failed', 'cancelled')",
        )
        .bind(owner)
        .bind(activity_id)
        .bind(&from)
        .bind(to.as_str())
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
            "UPDATE activities
             SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
                 updated_at = now(), finished_at = now()
             WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL",
        )
        .bind(owner)
        .bind(activity_id)
        .bind(read_version)
        .bind(attempt_id)
        .bind(result)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit_activity_job_result(
        &mut self,
        owner: &str,
        job_id: Uuid,
        job_version: i64,
        activity_id: Uuid,
        read_version: i64,
        attempt_id: Uuid,
        from: &[AttemptStatus],
        result: &Value,
    ) -> StoreResult<(bool, bool)> {
        // Invariant 4 in one round trip: the activity CAS takes the slot or nothing
        // happens; the attempt and the job (its own CAS) move only from the row it took.
        let row = sqlx::query(
            "WITH act AS (
                 UPDATE activities
                 SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
                     updated_at = now(), finished_at = now()
                 WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
                 RETURNING id
             ), att AS (
                 UPDATE attempts
                 SET status = 'succeeded', completion_outcome = 'won',
                     finished_at = COALESCE(finished_at, now()), lease_expires_at = NULL
                 WHERE owner_id = $1 AND id = $4 AND status = ANY($6) AND EXISTS (SELECT 1 FROM act)
                 RETURNING id
             ), jb AS (
                 UPDATE jobs
                 SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
                     updated_at = now(), finished_at = now()
                 WHERE owner_id = $1 AND id = $7 AND version = $8 AND completed_by IS NULL
                   AND status IN ('queued', 'running') AND EXISTS (SELECT 1 FROM act)
                 RETURNING id
             )
             SELECT EXISTS (SELECT 1 FROM act) AS activity_won, EXISTS (SELECT 1 FROM jb) AS job_won",
        )
        .bind(owner)
        .bind(activity_id)
        .bind(read_version)
        .bind(attempt_id)
        .bind(result)
        .bind(status_words(from))
        .bind(job_id)
        .bind(job_version)
        .fetch_one(&mut *self.tx)
        .await?;
        Ok((row.try_get("activity_won")?, row.try_get("job_won")?))
    }

    async fn commit_activity_job_results(
        &mut self,
        wins: &[WinningResult],
        from: &[AttemptStatus],
    ) -> StoreResult<Vec<(bool, bool)>> {
        let owners: Vec<&str> = wins.iter().map(|w| w.owner_id.as_str()).collect();
        let jobs: Vec<Uuid> = wins.iter().map(|w| w.job_id).collect();
        let job_versions: Vec<i64> = wins.iter().map(|w| w.job_version).collect();
        let activities: Vec<Uuid> = wins.iter().map(|w| w.activity_id).collect();
        let read_versions: Vec<i64> = wins.iter().map(|w| w.read_version).collect();
        let attempts: Vec<Uuid> = wins.iter().map(|w| w.attempt_id).collect();
        let results: Vec<&Value> = wins.iter().map(|w| &w.result).collect();
        let rows = sqlx::query(&COMMIT_ACTIVITY_JOB_RESULTS_SQL)
            .bind(&owners)
            .bind(&jobs)
            .bind(&job_versions)
            .bind(&activities)
            .bind(&read_versions)
            .bind(&attempts)
            .bind(&results)
            .bind(status_words(from))
            .fetch_all(&mut *self.tx)
            .await?;
        let mut taken = vec![(false, false); wins.len()];
        for row in &rows {
            let at: i64 = row.try_get("ord")?;
            let slot = usize::try_from(at - 1).ok().and_then(|i| taken.get_mut(i));
            let slot = slot.ok_or_else(|| {
                StoreError::Corrupt("a batched CAS answered a result it was not given".into())
            })?;
            *slot = (row.try_get("activity_won")?, row.try_get("job_won")?);
        }
        Ok(taken)
    }

    async fn close_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        status: ActivityStatus,
        error: Option<&ErrorInfo>,
    ) -> StoreResult<bool> {
        let error = error.map(to_json).transpose()?;
        // Invariant 4: closing the slot moves the version, so every later result loses.
        let done = sqlx::query(
            "UPDATE activities
             SET status = $3, error = $4, version = version + 1,
                 updated_at = now(), finished_at = now()
             WHERE owner_id = $1 AND id = $2 AND completed_by IS NULL
               AND status NOT IN ('succeeded', 'failed', 'cancelled')",
        )
        .bind(owner)
        .bind(activity_id)
        .bind(status.as_str())
        .bind(error)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_attempt(&mut self, a: &NewAttempt) -> StoreResult<Option<AttemptRow>> {
        // Invariant 2: the partial unique index refuses a second live attempt; the
        // refused insert returns no row.
        let row = sqlx::query(&format!(
            "INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue,
                                   provider, available_at, start_deadline_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                     now() + make_interval(secs => $9),
                     now() + make_interval(secs => $9) + make_interval(secs => $10))
             ON CONFLICT DO NOTHING
             RETURNING {ATTEMPT_COLUMNS}"
        ))
        .bind(&a.owner_id)
        .bind(a.id)
        .bind(a.activity_id)
        .bind(a.job_id)
        .bind(a.number)
        .bind(&a.activity)
        .bind(&a.task_queue)
        .bind(&a.provider)
        .bind(a.delay_ms as f64 / 1000.0)
        .bind(a.schedule_to_start_timeout_s.map(|s| s as f64))
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(attempt_row).transpose()
    }

    async fn attempt(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<Option<AttemptRow>> {
        let row = sqlx::query(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE owner_id = $1 AND id = $2"
        ))
        .bind(owner)
        .bind(attempt_id)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(attempt_row).transpose()
    }

    async fn attempts_of_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Vec<AttemptRow>> {
        let rows = sqlx::query(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts
             -- By activity on attempts_one_per_number, the owner as a filter (ARRAY_LOOKUPS).
             WHERE activity_id = $2 AND (owner_id = $1) IS TRUE ORDER BY number"
        ))
        .bind(owner)
        .bind(activity_id)
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
        let error = error.map(to_json).transpose()?;
        // Attempt status: an attempt ends once, from the statuses the caller saw.
        let done = sqlx::query(
            "UPDATE attempts
             SET status = $4, error = COALESCE($5, error), completion_outcome = $6,
                 finished_at = COALESCE(finished_at, now()),
                 lease_expires_at = NULL
             WHERE owner_id = $1 AND id = $2 AND status = ANY($3)",
        )
        .bind(owner)
        .bind(attempt_id)
        .bind(status_words(from))
        .bind(to.as_str())
        .bind(error)
        .bind(outcome.map(|o| o.as_str()))
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn mark_attempt_unknown(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<bool> {
        // Invariant 3: only a started attempt whose lease really expired becomes unknown
        // (a heartbeat that extended the lease first wins).
        let done = sqlx::query(
            "UPDATE attempts SET status = 'unknown', unknown_at = lease_expires_at
             WHERE owner_id = $1 AND id = $2 AND status = 'started' AND lease_expires_at < now()",
        )
        .bind(owner)
        .bind(attempt_id)
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
        // Fencing (invariant 5): only the holder of the lease token revives an unknown
        // attempt, and only within its start-to-close deadline.
        let done = sqlx::query(
            "UPDATE attempts t
             SET status = 'started', unknown_at = NULL, heartbeat_at = now(),
                 heartbeat_details = COALESCE($4, t.heartbeat_details),
                 lease_expires_at = LEAST(
                     now() + make_interval(secs => (a.options->>'heartbeat_timeout_s')::float8),
                     t.started_at + make_interval(secs => (a.options->>'start_to_close_timeout_s')::float8))
             FROM activities a
             WHERE t.owner_id = $1 AND t.id = $2 AND t.lease_token = $3 AND t.status = 'unknown'
               AND a.owner_id = t.owner_id AND a.id = t.activity_id
               -- Past its start-to-close deadline an attempt stays unknown: no revival.
               AND (a.options->>'start_to_close_timeout_s' IS NULL
                    OR t.started_at + make_interval(secs => (a.options->>'start_to_close_timeout_s')::float8) > now())",
        )
        .bind(owner)
        .bind(attempt_id)
        .bind(token)
        .bind(details)
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
        // Attempt status: only live attempts are cancelled, once each.
        let rows = sqlx::query(
            "WITH live AS (
                 SELECT owner_id, id, status FROM attempts
                 WHERE owner_id = $1 AND activity_id = $2 AND ($3::uuid IS NULL OR id <> $3)
                   AND live AND status IN ('scheduled', 'started', 'unknown')
                 FOR UPDATE
             )
             UPDATE attempts t
             SET status = 'cancelled', cancelled_by = $4, cancel_reason = $5, cancelled_at = now(), finished_at = now()
             FROM live WHERE t.owner_id = live.owner_id AND t.id = live.id
             RETURNING t.id, live.status AS was",
        )
        .bind(owner)
        .bind(activity_id)
        .bind(except)
        .bind(cancelled_by)
        .bind(reason)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter()
            .map(|r| {
                let was: String = r.try_get("was")?;
                Ok((
                    r.try_get("id")?,
                    AttemptStatus::parse(&was).ok_or_else(|| corrupt("attempt status", &was))?,
                ))
            })
            .collect()
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
            "UPDATE attempts
             SET status = 'cancelled', cancelled_by = $3, cancel_reason = $4,
                 cancelled_at = now(), finished_at = now()
             WHERE owner_id = $1 AND id = $2 AND status IN ('scheduled', 'started', 'unknown')",
        )
        .bind(owner)
        .bind(attempt_id)
        .bind(cancelled_by)
        .bind(reason)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn notify_work(&mut self, _task_queue: &str) -> StoreResult<()> {
        // A wake-up hint, rung after commit (merged with others; see `WorkBell`).
        self.wake = true;
        Ok(())
    }

    async fn append_events(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut owners = Vec::with_capacity(events.len());
        let mut jobs = Vec::with_capacity(events.len());
        let mut kinds = Vec::with_capacity(events.len());
        let mut attempts = Vec::with_capacity(events.len());
        let mut actors = Vec::with_capacity(events.len());
        let mut data = Vec::with_capacity(events.len());
        for e in events {
            owners.push(e.owner_id.clone());
            jobs.push(e.job_id);
            kinds.push(e.kind.to_owned());
            attempts.push(e.attempt_id);
            actors.push(e.actor.clone());
            data.push(e.data.clone());
        }
        // The caller holds each job's lock, so numbering after the current maximum is safe.
        sqlx::query(
            "INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
             SELECT e.owner_id, e.job_id,
                    COALESCE((SELECT max(seq) FROM job_events x
                              WHERE x.owner_id = e.owner_id AND x.job_id = e.job_id), 0)
                    + row_number() OVER (PARTITION BY e.owner_id, e.job_id ORDER BY e.ord),
                    e.type, e.attempt_id, e.actor, e.data
             FROM unnest($1::text[], $2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::jsonb[])
                  WITH ORDINALITY AS e(owner_id, job_id, type, attempt_id, actor, data, ord)",
        )
        .bind(&owners)
        .bind(&jobs)
        .bind(&kinds)
        .bind(&attempts)
        .bind(&actors)
        .bind(&data)
        .execute(&mut *self.tx)
        .await?;
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
             WHERE owner_id IN ($1, '*') AND activity = $2
             ORDER BY (owner_id = $1) DESC, registered_at DESC
             LIMIT 1",
        )
        .bind(owner)
        .bind(activity)
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(contract_row).transpose()
    }

    async fn latest_certification(
        &mut self,
        owner: &str,
        activity: &str,
        provider: &str,
        contract_hash: &str,
    ) -> StoreResult<Option<Certification>> {
        // Invariant 6: only the latest certification for the current contract counts,
        // latest by the database's clock that stamped it.
        let row = sqlx::query(
            "SELECT id, owner_id, activity, provider, contract_hash, passed, report, created_at
             FROM certifications
             WHERE owner_id IN ($1, '*') AND activity = $2 AND provider = $3
               AND contract_hash = $4
             ORDER BY (owner_id = $1) DESC, created_at DESC, id DESC
             LIMIT 1",
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
        let (activities, providers): (Vec<String>, Vec<String>) =
            filter.providers.iter().cloned().unzip();
        // Dispatch: SKIP LOCKED hands each scheduled attempt to one worker only; the job
        // row is locked with it (lock order: job before its attempts).
        let rows = sqlx::query(&CLAIM_ATTEMPTS_SQL)
            .bind(&filter.task_queue)
            .bind(filter.scope.owner())
            .bind(&activities)
            .bind(&providers)
            .bind(filter.limit)
            .bind(&filter.worker_id)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| {
                let options: Value = r.try_get("activity_options")?;
                Ok(ClaimedAttempt {
                    attempt: attempt_row(r)?,
                    activity_seq: r.try_get("activity_seq")?,
                    input: r.try_get("activity_input")?,
                    options: serde_json::from_value(options)
                        .map_err(|e| StoreError::Corrupt(format!("activity options: {e}")))?,
                })
            })
            .collect()
    }

    async fn claim_workflow_tasks(
        &mut self,
        filter: &WorkflowClaimFilter,
    ) -> StoreResult<Vec<JobRow>> {
        // Dispatch: SKIP LOCKED hands each workflow task to one worker; a task whose
        // lease expired is simply handed out again (workflow code has no side effects).
        let rows = sqlx::query(&CLAIM_WORKFLOW_TASKS_SQL)
            .bind(&filter.task_queue)
            .bind(&filter.workflows)
            .bind(filter.scope.owner())
            .bind(filter.limit)
            .bind(&filter.worker_id)
            .bind(filter.lease_ms as f64 / 1000.0)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(job_row).collect()
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
            "UPDATE jobs
             SET version = version + 1, wf_lease_token = NULL, wf_lease_expires_at = NULL, updated_at = now()
             WHERE owner_id = $1 AND id = $2 AND wf_lease_token = $3 AND version = $4
               AND status IN ('queued', 'running')",
        )
        .bind(owner)
        .bind(job_id)
        .bind(token)
        .bind(read_version)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn mark_workflow_ready(&mut self, owner: &str, job_id: Uuid) -> StoreResult<()> {
        let queue: Option<String> = sqlx::query_scalar(
            "UPDATE jobs SET wf_ready = true, updated_at = now()
             WHERE owner_id = $1 AND id = $2 AND kind = 'workflow' AND status IN ('queued', 'running')
             RETURNING task_queue",
        )
        .bind(owner)
        .bind(job_id)
        .fetch_optional(&mut *self.tx)
        .await?;
        if let Some(queue) = queue {
            self.notify_work(&queue).await?;
        }
        Ok(())
    }

    async fn park_workflow(
        &mut self,
        owner: &str,
        job_id: Uuid,
        error: &ErrorInfo,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE jobs SET wf_parked = true, error = $3, updated_at = now()
             WHERE owner_id = $1 AND id = $2 AND status IN ('queued', 'running')",
        )
        .bind(owner)
        .bind(job_id)
        .bind(to_json(error)?)
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
        let done = sqlx::query(
            "INSERT INTO timers (owner_id, job_id, seq, fire_at)
             VALUES ($1, $2, $3, now() + make_interval(secs => $4))
             ON CONFLICT DO NOTHING",
        )
        .bind(owner)
        .bind(job_id)
        .bind(seq)
        .bind(delay_ms as f64 / 1000.0)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn timers_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<TimerRow>> {
        let rows = sqlx::query("SELECT seq, fire_at, fired_at FROM timers WHERE owner_id = $1 AND job_id = $2 ORDER BY seq")
            .bind(owner)
            .bind(job_id)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TimerRow {
                    seq: r.try_get("seq")?,
                    fire_at: r.try_get("fire_at")?,
                    fired_at: r.try_get("fired_at")?,
                })
            })
            .collect()
    }

    async fn lock_due_timers(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid, i32)>> {
        // Timer loop: each due timer is taken by one engine only (SKIP LOCKED).
        let rows = sqlx::query(&DUE_TIMERS_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("owner_id")?,
                    r.try_get("job_id")?,
                    r.try_get("seq")?,
                ))
            })
            .collect()
    }

    async fn fire_timer(&mut self, owner: &str, job_id: Uuid, seq: i32) -> StoreResult<bool> {
        // A timer fires once.
        let done = sqlx::query(
            "UPDATE timers SET fired_at = now()
             WHERE owner_id = $1 AND job_id = $2 AND seq = $3 AND fired_at IS NULL AND fire_at <= now()",
        )
        .bind(owner)
        .bind(job_id)
        .bind(seq)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_expired_leases(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        // Reaper: each expired lease is taken by one reaper only (SKIP LOCKED).
        let rows = sqlx::query(&EXPIRED_LEASES_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, r.try_get("id")?)))
            .collect()
    }

    async fn lock_overdue_scheduled(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        // Reaper: each overdue scheduled attempt is taken by one reaper only (SKIP LOCKED).
        let rows = sqlx::query(&OVERDUE_SCHEDULED_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, r.try_get("id")?)))
            .collect()
    }

    async fn lock_schedule(&mut self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>> {
        let row = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE owner_id = $1 AND name = $2 FOR UPDATE"
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
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
             ON CONFLICT (owner_id, name) DO NOTHING",
        )
        .bind(&v.owner)
        .bind(&v.name)
        .bind(&v.cron)
        .bind(&v.timezone)
        .bind(&v.job)
        .bind(v.overlap.as_str())
        .bind(v.catchup_window_s as i64)
        .bind(v.paused)
        .bind(v.next_fire_at)
        .bind(s.version)
        .bind(v.created_at)
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
             SET cron = $4, timezone = $5, job = $6, overlap = $7, catchup_window_s = $8, paused = $9,
                 next_fire_at = $10, last_fired_at = $11, last_job_id = $12, fired_count = $13,
                 skipped_overlap_count = $14, skipped_too_old_count = $15, updated_at = $16,
                 version = version + 1
             WHERE owner_id = $1 AND name = $2 AND version = $3",
        )
        .bind(&v.owner)
        .bind(&v.name)
        .bind(s.version)
        .bind(&v.cron)
        .bind(&v.timezone)
        .bind(&v.job)
        .bind(v.overlap.as_str())
        .bind(v.catchup_window_s as i64)
        .bind(v.paused)
        .bind(v.next_fire_at)
        .bind(v.last_fired_at)
        .bind(v.last_job_id)
        .bind(v.fired_count as i64)
        .bind(v.skipped_overlap_count as i64)
        .bind(v.skipped_too_old_count as i64)
        .bind(v.updated_at)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_schedule(&mut self, owner: &str, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM schedules WHERE owner_id = $1 AND name = $2")
            .bind(owner)
            .bind(name)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_due_schedules(&mut self, limit: i64) -> StoreResult<Vec<ScheduleRow>> {
        // Scheduler loop: each due schedule is taken by one engine only (SKIP LOCKED), and
        // only once due by the database's clock (the transaction's now(), which the pass
        // computes its ticks from), whatever the engine's clock.
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules
             WHERE NOT paused AND next_fire_at <= now()
             ORDER BY next_fire_at LIMIT $1
             FOR UPDATE SKIP LOCKED"
        ))
        .bind(limit)
        .fetch_all(&mut *self.tx)
        .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn job_status(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobStatus>> {
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM jobs WHERE owner_id = $1 AND id = $2")
                .bind(owner)
                .bind(job_id)
                .fetch_optional(&mut *self.tx)
                .await?;
        status
            .map(|s| JobStatus::parse(&s).ok_or_else(|| corrupt("job status", &s)))
            .transpose()
    }

    async fn append_schedule_events(&mut self, events: &[NewScheduleEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut owners = Vec::with_capacity(events.len());
        let mut names = Vec::with_capacity(events.len());
        let mut ats = Vec::with_capacity(events.len());
        let mut kinds = Vec::with_capacity(events.len());
        let mut ticks = Vec::with_capacity(events.len());
        let mut jobs = Vec::with_capacity(events.len());
        let mut data = Vec::with_capacity(events.len());
        for e in events {
            owners.push(e.owner_id.clone());
            names.push(e.schedule_name.clone());
            ats.push(e.at);
            kinds.push(e.kind.to_owned());
            ticks.push(e.tick_at);
            jobs.push(e.job_id);
            data.push(e.data.clone());
        }
        sqlx::query(
            "INSERT INTO schedule_events (owner_id, schedule_name, at, type, tick_at, job_id, data)
             SELECT o, n, a, t, k, j, d FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::timestamptz[],
                                  $6::uuid[], $7::jsonb[]) WITH ORDINALITY AS e(o, n, a, t, k, j, d, ord)
             ORDER BY ord",
        )
        .bind(&owners)
        .bind(&names)
        .bind(&ats)
        .bind(&kinds)
        .bind(&ticks)
        .bind(&jobs)
        .bind(&data)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }
}
