//! The PostgreSQL store. Every statement is a `.sql` file under `sql/` (see
//! [`queries`](self)); every statement that guards an invariant says which.

mod bell;
mod decode;
mod hosts;
mod queries;
mod store;
mod submit;
mod tx;
mod views;

pub use queries::{
    ACTIVITIES_OF_JOBS_SQL, ATTEMPTS_OF_ACTIVITIES_SQL, BEGIN_TRANSACTION_SQL, CLAIM_ATTEMPTS_SQL,
    CLAIM_WORKFLOW_TASKS_SQL, COMMIT_ACTIVITY_JOB_RESULTS_SQL, DELETE_PRUNED_JOBS_SQL,
    EXTEND_LEASES_SQL, LOCK_DUE_COMPENSATIONS_SQL, LOCK_DUE_TIMERS_SQL, LOCK_EXPIRED_LEASES_SQL,
    LOCK_JOBS_OF_ATTEMPTS_SQL, LOCK_OVERDUE_SCHEDULED_SQL, LOCK_PRUNABLE_JOBS_SQL, REPLAY_JOBS_SQL,
};
pub use tx::PgTx;

use bell::WorkBell;
use hosts::{Hosts, Target};
use queries::{
    CITUS_MODE_SQL, CONNECTION_ROOM_SQL, DISTRIBUTE_TABLES_SQL, SET_SHARD_COUNT_SQL,
    UNDISTRIBUTED_TABLES_SQL,
};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{ConnectSettings, StoreResult};
use crate::error::StoreError;

/// The migrations of `migrations/postgres`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// A [`Store`](crate::store::Store) on PostgreSQL.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    bell: Arc<WorkBell>,
    losses: Arc<Losses>,
    citus: Arc<Citus>,
}

/// Whether the database runs Citus, read once (see [`PgStore::citus`]), and where the
/// next owner-by-owner pass starts (so that a worker serving every owner is fair to
/// them all).
#[derive(Debug, Default)]
pub(super) struct Citus {
    on: tokio::sync::OnceCell<bool>,
    rotation: AtomicUsize,
}

impl Citus {
    /// The owners in the order a pass visits them: all of them, starting one further
    /// along at each pass.
    pub(super) fn rotate(&self, mut owners: Vec<String>) -> Vec<String> {
        if owners.len() > 1 {
            owners.sort();
            let start = self.rotation.fetch_add(1, Ordering::Relaxed) % owners.len();
            owners.rotate_left(start);
        }
        owners
    }
}

impl PgStore {
    /// Follows the primary of a multi-host URL until `shutdown` (returns at once for a
    /// URL of one server): whenever a search is asked for (a connection lost, a server
    /// found read-only), probes the URL's servers in order, pausing between rounds
    /// ([`hosts::SEARCH_PAUSES`]) until one is writable, and points the pool's new
    /// connections at it. Connections to the server left are checked before they are
    /// handed out again (a loss is marked), so none is used on a server that is not the
    /// one found.
    ///
    /// The servers are searched in the URL's order, as libpq does: should an old primary
    /// come back writable after a standby was promoted (split brain), the engine goes to
    /// whichever is listed first. Fencing the old primary is the deployment's job.
    async fn follow_primary(&self, shutdown: tokio_util::sync::CancellationToken) {
        let Some(hosts) = self.losses.hosts.clone() else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = hosts.search_wanted() => {}
            }
            let mut pause = hosts::SEARCH_PAUSES.0;
            loop {
                let found = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    found = hosts.first_writable() => found,
                };
                match found {
                    Ok(index) => {
                        let server = &hosts.servers[index];
                        if server.label != hosts.current().label {
                            self.pool.set_connect_options(server.options.clone());
                            hosts.set_current(index);
                            tracing::warn!(server = %server.label, "the writable database server moved; new connections go to it");
                            // Idle connections to the server left are checked before use.
                            self.losses.record();
                        }
                        break;
                    }
                    Err(why) => {
                        tracing::warn!(servers = %why, "no writable database server yet; searching again");
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(pause) => {}
                        }
                        pause = (pause * 2).min(hosts::SEARCH_PAUSES.1);
                    }
                }
            }
        }
    }
}

/// When this engine last saw the server drop one of its connections (the LISTEN relay's,
/// which is always reading and so notices a restart at once, or one that failed its
/// check before use). A server that drops one connection has usually dropped them all
/// (a restart, a failover, a proxy that went away): from then on, a pooled connection
/// that went idle before that moment is checked before it is handed out, as one idle for
/// [`PING_AFTER_IDLE`] is, so that no request is given a connection the server already
/// closed. Connections used since were checked when they were given back to the pool.
/// On a multi-host URL, a loss also asks for a search of the writable server.
#[derive(Debug)]
struct Losses {
    since: std::time::Instant,
    /// Microseconds from `since` to the latest loss, plus one; 0 for none yet.
    latest: std::sync::atomic::AtomicU64,
    /// The servers of a multi-host URL (`None`: one server, connected to as given).
    hosts: Option<Arc<Hosts>>,
}

impl Losses {
    fn new(hosts: Option<Arc<Hosts>>) -> Arc<Self> {
        Arc::new(Losses {
            since: std::time::Instant::now(),
            latest: std::sync::atomic::AtomicU64::new(0),
            hosts,
        })
    }

    /// Records that the server dropped a connection now (or turned read-only), and on a
    /// multi-host URL asks for a search of the writable server.
    fn mark(&self) {
        self.record();
        if let Some(hosts) = &self.hosts {
            hosts.want_search();
        }
    }

    /// Records a loss now, without asking for a search: idle connections are checked.
    fn record(&self) {
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

/// A pooled connection idle this long is pinged before use. One in steady use is not:
/// if the server went away since, its statement fails like any statement that meets a
/// dropped connection, and the connection is discarded.
pub const PING_AFTER_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

impl PgStore {
    /// Wraps an existing pool.
    pub fn new(pool: PgPool) -> Self {
        Self::with_losses(pool, Losses::new(None))
    }

    fn with_losses(pool: PgPool, losses: Arc<Losses>) -> Self {
        PgStore {
            bell: WorkBell::new(pool.clone()),
            pool,
            losses,
            citus: Arc::new(Citus::default()),
        }
    }

    /// Whether the database runs Citus (the `citus` extension is installed in it), read
    /// once per store. On Citus every statement that locks or changes rows reaches one
    /// shard: batches that may span owners run owner by owner (the `citus_*`
    /// statements, or the single-row ones in turn), and passes over every owner (the
    /// reaper, timers, the scheduler, retention, a worker serving every owner) first read
    /// which owners have work, without locking, then take it owner by owner. On plain
    /// PostgreSQL the batched statements run as they are.
    pub async fn citus(&self) -> StoreResult<bool> {
        let on = self
            .citus
            .on
            .get_or_try_init(|| async {
                sqlx::query_scalar::<_, bool>(CITUS_MODE_SQL)
                    .fetch_one(&self.pool)
                    .await
            })
            .await?;
        Ok(*on)
    }

    /// `onceflow migrate --citus`: distributes every table of the schema that is not yet
    /// distributed (see `sql/distribute_tables.sql`): `api_tokens`, `contracts` and
    /// `certifications` as reference tables, every other table with an `owner_id` by it,
    /// colocated with `jobs`, in `shard_count` shards (Citus's default when `None`; only
    /// tables distributed now). Idempotent. Answers the tables left neither distributed
    /// nor reference tables afterwards ([`PgStore::undistributed_tables`]): none, unless a
    /// table has no `owner_id`. Fails on a database without Citus.
    pub async fn distribute(&self, shard_count: Option<u32>) -> StoreResult<Vec<String>> {
        use sqlx::Connection;
        let options = (*self.pool.connect_options()).clone().options([
            ("statement_timeout", "0"),
            ("idle_in_transaction_session_timeout", "0"),
        ]);
        let mut conn = sqlx::PgConnection::connect_with(&options).await?;
        let distributed = async {
            if let Some(n) = shard_count {
                sqlx::query(SET_SHARD_COUNT_SQL)
                    .bind(n.to_string())
                    .execute(&mut conn)
                    .await?;
            }
            sqlx::raw_sql(DISTRIBUTE_TABLES_SQL)
                .execute(&mut conn)
                .await?;
            sqlx::query_scalar::<_, String>(UNDISTRIBUTED_TABLES_SQL)
                .fetch_all(&mut conn)
                .await
        }
        .await;
        conn.close().await.ok();
        Ok(distributed?)
    }

    /// The tables of the schema (sqlx's migration ledger aside) that Citus holds neither
    /// as distributed nor as reference tables. Fails on a database without Citus.
    pub async fn undistributed_tables(&self) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(UNDISTRIBUTED_TABLES_SQL)
            .fetch_all(&self.pool)
            .await?)
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
    ///
    /// `url` may list several servers, as libpq does
    /// (`postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`; see
    /// `store/postgres/hosts.rs`): the pool then connects only to a writable server, the first of
    /// the list that is when it starts (failing with [`StoreError::NoWritableServer`],
    /// which says why each was passed over, when none is); a new connection that finds its
    /// server read-only is closed and the list searched again, as one lost is (only
    /// while the engine serves: see [`Store::listen_for_work`](crate::store::Store)). A
    /// URL that cannot be used fails with [`StoreError::DatabaseUrl`], saying why.
    pub async fn connect_with(url: &str, settings: &ConnectSettings) -> StoreResult<Self> {
        ensure_crypto_provider();
        let (options, hosts) = match hosts::parse_target(url)? {
            Target::One(options) => (with_settings(*options, settings), None),
            Target::Writable(mut servers) => {
                for server in &mut servers {
                    server.options = with_settings(server.options.clone(), settings);
                }
                let hosts = Hosts::new(servers, 0);
                let first = hosts
                    .first_writable()
                    .await
                    .map_err(StoreError::NoWritableServer)?;
                hosts.set_current(first);
                let options = hosts.current().options.clone();
                (options, Some(Arc::new(hosts)))
            }
        };
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
        let losses = Losses::new(hosts.clone());
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
                        if losses.hosts.is_some() {
                            // The same round trip as a ping, which also sees a server that
                            // turned read-only: that connection is closed, not handed out.
                            match hosts::is_writable(conn).await {
                                Ok(true) => {}
                                Ok(false) => {
                                    losses.mark();
                                    return Ok(false);
                                }
                                Err(e) => {
                                    losses.mark();
                                    return Err(e);
                                }
                            }
                        } else if let Err(e) = sqlx::Connection::ping(conn).await {
                            losses.mark();
                            return Err(e);
                        }
                    }
                    Ok(true)
                })
            });
        let pool = match &hosts {
            None => pool,
            Some(hosts) => {
                let hosts = hosts.clone();
                // A new connection that landed on a read-only server (a standby not yet
                // promoted, an old primary back as a standby) is closed; the pool tries
                // again, by then on the server the search found.
                pool.after_connect(move |conn, _meta| {
                    let hosts = hosts.clone();
                    Box::pin(async move {
                        match hosts::is_writable(conn).await {
                            Ok(true) => Ok(()),
                            Ok(false) => {
                                hosts.want_search();
                                Err(sqlx::Error::Protocol(format!(
                                    "{} is {}",
                                    hosts.current().label,
                                    hosts::READ_ONLY
                                )))
                            }
                            Err(e) => {
                                hosts.want_search();
                                Err(e)
                            }
                        }
                    })
                })
            }
        };
        let pool = pool.connect_with(options).await?;
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
/// restarted. For a URL that lists several servers, these are the options of the first;
/// a URL that cannot be used fails with [`StoreError::DatabaseUrl`], saying why.
pub fn connect_options(url: &str, settings: &ConnectSettings) -> StoreResult<PgConnectOptions> {
    let options = match hosts::parse_target(url)? {
        Target::One(options) => *options,
        Target::Writable(servers) => servers
            .into_iter()
            .next()
            .map(|s| s.options)
            .ok_or_else(|| StoreError::DatabaseUrl("the database URL names no host".to_owned()))?,
    };
    Ok(with_settings(options, settings))
}

/// `options` with the engine's startup settings (see [`connect_options`]).
fn with_settings(options: PgConnectOptions, settings: &ConnectSettings) -> PgConnectOptions {
    let millis = |d: std::time::Duration| -> String {
        if d.is_zero() {
            "0".to_owned()
        } else {
            d.as_millis().clamp(1, i32::MAX as u128).to_string()
        }
    };
    options.options([
        ("jit", "off".to_owned()),
        ("statement_timeout", millis(settings.statement_timeout)),
        (
            "idle_in_transaction_session_timeout",
            millis(settings.idle_in_transaction_timeout),
        ),
    ])
}

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
    let room: i64 = sqlx::query_scalar(CONNECTION_ROOM_SQL)
        .fetch_one(conn)
        .await?;
    Ok(u32::try_from(room.max(0)).unwrap_or(u32::MAX))
}
