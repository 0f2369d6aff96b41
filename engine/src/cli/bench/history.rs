//! `--history N`: the database pre-filled with N finished jobs before the workloads, so
//! that they are measured on a database with a past.
//!
//! The rows are written by the seeding statements beside the migrations
//! (`migrations/seed/`, see its README): one `.sql` file per table and store, the same
//! file name in both folders for the same statement, and the same parameters, bound
//! here. `tests/tests/engine/seeding.rs` reads seeded jobs back through the [`Engine`]
//! and compares them with a job the engine ran, on both stores.
//!
//! [`Engine`]: crate::Engine

use std::str::FromStr;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::ConnectOptions;

use crate::model::ActivityOptions;
use crate::request::{JobRequest, JobTarget};

/// The owner of every seeded job.
pub const OWNER: &str = "bench_history";
/// The activity of every seeded job, and its task queue.
const ACTIVITY: &str = "bench_history";
/// The worker every seeded attempt ran on.
const WORKER_ID: &str = "bench_history";
/// The provider every seeded activity names.
const PROVIDER: &str = super::PROVIDER;

/// The seeding statements of PostgreSQL, in the order they run.
const POSTGRES: [&str; 4] = [
    include_str!("../../../../migrations/seed/postgres/jobs.sql"),
    include_str!("../../../../migrations/seed/postgres/activities.sql"),
    include_str!("../../../../migrations/seed/postgres/attempts.sql"),
    include_str!("../../../../migrations/seed/postgres/job_events.sql"),
];
/// The seeding statements of SQLite, the same as [`POSTGRES`] file for file.
const SQLITE: [&str; 4] = [
    include_str!("../../../../migrations/seed/sqlite/jobs.sql"),
    include_str!("../../../../migrations/seed/sqlite/activities.sql"),
    include_str!("../../../../migrations/seed/sqlite/attempts.sql"),
    include_str!("../../../../migrations/seed/sqlite/job_events.sql"),
];
/// What the bench does after seeding PostgreSQL (see [`settle`]).
const VACUUM: &str = include_str!("sql/history_vacuum.sql");
/// See [`settle`].
const CHECKPOINT: &str = include_str!("sql/history_checkpoint.sql");

/// Why seeding failed.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The URL is neither `postgres://…` (or `postgresql://…`) nor `sqlite:…`.
    #[error("cannot seed `{0}`: not a PostgreSQL or SQLite URL")]
    UnknownStore(String),
    /// The run id does not start with three hexadecimal digits (they go into the ids).
    #[error("the run id `{0}` does not start with three lowercase hexadecimal digits")]
    RunId(String),
    /// More jobs than a statement parameter holds.
    #[error("cannot seed {0} jobs: too many")]
    TooMany(u64),
    /// The seeded request could not be written as JSON.
    #[error("the seeded request: {0}")]
    Json(#[from] serde_json::Error),
    /// The database refused a connection or a statement.
    #[error("seeding failed: {0}")]
    Database(#[from] sqlx::Error),
}

/// The request every seeded job was submitted with: activity `bench_history` at
/// provider `noop`, default options, on task queue `bench_history`. Resubmitting a seeded
/// key with it replays the seeded job.
pub fn request() -> JobRequest {
    JobRequest {
        target: JobTarget::Activity {
            name: ACTIVITY.to_owned(),
            providers: vec![PROVIDER.to_owned()],
            options: ActivityOptions::default(),
        },
        input: json!({ "history": true }),
        task_queue: ACTIVITY.to_owned(),
    }
}

/// The result every seeded job succeeded with (the bench's no-op provider's).
pub fn result() -> serde_json::Value {
    json!({ "ok": true })
}

/// The idempotency key of seeded job `n` (from 1) of run `run_id`.
pub fn key(run_id: &str, n: u64) -> String {
    format!("{}{n}", key_prefix(run_id))
}

fn key_prefix(run_id: &str) -> String {
    format!("hist-{run_id}-")
}

/// Seeds `jobs` succeeded activity jobs of owner [`OWNER`], keys `key(run_id, 1..=jobs)`,
/// into the migrated database at `database_url`, in one transaction (all or nothing).
/// Each is what the engine leaves of a job submitted with [`request`] whose first attempt
/// won with [`result`]: the job, its activity, that attempt and the five events. They
/// finished 1 ms apart, oldest first, the last 1 ms ago; their ids are UUIDv7-shaped at
/// those times and carry the first three characters of `run_id` (lowercase hexadecimal,
/// else [`SeedError::RunId`]). A key already taken fails the whole seeding.
pub async fn seed(database_url: &str, run_id: &str, jobs: u64) -> Result<(), SeedError> {
    let tag: String = run_id.chars().take(3).collect();
    if tag.len() != 3 || !tag.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(SeedError::RunId(run_id.to_owned()));
    }
    let rows = i64::try_from(jobs).map_err(|_| SeedError::TooMany(jobs))?;
    let request = request();
    let input = serde_json::to_string(&request.input)?;
    let options = serde_json::to_string(&ActivityOptions::default())?;
    let result = serde_json::to_string(&result())?;
    let fingerprint = request.fingerprint();
    let key_prefix = key_prefix(run_id);
    if is_postgres(database_url) {
        // The bulk insert is slow on purpose: no slow-statement warning with the whole SQL.
        let connect =
            sqlx::postgres::PgConnectOptions::from_str(database_url)?.disable_statement_logging();
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect_with(connect)
            .await?;
        let mut tx = pool.begin().await?;
        // The parameters of migrations/seed/README.md, in order.
        for statement in POSTGRES {
            sqlx::query(statement)
                .bind(rows)
                .bind(&tag)
                .bind(OWNER)
                .bind(&key_prefix)
                .bind(&fingerprint)
                .bind(ACTIVITY)
                .bind(ACTIVITY)
                .bind(&input)
                .bind(&[PROVIDER][..])
                .bind(&options)
                .bind(&result)
                .bind(WORKER_ID)
                .bind(PROVIDER)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        pool.close().await;
    } else if database_url.starts_with("sqlite:") {
        let connect = sqlx::sqlite::SqliteConnectOptions::from_str(database_url)?
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30))
            .disable_statement_logging();
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(connect)
            .await?;
        // SQLite's store stamps times from this process's clock, in µs since the epoch.
        let base_us = chrono::Utc::now().timestamp_micros() - (rows + 1) * 1000;
        let providers = serde_json::to_string(&[PROVIDER])?;
        let mut tx = pool.begin().await?;
        // The same parameters, and ?14.
        for statement in SQLITE {
            sqlx::query(statement)
                .bind(rows)
                .bind(&tag)
                .bind(OWNER)
                .bind(&key_prefix)
                .bind(&fingerprint)
                .bind(ACTIVITY)
                .bind(ACTIVITY)
                .bind(&input)
                .bind(&providers)
                .bind(&options)
                .bind(&result)
                .bind(WORKER_ID)
                .bind(PROVIDER)
                .bind(base_us)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        pool.close().await;
    } else {
        return Err(SeedError::UnknownStore(database_url.to_owned()));
    }
    Ok(())
}

/// Pre-fills `rows` finished activity jobs ([`seed`]), settles them on PostgreSQL, and
/// prints the RESULT line.
pub(super) async fn prefill(database_url: &str, run_id: &str, rows: u64) -> Result<(), String> {
    let start = Instant::now();
    seed(database_url, run_id, rows)
        .await
        .map_err(|e| format!("history: {e}"))?;
    if is_postgres(database_url) {
        settle(database_url).await?;
    }
    let elapsed = start.elapsed();
    println!(
        "RESULT workload=history rows={rows} seconds={:.3}",
        elapsed.as_secs_f64()
    );
    eprintln!(
        "bench history: {rows} finished jobs (with activity, winning attempt and events) of owner {OWNER} inserted in {:.3} s",
        elapsed.as_secs_f64()
    );
    Ok(())
}

/// What PostgreSQL would soon do by itself after a bulk insert, done before the run
/// rather than during it (`sql/history_vacuum.sql`, `sql/history_checkpoint.sql`); a
/// CHECKPOINT refused (a role without the right) is only warned about.
async fn settle(database_url: &str) -> Result<(), String> {
    let connect = sqlx::postgres::PgConnectOptions::from_str(database_url)
        .map_err(|e| format!("history: {e}"))?
        .disable_statement_logging();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(connect)
        .await
        .map_err(|e| format!("history: cannot connect to the database: {e}"))?;
    sqlx::raw_sql(VACUUM)
        .execute(&pool)
        .await
        .map_err(|e| format!("history: VACUUM failed: {e}"))?;
    if let Err(e) = sqlx::raw_sql(CHECKPOINT).execute(&pool).await {
        tracing::warn!(error = %e, "history: no CHECKPOINT after the pre-fill; its write-back may overlap the run");
    }
    pool.close().await;
    Ok(())
}

fn is_postgres(database_url: &str) -> bool {
    database_url.starts_with("postgres://") || database_url.starts_with("postgresql://")
}
