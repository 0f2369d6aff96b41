//! The work bell: a NOTIFY when attempts become available, sent at most once per short
//! gap whatever the number of commits that rang it, and the LISTEN relay that wakes
//! this engine's pollers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};

use sqlx::postgres::PgPool;
use tokio::sync::Notify;

use super::queries::*;

/// The least time between two `NOTIFY`s of one engine.
pub(super) const NOTIFY_GAP: std::time::Duration = std::time::Duration::from_millis(10);

/// Wake-up hints, merged. When a transaction that scheduled work commits, this
/// process's waiting pollers are woken at once, and one `NOTIFY` tells the other engines
/// about everything committed since the previous one. The `NOTIFY` is sent outside the
/// job transactions: PostgreSQL serializes commits that notify, and the hot path must not.
/// A hint lost on the way costs a poller one re-check interval, nothing more.
#[derive(Debug)]
pub(super) struct WorkBell {
    pool: PgPool,
    pending: AtomicBool,
    ring: Notify,
    sender: OnceLock<()>,
    pub(super) local: StdMutex<Vec<Arc<Notify>>>,
}

impl WorkBell {
    pub(super) fn new(pool: PgPool) -> Arc<Self> {
        Arc::new(WorkBell {
            pool,
            pending: AtomicBool::new(false),
            ring: Notify::new(),
            sender: OnceLock::new(),
            local: StdMutex::new(Vec::new()),
        })
    }

    pub(super) fn ring(self: &Arc<Self>) {
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
                if let Err(e) = sqlx::query(SEND_NOTIFICATIONS_SQL)
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

/// The channel on which PostgreSQL engines tell each other that work was scheduled.
pub(super) const WORK_CHANNEL: &str = "onceflow_work";

/// How long the LISTEN relay waits before it tries again to connect and `LISTEN`.
pub(super) const LISTEN_RETRY: std::time::Duration = std::time::Duration::from_millis(500);
