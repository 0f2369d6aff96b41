//! `--workload floor` (PostgreSQL only): the bare SQL of a job's life (insert, claim with
//! `SKIP LOCKED`, compare-and-swap) on a scratch table, the baseline the engine is
//! measured against.
//!
//! The statements are `sql/floor_*.sql`. Their table, `bench_floor`, lives in a schema of
//! the run's own (`bench_floor_<run id>`), which the floor's connections have as their
//! `search_path` and which is dropped afterwards, so runs on one database never meet.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::Row;
use uuid::Uuid;

use super::Bench;

/// The scratch table and the index of its claims.
const CREATE: &str = include_str!("sql/floor_create.sql");
/// A submission.
const INSERT: &str = include_str!("sql/floor_insert.sql");
/// A claim.
const CLAIM: &str = include_str!("sql/floor_claim.sql");
/// A completion by compare-and-swap.
const CAS: &str = include_str!("sql/floor_cas.sql");

impl Bench {
    /// The SQL floor; `None` when skipped.
    pub(super) async fn floor(&self) -> Result<Option<f64>, String> {
        let Some(database_url) = self.database_url.as_deref() else {
            println!(
                "RESULT workload=floor store={} skipped=no_database_url",
                self.store
            );
            return Ok(None);
        };
        if self.store != "postgres" {
            println!(
                "RESULT workload=floor store={} skipped=not_postgres",
                self.store
            );
            eprintln!("bench floor: skipped (PostgreSQL only)");
            return Ok(None);
        }
        // The run's own schema. DDL takes no parameters, so its name is written into the
        // two statements that create and drop it: `bench_floor_` and the run id, 12 hex
        // digits this process minted.
        let schema = format!("bench_floor_{}", self.run_id);
        let connect = sqlx::postgres::PgConnectOptions::from_str(database_url)
            .map_err(|e| format!("floor: {e}"))?
            .options([("search_path", schema.as_str())]);
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(self.concurrency as u32)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(connect)
            .await
            .map_err(|e| format!("floor: cannot connect to the database: {e}"))?;
        let measured = self.floor_measure(&pool, &schema).await;
        let dropped = sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .execute(&pool)
            .await;
        pool.close().await;
        let (elapsed, misses, cas_failures) = measured?;
        dropped.map_err(|e| format!("floor: cannot drop {schema}: {e}"))?;
        let n = self.jobs;
        let rate = self.result("floor", n, elapsed, "");
        eprintln!(
            "bench floor: {n} bare job cycles (insert, claim with SKIP LOCKED, CAS; autocommit) on {} connections in {:.3} s: \
             {rate:.1}/s ({misses} empty claims retried, {cas_failures} CAS misses)",
            self.concurrency,
            elapsed.as_secs_f64()
        );
        Ok(Some(rate))
    }

    /// Returns (elapsed, empty claims, failed CAS).
    async fn floor_measure(
        &self,
        pool: &sqlx::PgPool,
        schema: &str,
    ) -> Result<(Duration, u64, u64), String> {
        sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
            .execute(pool)
            .await
            .map_err(|e| format!("floor: cannot create {schema}: {e}"))?;
        sqlx::raw_sql(CREATE)
            .execute(pool)
            .await
            .map_err(|e| format!("floor: cannot create {schema}.bench_floor: {e}"))?;
        // Every connection is open before the clock starts.
        let mut connections = Vec::with_capacity(self.concurrency);
        for _ in 0..self.concurrency {
            connections.push(
                pool.acquire()
                    .await
                    .map_err(|e| format!("floor: cannot open a connection: {e}"))?,
            );
        }
        let n = self.jobs;
        let next = Arc::new(AtomicU64::new(0));
        let misses = Arc::new(AtomicU64::new(0));
        let cas_failures = Arc::new(AtomicU64::new(0));
        let key_prefix = format!("floor-{}-", self.run_id);
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(self.concurrency);
        for mut connection in connections {
            let (next, misses, cas_failures, key_prefix) = (
                next.clone(),
                misses.clone(),
                cas_failures.clone(),
                key_prefix.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let result = json!({ "ok": true });
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<(), String>(());
                    }
                    sqlx::query(INSERT)
                        .bind("bench")
                        .bind(Uuid::now_v7())
                        .bind(format!("{key_prefix}{i}"))
                        .execute(&mut *connection)
                        .await
                        .map_err(|e| format!("floor insert: {e}"))?;
                    let mut claimed = None;
                    for _ in 0..10 {
                        claimed = sqlx::query(CLAIM)
                            .fetch_optional(&mut *connection)
                            .await
                            .map_err(|e| format!("floor claim: {e}"))?;
                        if claimed.is_some() {
                            break;
                        }
                        misses.fetch_add(1, Ordering::Relaxed);
                        tokio::task::yield_now().await;
                    }
                    let Some(row) = claimed else { continue };
                    let id: Uuid = row.try_get("id").map_err(|e| format!("floor claim: {e}"))?;
                    let version: i64 = row
                        .try_get("version")
                        .map_err(|e| format!("floor claim: {e}"))?;
                    let done = sqlx::query(CAS)
                        .bind(id)
                        .bind(version)
                        .bind(&result)
                        .execute(&mut *connection)
                        .await
                        .map_err(|e| format!("floor CAS: {e}"))?;
                    if done.rows_affected() != 1 {
                        cas_failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        let mut first_error = None;
        for task in tasks {
            let outcome = match task.await {
                Ok(outcome) => outcome,
                Err(e) => Err(format!("a floor task failed: {e}")),
            };
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        let elapsed = start.elapsed();
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok((
            elapsed,
            misses.load(Ordering::Relaxed),
            cas_failures.load(Ordering::Relaxed),
        ))
    }
}
