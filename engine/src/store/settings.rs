//! How an engine connects to its database.

/// How an engine connects to its database: the pool's size and the limits every pooled
/// PostgreSQL connection runs under. [`ConnectSettings::default`] is what
/// `onceflow serve` uses without flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectSettings {
    /// The most connections the pool opens (default 20). On PostgreSQL, a pool larger than
    /// the server has room for is lowered to fit, never below
    /// [`postgres::MIN_POOL_CONNECTIONS`](super::postgres::MIN_POOL_CONNECTIONS) (or the size asked for, if smaller): if the
    /// server has no room for that, connecting fails and says why.
    pub max_connections: u32,
    /// PostgreSQL's `statement_timeout` on every pooled connection (default 30 s; zero
    /// turns it off): a statement running longer is cancelled, and the request that ran
    /// it answers `503 unavailable`. Migrations and retention run without it.
    pub statement_timeout: std::time::Duration,
    /// PostgreSQL's `idle_in_transaction_session_timeout` on every pooled connection
    /// (default 60 s; zero turns it off): a session that holds a transaction open without
    /// a statement this long is ended by the server, which rolls the transaction back and
    /// releases its locks.
    pub idle_in_transaction_timeout: std::time::Duration,
}

impl Default for ConnectSettings {
    fn default() -> Self {
        ConnectSettings {
            max_connections: 20,
            statement_timeout: std::time::Duration::from_secs(30),
            idle_in_transaction_timeout: std::time::Duration::from_secs(60),
        }
    }
}

impl ConnectSettings {
    /// The defaults with a pool of `max_connections`.
    pub fn with_max_connections(max_connections: u32) -> Self {
        ConnectSettings {
            max_connections,
            ..ConnectSettings::default()
        }
    }
}
