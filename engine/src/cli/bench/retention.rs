//! `--events-layout` and `--workload retention` (PostgreSQL only): what pruning a share of
//! the history costs with job_events as the migrations make it (`plain`) and with
//! job_events partitioned by job id, which is by time since job ids are UUIDv7
//! (`partitioned`, made by the bench: the engine's migrations do not do it).
//!
//! The workload first runs e2e on the layout (the write path), then prunes the oldest
//! half of the `--history` jobs. In both layouts the jobs, activities and attempts go as
//! today: the store's own statements (`lock_prunable_jobs.sql`, then
//! `delete_pruned_jobs.sql`), [`PRUNE_BATCH`] jobs per transaction, each batch after the
//! last. `plain` deletes the events with them (today's retention pass, unchanged);
//! `partitioned` deletes the same rows but the events, then drops the partitions of
//! job_events whose id range lies wholly before the cutoff (`sql/events_drop.sql`).
//! The cutoff is fixed for the whole pass (each transaction turns it into the retention
//! its clock needs), so both layouts prune the same jobs however long they take.

use std::str::FromStr;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use clap::ValueEnum;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::ConnectOptions;
use uuid::Uuid;

use super::history::OWNER;
use super::Bench;
use crate::domain::PRUNE_BATCH;

/// How job_events is laid out for the run (`--events-layout`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventsLayout {
    /// As the migrations make it: one table.
    Plain,
    /// Partitioned by ranges of job id (time): the history in [`PARTS`] partitions,
    /// newer jobs in one more.
    Partitioned,
}

impl EventsLayout {
    fn name(self) -> &'static str {
        match self {
            EventsLayout::Plain => "plain",
            EventsLayout::Partitioned => "partitioned",
        }
    }
}

/// The partitions the history's events are spread over, oldest first.
const PARTS: u32 = 10;
/// The share of the history the retention workload prunes: the oldest half, as many
/// partitions' worth.
const PRUNED_SHARE: f64 = 0.5;

const LAYOUT: &str = include_str!("sql/events_layout.sql");
const UUID_FUNCTION: &str = include_str!("sql/events_uuid_function.sql");
const PARTITION_FUNCTION: &str = include_str!("sql/events_partition_function.sql");
const DROP_FUNCTION: &str = include_str!("sql/events_drop_function.sql");
const PARTITION: &str = include_str!("sql/events_partition.sql");
const DROP: &str = include_str!("sql/events_drop.sql");
const CUTOFF: &str = include_str!("sql/retention_cutoff.sql");
const AGE: &str = include_str!("sql/retention_age.sql");
/// The store's own retention statements, run as the store runs them.
const LOCK_PRUNABLE: &str = include_str!("../../store/postgres/sql/lock_prunable_jobs.sql");
const DELETE_PRUNED: &str = include_str!("../../store/postgres/sql/delete_pruned_jobs.sql");
const DELETE_KEEP_EVENTS: &str = include_str!("sql/retention_delete_keep_events.sql");
const SIZES: &str = include_str!("sql/retention_sizes.sql");
const COUNTS: &str = include_str!("sql/retention_counts.sql");
const ORPHANS: &str = include_str!("sql/retention_orphans.sql");
const WAL_LSN: &str = include_str!("sql/wal_lsn.sql");
const OTHER_COMMITS: &str = include_str!("sql/other_commits.sql");
const VACUUM: &str = include_str!("sql/retention_vacuum.sql");

/// One connection to the bench's database, without statement logging (the statements
/// are long and slow on purpose).
async fn connect(database_url: &str) -> Result<PgPool, String> {
    let options = PgConnectOptions::from_str(database_url)
        .map_err(|e| format!("events layout: {e}"))?
        .disable_statement_logging();
    PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .map_err(|e| format!("cannot connect to the database: {e}"))
}

fn is_postgres(database_url: &str) -> bool {
    super::store_of(database_url) == "postgres"
}

/// Puts job_events of the migrated database at `database_url` in `layout` before the
/// history (of `history` jobs, 1 ms apart) is seeded. `plain` only checks; `partitioned`
/// needs a database whose job_events is still plain, and spreads the history about to be
/// seeded over [`PARTS`] partitions.
pub(super) async fn apply_layout(
    database_url: &str,
    layout: EventsLayout,
    history: u64,
) -> Result<(), String> {
    if !is_postgres(database_url) {
        return match layout {
            EventsLayout::Plain => Ok(()),
            EventsLayout::Partitioned => {
                Err("--events-layout partitioned needs PostgreSQL".to_owned())
            }
        };
    }
    let pool = connect(database_url).await?;
    let outcome = apply_layout_on(&pool, layout, history).await;
    pool.close().await;
    outcome
}

async fn apply_layout_on(pool: &PgPool, layout: EventsLayout, history: u64) -> Result<(), String> {
    let partitioned: bool = sqlx::query_scalar(LAYOUT)
        .fetch_one(pool)
        .await
        .map_err(|e| format!("events layout: {e}"))?;
    match (layout, partitioned) {
        (EventsLayout::Plain, false) => Ok(()),
        (_, true) => Err(
            "job_events of this database is already partitioned (an earlier --events-layout \
             partitioned): use a fresh database"
                .to_owned(),
        ),
        (EventsLayout::Partitioned, false) => {
            for function in [UUID_FUNCTION, PARTITION_FUNCTION, DROP_FUNCTION] {
                sqlx::raw_sql(function)
                    .execute(pool)
                    .await
                    .map_err(|e| format!("events layout: {e}"))?;
            }
            // The history about to be seeded ends now and spans 1 ms per job.
            let span = (history.max(u64::from(PARTS)) as f64) / 1000.0;
            sqlx::query(PARTITION)
                .bind(span)
                .bind(span / f64::from(PARTS))
                .bind(PARTS as i32)
                .execute(pool)
                .await
                .map_err(|e| format!("events layout: partitioning job_events failed: {e}"))?;
            eprintln!(
                "bench: job_events partitioned by job id, {PARTS} partitions of {:.3} s for the history, one for newer jobs",
                span / f64::from(PARTS)
            );
            Ok(())
        }
    }
}

/// What one prune measured.
struct Pruned {
    jobs: u64,
    partitions_dropped: i32,
    seconds: f64,
    /// Of `seconds`, the partitions' drop (partitioned).
    drop_seconds: f64,
    wal_bytes: u64,
}

impl Bench {
    /// `--workload retention`: e2e on this layout, then the oldest half of the history
    /// pruned; prints the RESULT line `workload=retention layout=…`.
    pub(super) async fn retention(&self) -> Result<(), String> {
        let database_url = self
            .database_url
            .as_deref()
            .filter(|url| is_postgres(url))
            .ok_or("--workload retention needs PostgreSQL (--database-url postgres://…)")?;
        self.e2e().await?;
        let pool = connect(database_url).await?;
        let outcome = self.retention_on(&pool).await;
        pool.close().await;
        outcome
    }

    async fn retention_on(&self, pool: &PgPool) -> Result<(), String> {
        let db = |e: sqlx::Error| format!("retention: {e}");
        let layout = self.events_layout;
        let cutoff: Option<DateTime<Utc>> = sqlx::query_scalar(CUTOFF)
            .bind(OWNER)
            .bind(PRUNED_SHARE)
            .fetch_one(pool)
            .await
            .map_err(db)?;
        let cutoff = cutoff.ok_or("--workload retention needs --history N (jobs to prune)")?;
        let (history_jobs, events_before): (i64, i64) = sqlx::query_as(COUNTS)
            .bind(OWNER)
            .fetch_one(pool)
            .await
            .map_err(db)?;
        let sizes_before = sizes(pool).await?;
        let others_before = other_commits(pool).await?;

        let pruned = prune(pool, layout, cutoff).await?;
        let sizes_after = sizes(pool).await?;
        let (history_left, events_left): (i64, i64) = sqlx::query_as(COUNTS)
            .bind(OWNER)
            .fetch_one(pool)
            .await
            .map_err(db)?;
        // The counts hold: every history job pruned or left, none left without its events.
        if u64::try_from(history_jobs - history_left).ok() != Some(pruned.jobs) {
            return Err(format!(
                "retention: {history_jobs} history jobs, {history_left} left, but {} pruned",
                pruned.jobs
            ));
        }
        let orphans: i64 = sqlx::query_scalar(ORPHANS)
            .fetch_one(pool)
            .await
            .map_err(db)?;
        if orphans != 0 {
            return Err(format!(
                "retention: {orphans} jobs left without their events"
            ));
        }

        let lsn = wal_lsn(pool).await?;
        let start = Instant::now();
        sqlx::raw_sql(VACUUM).execute(pool).await.map_err(db)?;
        let vacuum_seconds = start.elapsed().as_secs_f64();
        let vacuum_wal = wal_lsn(pool).await?.saturating_sub(lsn);
        let sizes_vacuumed = sizes(pool).await?;
        let others = other_commits(pool).await?.saturating_sub(others_before);

        let mb = |bytes: i64| bytes as f64 / 1_048_576.0;
        let extra = format!(
            " layout={} history_jobs={history_jobs} history_left={history_left} events_before={events_before} \
             events_left={events_left} partitions_dropped={} drop_seconds={:.3} wal_mb={:.1} \
             events_mb_before={:.1} events_mb_after={:.1} events_mb_vacuumed={:.1} \
             others_mb_before={:.1} others_mb_after={:.1} others_mb_vacuumed={:.1} \
             vacuum_seconds={vacuum_seconds:.3} vacuum_wal_mb={:.1} other_db_xacts={others}",
            layout.name(),
            pruned.partitions_dropped,
            pruned.drop_seconds,
            pruned.wal_bytes as f64 / 1_048_576.0,
            mb(sizes_before.0),
            mb(sizes_after.0),
            mb(sizes_vacuumed.0),
            mb(sizes_before.1),
            mb(sizes_after.1),
            mb(sizes_vacuumed.1),
            vacuum_wal as f64 / 1_048_576.0,
        );
        self.result(
            "retention",
            pruned.jobs,
            Duration::from_secs_f64(pruned.seconds),
            &extra,
        );
        eprintln!(
            "bench retention ({}): {} of {history_jobs} history jobs pruned in {:.3} s, {:.1} MB of WAL; \
             job_events {:.1} MB → {:.1} MB ({:.1} MB after VACUUM, {vacuum_seconds:.3} s); \
             {others} transactions in other databases meanwhile",
            layout.name(),
            pruned.jobs,
            pruned.seconds,
            pruned.wal_bytes as f64 / 1_048_576.0,
            mb(sizes_before.0),
            mb(sizes_after.0),
            mb(sizes_vacuumed.0),
        );
        Ok(())
    }
}

/// Prunes every job finished before `cutoff` as the store's retention pass does, then,
/// partitioned, drops the partitions wholly before it.
async fn prune(
    pool: &PgPool,
    layout: EventsLayout,
    cutoff: DateTime<Utc>,
) -> Result<Pruned, String> {
    let db = |e: sqlx::Error| format!("retention: {e}");
    let delete = match layout {
        EventsLayout::Plain => DELETE_PRUNED,
        EventsLayout::Partitioned => DELETE_KEEP_EVENTS,
    };
    let lsn = wal_lsn(pool).await?;
    let start = Instant::now();
    let mut jobs = 0u64;
    let mut after: Option<Uuid> = None;
    loop {
        let mut tx = pool.begin().await.map_err(db)?;
        let retention: f64 = sqlx::query_scalar(AGE)
            .bind(cutoff)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        let doomed: Vec<(String, Uuid)> = sqlx::query_as(LOCK_PRUNABLE)
            .bind(retention)
            .bind(PRUNE_BATCH)
            .bind(after)
            .fetch_all(&mut *tx)
            .await
            .map_err(db)?;
        let chosen = doomed.len();
        if chosen == 0 {
            tx.commit().await.map_err(db)?;
            break;
        }
        let (owners, ids): (Vec<String>, Vec<Uuid>) = doomed.into_iter().unzip();
        let deleted: i64 = sqlx::query_scalar(delete)
            .bind(&owners)
            .bind(&ids)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        jobs += u64::try_from(deleted).unwrap_or(0);
        after = ids.iter().max().copied().or(after);
        if (chosen as i64) < PRUNE_BATCH {
            break;
        }
    }
    let dropping = Instant::now();
    let partitions_dropped = match layout {
        EventsLayout::Plain => 0,
        EventsLayout::Partitioned => sqlx::query_scalar(DROP)
            .bind(cutoff)
            .fetch_one(pool)
            .await
            .map_err(db)?,
    };
    let drop_seconds = dropping.elapsed().as_secs_f64();
    let seconds = start.elapsed().as_secs_f64();
    let wal_bytes = wal_lsn(pool).await?.saturating_sub(lsn);
    Ok(Pruned {
        jobs,
        partitions_dropped,
        seconds,
        drop_seconds,
        wal_bytes,
    })
}

/// Bytes of job_events, and of jobs, activities and attempts together.
async fn sizes(pool: &PgPool) -> Result<(i64, i64), String> {
    sqlx::query_as(SIZES)
        .fetch_one(pool)
        .await
        .map_err(|e| format!("retention: sizes: {e}"))
}

async fn other_commits(pool: &PgPool) -> Result<u64, String> {
    let n: i64 = sqlx::query_scalar(OTHER_COMMITS)
        .fetch_one(pool)
        .await
        .map_err(|e| format!("retention: {e}"))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The cluster's WAL position in bytes.
async fn wal_lsn(pool: &PgPool) -> Result<u64, String> {
    let text: String = sqlx::query_scalar(WAL_LSN)
        .fetch_one(pool)
        .await
        .map_err(|e| format!("retention: {e}"))?;
    parse_lsn(&text).ok_or_else(|| format!("retention: cannot read the WAL position `{text}`"))
}

/// `X/Y` (two hexadecimal halves) as one number.
fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.split_once('/')?;
    let high = u64::from_str_radix(high, 16).ok()?;
    let low = u64::from_str_radix(low, 16).ok()?;
    Some((high << 32) | low)
}

#[cfg(test)]
mod tests {
    use super::parse_lsn;

    #[test]
    fn a_wal_position_reads_as_its_two_halves() {
        assert_eq!(parse_lsn("16/B374D848"), Some((0x16 << 32) | 0xB374_D848));
        assert_eq!(parse_lsn("0/0"), Some(0));
        assert_eq!(parse_lsn("nonsense"), None);
    }
}
