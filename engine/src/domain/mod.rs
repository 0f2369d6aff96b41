//! The domain: [`Engine`] and its operations. Each operation that changes state is one
//! transaction that also appends to `job_events` (invariant 7), and talks to storage only
//! through [`Store`].
//!
//! Where to find what:
//! - the dedup insert (invariant 1): [`submit`](Engine::submit) in `submit.rs`;
//! - dispatch and heartbeats (leases, fencing): `dispatch.rs`;
//! - the CAS commit (invariant 4): [`complete`](Engine::complete) in `commit.rs`;
//! - retry and failover after an attempt ends: `policy.rs`;
//! - resuming a failed job or a parked workflow: `resume.rs`;
//! - manual attempts and cancellation: `intervene.rs`; a workflow's compensation after
//!   its job's cancel: `compensation.rs`;
//! - the lease reaper (invariant 3): [`reap`](Engine::reap) in `reaper.rs`;
//! - output contracts and certifications (invariant 6): `contracts.rs`;
//! - cron schedules and the scheduler pass: `schedules.rs`;
//! - read views: `views.rs`.

mod batch;
mod children;
mod clock;
mod commit;
mod compensation;
mod contracts;
mod dispatch;
mod history;
mod inflight;
mod intervene;
mod policy;
mod reaper;
mod resume;
mod retention;
mod schedules;
mod signals;
mod submit;
mod tokens;
mod views;
mod workflow;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::{EngineError, StoreError};
use crate::model::Scope;
use crate::store::{ConnectSettings, NewEvent, Store, StoreTx};

pub use commit::{Completion, CompletionBody};
pub use dispatch::{ClaimRequest, HeartbeatAck};
pub use reaper::ReapReport;
pub use retention::{PrunePass, PRUNE_BATCH};
pub use schedules::{
    schedule_event, tick_key, CronSpec, SchedulePut, ScheduleReport, ScheduleRequestBody,
};
pub use signals::SignalSubmission;
pub use submit::{replay, Submission};
pub use views::{JobListQuery, JobPage, StuckAttemptsQuery};
pub use workflow::WorkflowTaskOutcome;

/// The engine: every domain operation of docs/design.md over one [`Store`]. Cheap to clone;
/// any number of engines may run against one database at once.
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn Store>,
    contracts: Arc<contracts::ValidatorCache>,
    work: Arc<Notify>,
    workflow_task_lease: std::time::Duration,
    metrics: Arc<crate::metrics::Metrics>,
    schedules_changed: Arc<Notify>,
    batches: Arc<Batches>,
    tokens: Arc<tokens::TokenCache>,
    clock: clock::Clock,
}

/// The natural batchers of the hot path (see `batch.rs`): concurrent calls share round
/// trips, each item keeping its own guards and its own answer.
struct Batches {
    /// Bearer-token lookups by hash.
    tokens: Arc<batch::Batcher<String, Option<crate::store::TokenRow>>>,
    /// Submissions of new activity jobs; `None` answers a taken key.
    submissions: Arc<batch::Batcher<submit::BatchedSubmission, submit::Batched>>,
    /// Keys whose first submission is being written, and the repeats waiting for it.
    keys_in_flight: inflight::KeysInFlight,
    /// Replays: submissions whose key a committed job holds.
    replays: Arc<batch::Batcher<submit::Replay, Result<submit::Created, EngineError>>>,
    /// Completions of attempts.
    completions: Arc<
        batch::Batcher<
            commit::BatchedCompletion,
            Result<crate::model::CompletionOutcome, EngineError>,
        >,
    >,
    /// Heartbeats' fast path: whether each lease was extended.
    heartbeats: Arc<batch::Batcher<crate::store::LeaseRenewal, bool>>,
}

/// At most this many flushes of one kind run at once. One, as group commit does: calls
/// that arrive while a flush runs all share the next one. Measured against two: dedup
/// +10-45% (flushes twice the size, and a key's two copies far more often in one flush),
/// e2e unchanged or better, an idle engine's latency unchanged. Engines on one database
/// still flush side by side.
const BATCH_FLUSHES_IN_FLIGHT: usize = 1;
/// At most this many items go in one flush.
const BATCH_MAX_ITEMS: usize = 64;

impl Batches {
    fn new(store: &Arc<dyn Store>, metrics: &crate::metrics::Metrics) -> Self {
        let sizes = |kind: &str| metrics.batch_items.with_label_values(&[kind]);
        let tokens_store = store.clone();
        let heartbeats_store = store.clone();
        Batches {
            keys_in_flight: inflight::KeysInFlight::default(),
            completions: batch::Batcher::new(
                BATCH_FLUSHES_IN_FLIGHT,
                BATCH_MAX_ITEMS,
                Some(sizes("completions")),
                |items: Vec<commit::BatchedCompletion>| async move {
                    match items.first().map(|i| i.engine.clone()) {
                        Some(engine) => engine.complete_batch(items).await,
                        None => Vec::new(),
                    }
                },
            ),
            replays: batch::Batcher::new(
                BATCH_FLUSHES_IN_FLIGHT,
                BATCH_MAX_ITEMS,
                Some(sizes("replays")),
                |items: Vec<submit::Replay>| async move {
                    match items.first().map(|i| i.engine.clone()) {
                        Some(engine) => engine.replay_batch(items).await,
                        None => Vec::new(),
                    }
                },
            ),
            submissions: batch::Batcher::new(
                BATCH_FLUSHES_IN_FLIGHT,
                BATCH_MAX_ITEMS,
                Some(sizes("submissions")),
                |items: Vec<submit::BatchedSubmission>| async move {
                    match items.first().map(|i| i.engine.clone()) {
                        Some(engine) => engine.submit_batch(items).await,
                        None => Vec::new(),
                    }
                },
            ),
            heartbeats: batch::Batcher::new(
                BATCH_FLUSHES_IN_FLIGHT,
                BATCH_MAX_ITEMS,
                Some(sizes("heartbeats")),
                move |renewals: Vec<crate::store::LeaseRenewal>| {
                    let store = heartbeats_store.clone();
                    async move {
                        match store.extend_leases(&renewals).await {
                            Ok(extended) if extended.len() == renewals.len() => {
                                extended.into_iter().map(Some).collect()
                            }
                            Ok(_) => renewals.iter().map(|_| None).collect(),
                            Err(e) => {
                                tracing::debug!(error = %e, "batched heartbeats failed; each heartbeat goes alone");
                                renewals.iter().map(|_| None).collect()
                            }
                        }
                    }
                },
            ),
            tokens: batch::Batcher::new(
                BATCH_FLUSHES_IN_FLIGHT,
                BATCH_MAX_ITEMS,
                Some(sizes("tokens")),
                move |hashes: Vec<String>| {
                    let store = tokens_store.clone();
                    async move {
                        match store.tokens_by_hash(&hashes).await {
                            Ok(rows) => hashes
                                .iter()
                                .map(|h| Some(rows.iter().find(|r| &r.token_hash == h).cloned()))
                                .collect(),
                            Err(e) => {
                                tracing::debug!(error = %e, "batched token lookup failed; each request looks alone");
                                hashes.iter().map(|_| None).collect()
                            }
                        }
                    }
                },
            ),
        }
    }
}

/// Who did something, as written to `job_events.actor`.
pub(crate) mod actor {
    /// The engine itself (policy decisions, closing slots).
    pub const ENGINE: &str = "engine";
    /// The lease reaper.
    pub const REAPER: &str = "reaper";

    /// A client acting for `owner`.
    pub fn client(owner: &str) -> String {
        format!("client:{owner}")
    }
    /// A worker.
    pub fn worker(worker_id: &str) -> String {
        format!("worker:{worker_id}")
    }
    /// An operator.
    pub fn operator(name: &str) -> String {
        format!("operator:{name}")
    }
}

/// Runs a transactional operation again when the database reports a deadlock or a
/// serialization failure; each try is a fresh transaction.
macro_rules! retry_transient {
    ($op:expr) => {{
        let mut tries = 0u32;
        loop {
            match $op.await {
                Err($crate::error::EngineError::Internal(e)) if e.is_transient() && tries < 5 => {
                    tries += 1;
                    tracing::debug!(error = %e, tries, "transient database error, retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(tries))).await;
                }
                other => break other,
            }
        }
    }};
}
pub(crate) use retry_transient;

impl Engine {
    /// An engine over `store`. Call [`Engine::migrate`] once before use on a new database.
    pub fn new(store: Arc<dyn Store>) -> Self {
        let metrics = Arc::new(crate::metrics::Metrics::default());
        Engine {
            batches: Arc::new(Batches::new(&store, &metrics)),
            store,
            contracts: Arc::new(contracts::ValidatorCache::default()),
            work: Arc::new(Notify::new()),
            workflow_task_lease: std::time::Duration::from_secs(30),
            metrics,
            schedules_changed: Arc::new(Notify::new()),
            tokens: Arc::new(tokens::TokenCache::default()),
            clock: clock::Clock::default(),
        }
    }

    /// Connects to the database at `url`: `postgres://…` selects PostgreSQL, `sqlite://PATH`
    /// SQLite (a relative or absolute path; the file and its directory are created when
    /// missing). A pool of `max_connections`, every other setting at its default
    /// ([`ConnectSettings::default`]); see [`Engine::connect_with`].
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, EngineError> {
        Self::connect_with(url, &ConnectSettings::with_max_connections(max_connections)).await
    }

    /// Connects to the database at `url` as [`Engine::connect`] does, with `settings`: the
    /// pool's size and, on PostgreSQL, the `statement_timeout` and
    /// `idle_in_transaction_session_timeout` of every pooled connection (SQLite has
    /// neither: a write waits for the one writer, a statement runs to its end).
    ///
    /// Fails with [`EngineError::Unavailable`] when the database cannot be reached, or
    /// when the PostgreSQL server has no room for the pool's minimum (its source,
    /// [`StoreError::PoolTooSmall`], says the room, the minimum and what to do), and with
    /// [`EngineError::InvalidRequest`], saying why, for a `postgres://` URL that cannot be
    /// used. A `postgres://` URL may list several servers, as libpq's does
    /// (`postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`): the engine
    /// then connects only to the one that takes writes, and follows it when it moves (a
    /// failover; see [`PgStore::connect_with`](crate::store::postgres::PgStore::connect_with)).
    pub async fn connect_with(url: &str, settings: &ConnectSettings) -> Result<Self, EngineError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let store = crate::store::postgres::PgStore::connect_with(url, settings)
                .await
                .map_err(|e| match e {
                    StoreError::DatabaseUrl(why) => EngineError::InvalidRequest(why),
                    e => EngineError::Unavailable(e),
                })?;
            return Ok(Engine::new(Arc::new(store)));
        }
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or(path);
            if let Some(dir) = std::path::Path::new(path)
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir).map_err(|e| {
                    EngineError::invalid_request(format!("cannot create {}: {e}", dir.display()))
                })?;
            }
            let store = crate::store::sqlite::SqliteStore::connect(url, settings.max_connections)
                .await
                .map_err(EngineError::Unavailable)?;
            return Ok(Engine::new(Arc::new(store)));
        }
        Err(EngineError::invalid_request(format!(
            "unsupported database URL `{url}`: use postgres://… or sqlite://PATH"
        )))
    }

    /// Connects to PostgreSQL at `url` (pool of `max_connections`, other settings at their
    /// defaults).
    pub async fn connect_postgres(url: &str, max_connections: u32) -> Result<Self, EngineError> {
        let store = crate::store::postgres::PgStore::connect(url, max_connections)
            .await
            .map_err(EngineError::Unavailable)?;
        Ok(Engine::new(Arc::new(store)))
    }

    /// Applies pending migrations.
    pub async fn migrate(&self) -> Result<(), EngineError> {
        Ok(self.store.migrate().await?)
    }

    /// Answers `Ok` when the database answers.
    pub async fn ping(&self) -> Result<(), EngineError> {
        self.store.ping().await.map_err(EngineError::Unavailable)
    }

    /// How long a worker holds a workflow task before it is handed out again (default
    /// 30 s; replaying is side-effect free, so a re-run is always safe).
    pub fn with_workflow_task_lease(mut self, lease: std::time::Duration) -> Self {
        self.workflow_task_lease = lease;
        self
    }

    /// Skews this engine's own clock by `offset`, as if its host's clock were that far
    /// off (for tests of clock skew). Every wall-clock reading of the engine uses it, and
    /// none decides anything: leases, deadlines, certifications and schedule ticks are
    /// stamped and judged by the database's clock, so a skewed engine orders and fires
    /// exactly as the others do. Only what the engine measures itself (the
    /// `onceflow_attempt_seconds` histogram) shows the skew.
    pub fn with_clock_offset(mut self, offset: chrono::Duration) -> Self {
        self.clock = clock::Clock::skewed(offset);
        self
    }

    /// Woken (as a hint) when attempts become available, by this engine or another one
    /// on the same database while [`Engine::listen_for_work`] runs.
    pub fn work_signal(&self) -> Arc<Notify> {
        self.work.clone()
    }

    /// Relays other engines' "work scheduled" hints to [`Engine::work_signal`] until
    /// `shutdown`.
    pub async fn listen_for_work(&self, shutdown: CancellationToken) {
        self.store
            .listen_for_work(self.work.clone(), shutdown)
            .await
    }

    /// Counts a long-poll of this engine as waiting for work (the
    /// `onceflow_long_polls_waiting` gauge) while the answer lives.
    pub(crate) fn long_poll_waiting(&self) -> crate::metrics::LongPollWaiting {
        self.metrics.long_poll_waiting()
    }

    /// The Prometheus text of this engine's metrics, with the database gauges read now.
    pub async fn metrics_text(&self) -> Result<String, EngineError> {
        let (live, oldest_unknown_age_s) = self.store.live_attempt_counts().await?;
        self.metrics.set_gauges(&live, oldest_unknown_age_s);
        Ok(self.metrics.render())
    }

    async fn begin(&self) -> Result<Box<dyn StoreTx>, EngineError> {
        Ok(self.store.begin().await?)
    }
}

/// Collects the events of one transaction and writes them with one statement.
pub(crate) struct Events {
    owner_id: String,
    job_id: Uuid,
    pending: Vec<NewEvent>,
}

impl Events {
    pub(crate) fn for_job(owner_id: &str, job_id: Uuid) -> Self {
        Events {
            owner_id: owner_id.to_owned(),
            job_id,
            pending: Vec::new(),
        }
    }

    pub(crate) fn push(
        &mut self,
        kind: &'static str,
        attempt_id: Option<Uuid>,
        actor: &str,
        data: Value,
    ) {
        self.pending.push(NewEvent {
            owner_id: self.owner_id.clone(),
            job_id: self.job_id,
            kind,
            attempt_id,
            actor: actor.to_owned(),
            data,
        });
    }

    /// Writes the events and counts them in the metrics (as written: an operation
    /// retried after a deadlock may count twice).
    pub(crate) async fn flush(
        self,
        tx: &mut dyn StoreTx,
        metrics: &crate::metrics::Metrics,
    ) -> Result<(), StoreError> {
        tx.append_events(&self.pending).await?;
        metrics.events_written(self.pending.iter().map(|e| e.kind));
        Ok(())
    }
}

/// Checks that a scope may act on rows of `owner`.
pub(crate) fn visible(scope: &Scope, owner: &str) -> Result<(), EngineError> {
    if scope.allows(owner) {
        Ok(())
    } else {
        Err(EngineError::NotFound)
    }
}
