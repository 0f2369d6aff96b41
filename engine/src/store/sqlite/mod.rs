//! The SQLite store: the embedded default. Same invariants as PostgreSQL, kept the same
//! way (unique and partial unique indexes, guarded updates, the CAS statement shape);
//! what differs is how writers are serialized: every write transaction is
//! `BEGIN IMMEDIATE` (one writer at a time, database-wide), so the dedup insert, the
//! one-live-attempt rule and the CAS hold under any concurrency, and no `SKIP LOCKED` is
//! needed. Times are microseconds since the epoch, taken once per transaction.

mod clock;
mod decode;
mod queries;
mod store;
mod tx;
mod views;

pub use tx::SqliteTx;

use clock::now_us;
use queries::BEGIN_IMMEDIATE_SQL;

use std::str::FromStr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::Notify;

use super::StoreResult;

/// The migrations of `migrations/sqlite`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// A [`Store`](crate::store::Store) on SQLite.
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
            let tx = pool.begin_with(BEGIN_IMMEDIATE_SQL).await?;
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
