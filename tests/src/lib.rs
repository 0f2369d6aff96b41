//! The test harness every integration test uses: a fresh PostgreSQL database per test,
//! migrated, and dropped afterwards (even when the test panics), so tests run in
//! parallel without seeing each other.
//!
//! The server is found at `ONCEFLOW_TEST_DATABASE_URL` (a URL of a database the harness
//! may connect to in order to create and drop others), by default
//! `postgres://postgres@127.0.0.1:5432/postgres`.
//!
//! With `ONCEFLOW_TEST_CITUS=1` that server is a Citus coordinator (`scripts/citus-check`):
//! each PostgreSQL test database is then created on every node, given the coordinator's
//! worker nodes, migrated and distributed as `onceflow migrate --citus` does (in
//! [`CITUS_TEST_SHARDS`] shards), so every rule's PostgreSQL variant runs on Citus.

pub mod cluster;
pub mod server;
pub mod tls;
pub mod torture;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::model::{
    ActivityOptions, ActivityTask, AttemptStatus, AttemptView, RetryPolicy, Scope,
};
use onceflow_engine::store::postgres::PgStore;
use onceflow_engine::store::sqlite::SqliteStore;
use onceflow_engine::store::Store;
use onceflow_engine::{ClaimRequest, Engine, JobRequest};
use serde_json::{json, Value};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::SqlitePool;
use sqlx::{Connection, Executor, PgConnection, PgPool};
use tokio::sync::{Semaphore, SemaphorePermit};

/// The admin URL of the PostgreSQL server tests run against.
pub fn admin_url() -> String {
    std::env::var("ONCEFLOW_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// Whether the PostgreSQL test databases are made on a Citus cluster
/// (`ONCEFLOW_TEST_CITUS=1`; see the crate's documentation).
pub fn on_citus() -> bool {
    std::env::var("ONCEFLOW_TEST_CITUS").is_ok_and(|v| v == "1")
}

/// Shards per distributed table in a Citus test database: few, so that making one stays
/// quick.
pub const CITUS_TEST_SHARDS: u32 = 4;

/// Creates database `name` on the Citus cluster whose coordinator `admin` connects to,
/// with the extension on every node and the coordinator's worker nodes registered in it.
async fn create_citus_database(admin: &PgConnectOptions, name: &str) {
    let mut conn = PgConnection::connect_with(admin)
        .await
        .expect("connect to the Citus coordinator (ONCEFLOW_TEST_DATABASE_URL)");
    // One test database is made at a time, in every test process: registering the nodes
    // in two at once races on the nodes' roles ("tuple concurrently updated").
    conn.execute("SELECT pg_advisory_lock(20261207)")
        .await
        .expect("take the Citus set-up turn");
    conn.execute("SET citus.enable_create_database_propagation = on")
        .await
        .expect("turn on Citus's CREATE DATABASE propagation");
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .expect("create the test database on every Citus node");
    let nodes: Vec<(String, i32, i32)> = sqlx::query_as(
        "SELECT nodename::text, nodeport, groupid FROM pg_dist_node
         WHERE noderole = 'primary' AND isactive ORDER BY groupid",
    )
    .fetch_all(&mut conn)
    .await
    .expect("read the Citus nodes");
    let mut coordinator = None;
    for (host, port, group) in &nodes {
        let options = admin.clone().host(host).port(*port as u16).database(name);
        let mut node = PgConnection::connect_with(&options)
            .await
            .expect("connect to a Citus node's test database");
        node.execute("CREATE EXTENSION IF NOT EXISTS citus")
            .await
            .expect("create the citus extension");
        if *group == 0 {
            coordinator = Some(node);
        } else {
            node.close().await.ok();
        }
    }
    let mut coordinator = coordinator.expect("the Citus coordinator is a node");
    for (host, port, group) in &nodes {
        let add = if *group == 0 {
            "SELECT citus_set_coordinator_host($1, $2)"
        } else {
            "SELECT citus_add_node($1, $2)"
        };
        sqlx::query(add)
            .bind(host)
            .bind(port)
            .execute(&mut coordinator)
            .await
            .expect("register a Citus node in the test database");
    }
    coordinator.close().await.ok();
    // Closing the session ends the turn.
    conn.close().await.ok();
}

/// Tests that open dozens of connections take turns, so that parallel tests stay under
/// the server's connection limit.
static HEAVY: Semaphore = Semaphore::const_new(1);

/// The stores every rule runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL: a fresh database per test.
    Postgres,
    /// SQLite: a fresh database file per test.
    Sqlite,
}

/// A fresh, migrated database that is dropped (or deleted) when this value is.
pub struct TestDb {
    backend: Backend,
    name: String,
    url: String,
    store: Arc<dyn Store>,
    pg: Option<(PgConnectOptions, PgPool)>,
    sqlite: Option<(std::path::PathBuf, SqlitePool)>,
}

impl TestDb {
    /// Creates and migrates a new database on `backend`.
    pub async fn new(backend: Backend) -> TestDb {
        capture_engine_logs();
        let name = format!("onceflow_test_{}", uuid::Uuid::new_v4().simple());
        let db = match backend {
            Backend::Postgres => {
                let admin: PgConnectOptions = admin_url()
                    .parse()
                    .expect("ONCEFLOW_TEST_DATABASE_URL parses");
                if on_citus() {
                    create_citus_database(&admin, &name).await;
                } else {
                    let mut conn = PgConnection::connect_with(&admin).await.expect(
                        "connect to the PostgreSQL admin database (set ONCEFLOW_TEST_DATABASE_URL)",
                    );
                    conn.execute(format!("CREATE DATABASE {name}").as_str())
                        .await
                        .expect("create the test database");
                    conn.close().await.ok();
                }
                // As `PgStore::connect` runs the engine's connections.
                let options = admin.database(&name).options([("jit", "off")]);
                let pool = PgPoolOptions::new()
                    .max_connections(5)
                    .connect_with(options.clone())
                    .await
                    .expect("connect to the test database");
                let admin = admin_url();
                // The admin URL with the test database's name, its parameters (such as
                // `?sslmode=disable`) kept.
                let (base, query) = admin.split_at(admin.find('?').unwrap_or(admin.len()));
                let url = match base.rfind('/') {
                    Some(i) => format!("{}/{}{query}", &base[..i], name),
                    None => format!("{base}/{name}{query}"),
                };
                TestDb {
                    backend,
                    store: Arc::new(PgStore::new(pool.clone())),
                    name,
                    url,
                    pg: Some((options, pool)),
                    sqlite: None,
                }
            }
            Backend::Sqlite => {
                let path = std::env::temp_dir().join(format!("{name}.db"));
                let url = format!("sqlite://{}", path.display());
                let store = SqliteStore::connect(&url, 8)
                    .await
                    .expect("open the SQLite test database");
                let pool = store.pool().clone();
                TestDb {
                    backend,
                    store: Arc::new(store),
                    name,
                    url,
                    pg: None,
                    sqlite: Some((path, pool)),
                }
            }
        };
        db.engine().migrate().await.expect("migrations apply");
        if let (true, Some((_, pool))) = (on_citus(), &db.pg) {
            let left = PgStore::new(pool.clone())
                .distribute(Some(CITUS_TEST_SHARDS))
                .await
                .expect("the tables distribute on Citus");
            assert!(left.is_empty(), "tables left undistributed: {left:?}");
        }
        db
    }

    /// Which store this database is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL of the test database, for child processes (`postgres://…` or `sqlite://…`).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The store on this database.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// An engine on this database sharing one store.
    pub fn engine(&self) -> Engine {
        Engine::new(self.store.clone())
    }

    /// `n` engines, each with its own connections: as many separate database sessions as
    /// a fleet of `n` engine processes would have. Holds the heavy-test turn while they
    /// live.
    pub async fn separate_engines(&self, n: usize) -> (Vec<Engine>, SemaphorePermit<'static>) {
        let permit = HEAVY.acquire().await.expect("semaphore is never closed");
        let mut engines = Vec::with_capacity(n);
        for _ in 0..n {
            let store: Arc<dyn Store> = match &self.pg {
                Some((options, _)) => {
                    let pool = PgPoolOptions::new()
                        .max_connections(1)
                        .min_connections(1)
                        .connect_with(options.clone())
                        .await
                        .expect("connect a separate session");
                    Arc::new(PgStore::new(pool))
                }
                None => Arc::new(
                    SqliteStore::connect(&self.url, 2)
                        .await
                        .expect("open a separate SQLite store"),
                ),
            };
            engines.push(Engine::new(store));
        }
        (engines, permit)
    }

    /// A connection of its own to the PostgreSQL test database (for session state such
    /// as prepared statements); `None` on SQLite.
    pub async fn pg_connection(&self) -> Option<PgConnection> {
        match &self.pg {
            Some((options, _)) => Some(
                PgConnection::connect_with(options)
                    .await
                    .expect("connect to the test database"),
            ),
            None => None,
        }
    }

    /// Runs a statement; the database's error text on failure.
    pub async fn execute(&self, sql: &str) -> Result<u64, String> {
        match (&self.pg, &self.sqlite) {
            (Some((_, pool)), _) => sqlx::query(sql)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
                .map_err(|e| e.to_string()),
            (_, Some((_, pool))) => sqlx::query(sql)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
                .map_err(|e| e.to_string()),
            _ => unreachable!("a test database has a pool"),
        }
    }

    /// How many sessions wait for a row or table lock in this database now (on Citus,
    /// anywhere in the cluster: a statement routed to a shard waits on the shard's node).
    pub async fn lock_waiters(&self) -> i64 {
        if on_citus() {
            self.count("SELECT count(*) FROM citus_lock_waits").await
        } else {
            self.count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
                .await
        }
    }

    /// The integer a query answers (e.g. a `count(*)`).
    pub async fn count(&self, sql: &str) -> i64 {
        match (&self.pg, &self.sqlite) {
            (Some((_, pool)), _) => sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql),
            (_, Some((_, pool))) => sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql),
            _ => unreachable!("a test database has a pool"),
        }
    }

    /// The text column a query answers, row by row.
    pub async fn strings(&self, sql: &str) -> Vec<String> {
        match (&self.pg, &self.sqlite) {
            (Some((_, pool)), _) => sqlx::query_scalar(sql).fetch_all(pool).await.expect(sql),
            (_, Some((_, pool))) => sqlx::query_scalar(sql).fetch_all(pool).await.expect(sql),
            _ => unreachable!("a test database has a pool"),
        }
    }

    /// The boolean a query answers.
    pub async fn boolean(&self, sql: &str) -> bool {
        match (&self.pg, &self.sqlite) {
            (Some((_, pool)), _) => sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql),
            (_, Some((_, pool))) => sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql),
            _ => unreachable!("a test database has a pool"),
        }
    }

    /// The database's clock now: PostgreSQL's `clock_timestamp()`; on SQLite, whose store
    /// reads this process's clock (at each write transaction's `BEGIN`), this process's.
    /// For tests that compare what an engine stamped with the time the database keeps.
    pub async fn clock(&self) -> chrono::DateTime<chrono::Utc> {
        match &self.pg {
            Some((_, pool)) => sqlx::query_scalar("SELECT clock_timestamp()")
                .fetch_one(pool)
                .await
                .expect("read the database's clock"),
            None => chrono::Utc::now(),
        }
    }

    /// Panics if the database holds a state no rule allows, on every store, after each
    /// rule:
    /// - a row without its parent: an event, activity, timer, signal or patch without
    ///   its job, an attempt without its activity or with a job other than its
    ///   activity's (PostgreSQL keeps no foreign key on `job_events`, `activities` or
    ///   `attempts`: the hot path's rows rely on the statements that write them creating
    ///   or holding their parents, so this is where a statement that wrote an orphan
    ///   would show);
    /// - a job's history with a gap: its events are numbered 1, 2, …, n (`max(seq) + 1`
    ///   under the job's lock), none missing, none twice, and every job has its first;
    /// - a slot won by no attempt: an activity's or a job's `completed_by` names one
    ///   `succeeded` attempt of that activity or job, and no other attempt of the
    ///   activity `succeeded` (invariant 4: exactly one winner);
    /// - an activity job whose result is not its activity's: its `completed_by` and
    ///   `result` are those of its activity.
    pub async fn assert_integrity(&self) {
        let broken = self
            .strings(
                "SELECT 'job_events without their job' FROM job_events e
                  WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.owner_id = e.owner_id AND j.id = e.job_id)
                 UNION ALL
                 SELECT 'activities without their job' FROM activities a
                  WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.owner_id = a.owner_id AND j.id = a.job_id)
                 UNION ALL
                 SELECT 'attempts without their activity' FROM attempts t
                  WHERE NOT EXISTS (SELECT 1 FROM activities a
                                     WHERE a.owner_id = t.owner_id AND a.id = t.activity_id AND a.job_id = t.job_id)
                 UNION ALL
                 SELECT 'timers without their job' FROM timers t
                  WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.owner_id = t.owner_id AND j.id = t.job_id)
                 UNION ALL
                 SELECT 'signals without their job' FROM signals s
                  WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.owner_id = s.owner_id AND j.id = s.job_id)
                 UNION ALL
                 SELECT 'workflow_patches without their job' FROM workflow_patches p
                  WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.owner_id = p.owner_id AND j.id = p.job_id)
                 UNION ALL
                 SELECT 'job ' || CAST(e.job_id AS TEXT) || ': events numbered with a gap or twice'
                   FROM job_events e GROUP BY e.owner_id, e.job_id
                 HAVING min(e.seq) <> 1 OR max(e.seq) <> count(*) OR count(DISTINCT e.seq) <> count(*)
                 UNION ALL
                 SELECT 'job ' || CAST(j.id AS TEXT) || ': no events' FROM jobs j
                  WHERE NOT EXISTS (SELECT 1 FROM job_events e WHERE e.owner_id = j.owner_id AND e.job_id = j.id)
                 UNION ALL
                 SELECT 'activity ' || CAST(a.id AS TEXT) || ': completed_by names no succeeded attempt of it'
                   FROM activities a
                  WHERE a.completed_by IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM attempts t
                                     WHERE t.owner_id = a.owner_id AND t.activity_id = a.id
                                       AND t.id = a.completed_by AND t.status = 'succeeded')
                 UNION ALL
                 SELECT 'activity ' || CAST(a.id AS TEXT) || ': attempt ' || CAST(t.id AS TEXT)
                        || ' succeeded but is not its completed_by'
                   FROM attempts t JOIN activities a ON a.owner_id = t.owner_id AND a.id = t.activity_id
                  WHERE t.status = 'succeeded' AND a.completed_by IS DISTINCT FROM t.id
                 UNION ALL
                 SELECT 'job ' || CAST(j.id AS TEXT) || ': completed_by names no succeeded attempt of it'
                   FROM jobs j
                  WHERE j.completed_by IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM attempts t
                                     WHERE t.owner_id = j.owner_id AND t.job_id = j.id
                                       AND t.id = j.completed_by AND t.status = 'succeeded')
                 UNION ALL
                 SELECT 'activity job ' || CAST(j.id AS TEXT) || ': completed_by or result not its activity''s'
                   FROM jobs j JOIN activities a ON a.owner_id = j.owner_id AND a.job_id = j.id
                  WHERE j.kind = 'activity' AND j.completed_by IS NOT NULL
                    AND (a.completed_by IS DISTINCT FROM j.completed_by OR a.result IS DISTINCT FROM j.result)",
            )
            .await;
        assert!(
            broken.is_empty(),
            "the database holds states no rule allows: {broken:?}"
        );
    }

    /// The JSON value a query answers (a JSONB column on PostgreSQL, JSON text on SQLite).
    pub async fn json(&self, sql: &str) -> Value {
        match (&self.pg, &self.sqlite) {
            (Some((_, pool)), _) => sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql),
            (_, Some((_, pool))) => {
                let text: String = sqlx::query_scalar(sql).fetch_one(pool).await.expect(sql);
                serde_json::from_str(&text).expect("JSON text")
            }
            _ => unreachable!("a test database has a pool"),
        }
    }
}

/// A session of its own that holds the database's write lock until [`WriteLock::release`]:
/// writers of the engine wait behind it (on PostgreSQL every statement on `jobs` waits,
/// on SQLite every write transaction), as behind a slow or stuck database.
pub struct WriteLock {
    session: WriteLockSession,
}

enum WriteLockSession {
    Postgres(PgConnection),
    Sqlite(sqlx::SqliteConnection),
}

impl WriteLock {
    /// Rolls back the holding transaction: waiting writers go on.
    pub async fn release(self) {
        match self.session {
            WriteLockSession::Postgres(mut c) => {
                c.execute("ROLLBACK").await.expect("release the lock");
                c.close().await.ok();
            }
            WriteLockSession::Sqlite(mut c) => {
                c.execute("ROLLBACK").await.expect("release the lock");
                c.close().await.ok();
            }
        }
    }
}

impl TestDb {
    /// Takes the write lock from a session of its own (see [`WriteLock`]).
    pub async fn lock_writes(&self) -> WriteLock {
        let session = match &self.pg {
            Some((options, _)) => {
                let mut c = PgConnection::connect_with(options)
                    .await
                    .expect("connect to the test database");
                c.execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
                    .await
                    .expect("lock jobs");
                WriteLockSession::Postgres(c)
            }
            None => {
                let mut c = sqlx::SqliteConnection::connect(&self.url)
                    .await
                    .expect("open the SQLite test database");
                c.execute("BEGIN IMMEDIATE")
                    .await
                    .expect("take the SQLite write lock");
                WriteLockSession::Sqlite(c)
            }
        };
        WriteLock { session }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((path, pool)) = self.sqlite.take() {
            pool.close_event();
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            return;
        }
        if let Some((_, pool)) = self.pg.take() {
            pool.close_event();
        }
        let name = self.name.clone();
        let admin = admin_url();
        // Drop runs outside async context guarantees: use a thread with its own runtime.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async move {
                let admin: PgConnectOptions = admin.parse().ok()?;
                let mut conn = PgConnection::connect_with(&admin).await.ok()?;
                if on_citus() {
                    conn.execute("SET citus.enable_create_database_propagation = on")
                        .await
                        .ok()?;
                    // A node may still see a session of the database closing (Citus's
                    // connections to its workers end after the coordinator's): tried
                    // again until it is gone, for a while.
                    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    for _ in 0..50 {
                        if conn.execute(drop.as_str()).await.is_ok() {
                            return Some(());
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    return None;
                }
                conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                    .await
                    .ok()?;
                Some(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("warning: could not drop a test database");
        }
    }
}

/// Sends the engine's log lines (`RUST_LOG`, default `warn`) to the test's captured
/// output, so a failing test shows what the engine said (a reaper error, a refused
/// heartbeat) next to its panic; a passing test shows nothing.
fn capture_engine_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Once per test binary; a later call finds the subscriber installed and does nothing.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_test_writer()
        .try_init();
}

/// Waits until `check` answers `true`, polling; panics after `timeout`.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The value of one series of an engine's metrics (`name` with its labels, as the
/// Prometheus text writes it, e.g. `onceflow_pass_item_failures_total{pass="reaper"}`).
pub async fn metric(engine: &Engine, series: &str) -> f64 {
    let text = engine.metrics_text().await.expect("metrics render");
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{series} in:\n{text}"))
}

/// The owner most tests act for.
pub const ALICE: &str = "alice";

/// The scope of one owner.
pub fn owner(name: &str) -> Scope {
    Scope::Owner(name.to_owned())
}

/// Activity options with a short heartbeat timeout (the shortest there is: 1 s) and fast
/// retries, for tests that let leases expire.
pub fn quick_options() -> ActivityOptions {
    let defaults = ActivityOptions::default();
    ActivityOptions {
        heartbeat_timeout_s: Some(1),
        retry: RetryPolicy {
            initial_backoff_ms: 10,
            max_backoff_ms: 50,
            ..defaults.retry
        },
        ..defaults
    }
}

/// A `generate` activity job with providers `primary-llm`, `fallback-llm`.
pub fn llm_job(input: Value, options: ActivityOptions) -> JobRequest {
    JobRequest::activity("generate", &["primary-llm", "fallback-llm"], input).with_options(options)
}

/// The output schema the tests register for `generate`.
pub fn text_schema() -> Value {
    json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})
}

/// Registers the `generate` contract for `owner` and records a passing certification of
/// `provider` for it.
pub async fn certify(engine: &Engine, owner: &str, provider: &str) -> String {
    let hash = engine
        .register_contract(owner, "generate", &text_schema())
        .await
        .expect("contract registers");
    engine
        .record_certification(
            owner,
            "generate",
            provider,
            &hash,
            true,
            json!({"cases": 3}),
        )
        .await
        .expect("certification records");
    hash
}

/// Claims, as worker `worker`, up to `max` tasks of `generate` at `provider` for `scope`.
pub async fn claim(
    engine: &Engine,
    scope: &Scope,
    worker: &str,
    provider: &str,
    max: u32,
) -> Vec<ActivityTask> {
    engine
        .claim(
            scope,
            &ClaimRequest {
                worker_id: worker.to_owned(),
                task_queue: "default".to_owned(),
                providers: vec![("generate".to_owned(), provider.to_owned())],
                max_tasks: max,
            },
        )
        .await
        .expect("claim succeeds")
}

/// Claims exactly one task of `generate` at `provider` for alice, waiting for it to
/// become available (retry backoff).
pub async fn claim_one(engine: &Engine, provider: &str) -> ActivityTask {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no task for {provider} became available"
        );
        got = claim(engine, &owner(ALICE), "w1", provider, 1).await;
        if got.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(got.len(), 1);
    got.remove(0)
}

/// The event types of a job, in order.
pub async fn event_types(engine: &Engine, job_id: uuid::Uuid) -> Vec<String> {
    engine
        .job_events(&Scope::AllOwners, job_id)
        .await
        .expect("events read")
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

/// An attempt of a job, as the job view shows it.
pub async fn attempt_view(
    engine: &Engine,
    job_id: uuid::Uuid,
    attempt_id: uuid::Uuid,
) -> AttemptView {
    engine
        .job(&Scope::AllOwners, job_id)
        .await
        .expect("job reads")
        .activities
        .into_iter()
        .flat_map(|a| a.attempts)
        .find(|a| a.id == attempt_id)
        .expect("attempt belongs to the job")
}

/// Runs the reaper until attempt `attempt_id` of `job_id` is `unknown` (its lease has
/// expired and the reaper saw it), or panics after 10 s.
pub async fn reap_until_unknown(engine: &Engine, job_id: uuid::Uuid, attempt_id: uuid::Uuid) {
    wait_for(
        "the lease to expire and the reaper to mark the attempt unknown",
        Duration::from_secs(10),
        || async {
            engine.reap().await.expect("reaper runs");
            attempt_view(engine, job_id, attempt_id).await.status == AttemptStatus::Unknown
        },
    )
    .await;
}

/// How long a test may take before it fails: a hang fails the test with its name instead
/// of stalling the run. Generous, for a loaded machine: the slowest rules take well under
/// a minute. The few tests that restart whole clusters take [`LONG_TEST_TIME_LIMIT`]
/// ([`time_limit_of`]).
pub const TEST_TIME_LIMIT: Duration = Duration::from_secs(300);

/// The time limit of the tests that stop, restart or fail over whole PostgreSQL clusters
/// and engine fleets under load (`http/restart.rs`, `http/rolling_restart.rs`,
/// `http/failover_db.rs`): their own waits add up to minutes on a loaded machine.
pub const LONG_TEST_TIME_LIMIT: Duration = Duration::from_secs(900);

/// Runs a test's body within [`TEST_TIME_LIMIT`]; past it, fails naming the test.
/// Every plain `#[tokio::test]` wraps its body in it (the `rules!` tests get it from the
/// macro):
///
/// ```text
/// #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
/// async fn some_rule() {
///     onceflow_tests::time_limit(async { … }).await;
/// }
/// ```
pub async fn time_limit<F: Future<Output = ()>>(test: F) {
    time_limit_of(TEST_TIME_LIMIT, test).await;
}

/// [`time_limit`] with a limit of the test's own.
pub async fn time_limit_of<F: Future<Output = ()>>(limit: Duration, test: F) {
    // The test harness runs each test on a thread named after it.
    let name = test_name();
    if tokio::time::timeout(limit, test).await.is_err() {
        panic!("test {name} did not finish within its time limit of {limit:?}");
    }
}

/// [`time_limit`] for a test that is not async: its body runs on a thread of its own
/// (named as the test), and the test fails when it has not returned within
/// [`TEST_TIME_LIMIT`] (the thread is left behind; the test binary ends without it).
pub fn time_limit_blocking<F: FnOnce() + Send + 'static>(test: F) {
    let name = test_name();
    let (done, finished) = std::sync::mpsc::channel();
    let body = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            test();
            let _ = done.send(());
        })
        .expect("start the test's thread");
    match finished.recv_timeout(TEST_TIME_LIMIT) {
        Ok(()) => body.join().expect("the test's thread ended"),
        // The body panicked before it could say it was done: fail with its panic.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match body.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("a body that returned said so"),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("test {name} did not finish within its time limit of {TEST_TIME_LIMIT:?}")
        }
    }
}

/// The name of the running test: the name of the thread the test harness runs it on.
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(a test whose thread has no name)")
        .to_owned()
}

/// Declares rules of the engine as tests. Each rule runs on every store (the conformance
/// suite): once on a fresh PostgreSQL database (`…::postgres::name`) and once on a fresh
/// SQLite database (`…::sqlite::name`), each on a multi-threaded runtime so that
/// concurrency in the test is real, and each within [`TEST_TIME_LIMIT`] (making the
/// database and the integrity check after the rule included).
///
/// ```text
/// rules! {
///     async fn double_click_makes_one_job(db) { let engine = db.engine(); … }
/// }
/// ```
#[macro_export]
macro_rules! rules {
    ($( $(#[$meta:meta])* async fn $name:ident($db:ident) $body:block )*) => {
        $(
            #[allow(unused_variables)]
            async fn $name($db: &$crate::TestDb) $body
        )*
        mod postgres {
            $(
                $(#[$meta])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    $crate::time_limit(async {
                        let db = $crate::TestDb::new($crate::Backend::Postgres).await;
                        super::$name(&db).await;
                        db.assert_integrity().await;
                    })
                    .await;
                }
            )*
        }
        mod sqlite {
            $(
                $(#[$meta])*
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    $crate::time_limit(async {
                        let db = $crate::TestDb::new($crate::Backend::Sqlite).await;
                        super::$name(&db).await;
                        db.assert_integrity().await;
                    })
                    .await;
                }
            )*
        }
    };
}
/// The docs/api.md error code of a result that must be an error.
pub fn code_of<T: std::fmt::Debug>(
    result: &Result<T, onceflow_engine::EngineError>,
) -> &'static str {
    match result {
        Err(e) => e.code(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

/// A completion with a result.
pub fn result_of(task: &ActivityTask, result: Value) -> onceflow_engine::Completion {
    onceflow_engine::Completion {
        lease_token: task.lease_token,
        body: onceflow_engine::CompletionBody::Result(result),
    }
}

/// A completion with an error.
pub fn error_of(
    task: &ActivityTask,
    message: &str,
    retryable: bool,
) -> onceflow_engine::Completion {
    onceflow_engine::Completion {
        lease_token: task.lease_token,
        body: onceflow_engine::CompletionBody::Error {
            message: message.to_owned(),
            retryable,
        },
    }
}
