//! The test harness every integration test uses: a fresh PostgreSQL database per test,
//! migrated, and dropped afterwards (even when the test panics), so tests run in
//! parallel without seeing each other.
//!
//! The server is found at `ONCEFLOW_TEST_DATABASE_URL` (a URL of a database the harness
//! may connect to in order to create and drop others), by default
//! `postgres://postgres@127.0.0.1:5432/postgres`.

pub mod server;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::model::{ActivityOptions, ActivityTask, AttemptStatus, AttemptView, RetryPolicy, Scope};
use onceflow_engine::store::postgres::PgStore;
use onceflow_engine::{ClaimRequest, Engine, JobRequest};
use serde_json::{json, Value};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, Executor, PgConnection, PgPool};
use tokio::sync::{Semaphore, SemaphorePermit};

/// The admin URL of the PostgreSQL server tests run against.
pub fn admin_url() -> String {
    std::env::var("ONCEFLOW_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// Tests that open dozens of connections take turns, so that parallel tests stay under
/// the server's connection limit.
static HEAVY: Semaphore = Semaphore::const_new(1);

/// A fresh, migrated database that is dropped when this value is.
pub struct TestDb {
    name: String,
    /// How to connect to the test database.
    pub options: PgConnectOptions,
    /// A small pool on the test database, for engines and direct checks.
    pub pool: PgPool,
}

impl TestDb {
    /// Creates and migrates a new database with a unique name.
    pub async fn new() -> TestDb {
        let admin: PgConnectOptions = admin_url().parse().expect("ONCEFLOW_TEST_DATABASE_URL parses");
        let name = format!("onceflow_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = PgConnection::connect_with(&admin).await.expect("connect to the PostgreSQL admin database");
        conn.execute(format!("CREATE DATABASE {name}").as_str()).await.expect("create the test database");
        conn.close().await.ok();
        let options = admin.database(&name);
        let pool = PgPoolOptions::new()
            .max_connections(5)
            .connect_with(options.clone())
            .await
            .expect("connect to the test database");
        let db = TestDb { name, options, pool };
        db.engine().migrate().await.expect("migrations apply");
        db
    }

    /// The URL of the test database, for child processes.
    pub fn url(&self) -> String {
        let admin = admin_url();
        match admin.rfind('/') {
            Some(i) => format!("{}/{}", &admin[..i], self.name),
            None => format!("{admin}/{}", self.name),
        }
    }

    /// An engine on this database sharing [`TestDb::pool`].
    pub fn engine(&self) -> Engine {
        Engine::new(Arc::new(PgStore::new(self.pool.clone())))
    }

    /// `n` engines, each with its own single connection: as many separate database
    /// sessions as a fleet of `n` engine processes would have. Holds the heavy-test turn
    /// while they live.
    pub async fn separate_engines(&self, n: usize) -> (Vec<Engine>, SemaphorePermit<'static>) {
        let permit = HEAVY.acquire().await.expect("semaphore is never closed");
        let mut engines = Vec::with_capacity(n);
        for _ in 0..n {
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .connect_with(self.options.clone())
                .await
                .expect("connect a separate session");
            engines.push(Engine::new(Arc::new(PgStore::new(pool))));
        }
        (engines, permit)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        let admin = admin_url();
        self.pool.close_event();
        // Drop runs outside async context guarantees: use a thread with its own runtime.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            rt.block_on(async move {
                let admin: PgConnectOptions = admin.parse().ok()?;
                let mut conn = PgConnection::connect_with(&admin).await.ok()?;
                conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str()).await.ok()?;
                Some(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("warning: could not drop a test database");
        }
    }
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
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
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
        retry: RetryPolicy { initial_backoff_ms: 10, max_backoff_ms: 50, ..defaults.retry },
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
    let hash = engine.register_contract(owner, "generate", &text_schema()).await.expect("contract registers");
    engine
        .record_certification(owner, "generate", provider, &hash, true, json!({"cases": 3}))
        .await
        .expect("certification records");
    hash
}

/// Claims, as worker `worker`, up to `max` tasks of `generate` at `provider` for `scope`.
pub async fn claim(engine: &Engine, scope: &Scope, worker: &str, provider: &str, max: u32) -> Vec<ActivityTask> {
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
        assert!(tokio::time::Instant::now() < deadline, "no task for {provider} became available");
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
pub async fn attempt_view(engine: &Engine, job_id: uuid::Uuid, attempt_id: uuid::Uuid) -> AttemptView {
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
    wait_for("the lease to expire and the reaper to mark the attempt unknown", Duration::from_secs(10), || async {
        engine.reap().await.expect("reaper runs");
        attempt_view(engine, job_id, attempt_id).await.status == AttemptStatus::Unknown
    })
    .await;
}

/// Declares rules of the engine as tests, each on its own fresh database, on a
/// multi-threaded runtime so that concurrency in the test is real.
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
            $(#[$meta])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let $db = $crate::TestDb::new().await;
                #[allow(unused_variables)]
                let $db = &$db;
                $body
            }
        )*
    };
}

/// The API.md error code of a result that must be an error.
pub fn code_of<T: std::fmt::Debug>(result: &Result<T, onceflow_engine::EngineError>) -> &'static str {
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
pub fn error_of(task: &ActivityTask, message: &str, retryable: bool) -> onceflow_engine::Completion {
    onceflow_engine::Completion {
        lease_token: task.lease_token,
        body: onceflow_engine::CompletionBody::Error { message: message.to_owned(), retryable },
    }
}
