//! Errors, one enum per layer. [`EngineError`] variants carry exactly the error codes of
//! docs/api.md; [`EngineError::code`] and [`EngineError::http_status`] are the one place where
//! they are mapped.

use serde_json::{json, Value};
use uuid::Uuid;

use crate::model::AttemptStatus;

/// Errors of the storage layer. They never reach clients as such: the engine turns them
/// into [`EngineError::Internal`] or [`EngineError::Unavailable`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database answered with an error or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row held a value the domain does not know (e.g. an unknown status word).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The job holding an idempotency key was pruned (retention) while a submission of
    /// that key was being judged: the key is free again, and submitting again creates a
    /// new job.
    #[error("the job holding the idempotency key was pruned meanwhile")]
    KeyReleased,
    /// At start-up, the PostgreSQL server had room for fewer connections than the engine
    /// needs to work (see [`crate::store::postgres::MIN_POOL_CONNECTIONS`]): the engine
    /// refuses to start rather than run on a pool too small to serve.
    #[error(
        "the database server has room for only {room} more connection(s), and this engine needs at least {minimum}{}: \
         raise the server's max_connections, or close sessions that hold its slots (other engines, idle clients), then start again",
        why_minimum(*.minimum)
    )]
    PoolTooSmall {
        /// Connections the server admitted for this role when the engine started.
        room: u32,
        /// The fewest the engine works with.
        minimum: u32,
    },
    /// The database URL cannot be used; the message says why (never the password).
    #[error("{0}")]
    DatabaseUrl(String),
    /// At start-up, none of the servers a multi-host URL lists took writes (each was
    /// unreachable, or a standby, or read-only); the message says why each was passed over.
    #[error("no writable database server among the URL's hosts: {0}")]
    NoWritableServer(String),
}

/// What the pool minimum is made of, when it is the engine's own (not a smaller pool the
/// caller asked for).
fn why_minimum(minimum: u32) -> &'static str {
    if minimum == crate::store::postgres::MIN_POOL_CONNECTIONS {
        " (one for its LISTEN relay, two for a worker's poll cycle, one each for the reaper, the scheduler and retention)"
    } else {
        ""
    }
}

impl StoreError {
    /// Whether retrying the whole transaction may succeed (deadlock or serialization
    /// failure detected by the database, or a key released by retention meanwhile).
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::KeyReleased => true,
            StoreError::Database(sqlx::Error::Database(db)) => {
                matches!(db.code().as_deref(), Some("40001") | Some("40P01"))
            }
            _ => false,
        }
    }

    /// Whether the database is away or refused to go on, rather than the request being
    /// wrong or the engine broken: it could not be reached, a connection was lost or ended
    /// by the server (a restart, `pg_terminate_backend`), the server is starting or
    /// shutting down, it has no connection slot left, it is read-only (SQLSTATE 25006: a
    /// standby, before the engine found the promoted one), no server of a multi-host URL
    /// took writes at start-up, or a statement was cancelled by
    /// `statement_timeout` (SQLSTATE 57014) or its session ended by
    /// `idle_in_transaction_session_timeout` (25P03). Such errors answer `503
    /// unavailable`; trying again later may succeed.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::PoolTooSmall { .. } | StoreError::NoWritableServer(_) => true,
            StoreError::Database(e) => sqlx_unavailable(e),
            StoreError::Migrate(sqlx::migrate::MigrateError::Execute(e)) => sqlx_unavailable(e),
            _ => false,
        }
    }
}

fn sqlx_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // Class 08: connection exception. 57014: query_canceled (statement_timeout).
            // 57P01-57P05: admin_shutdown, crash_shutdown, cannot_connect_now,
            // database_dropped, idle_session_timeout. 25P03:
            // idle_in_transaction_session_timeout. 53300: too_many_connections.
            // 25006: read_only_sql_transaction (the server is a standby, or was made
            // read-only: after a failover, the writable server is elsewhere).
            code.starts_with("08")
                || code.starts_with("57P")
                || matches!(&*code, "57014" | "25P03" | "53300" | "25006")
        }),
        _ => false,
    }
}

/// Errors of the domain, one variant per docs/api.md error code.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// 400 `invalid_request`: a missing or wrong-typed field; the message names it.
    #[error("{0}")]
    InvalidRequest(String),
    /// 400 `missing_idempotency_key`.
    #[error("the Idempotency-Key header is required")]
    MissingIdempotencyKey,
    /// 400 `invalid_idempotency_key`.
    #[error("the Idempotency-Key must be 1 to 255 visible ASCII characters (! to ~)")]
    InvalidIdempotencyKey,
    /// 401 `unauthenticated`.
    #[error("missing or unknown token")]
    Unauthenticated,
    /// 403 `forbidden`.
    #[error("this token's role may not do this")]
    Forbidden,
    /// 404 `not_found`: unknown id, or an id of another owner (invariant 8).
    #[error("not found")]
    NotFound,
    /// 409 `idempotency_key_reused`: the key names another intent.
    #[error("this Idempotency-Key was already used for a different request (job {job_id})")]
    IdempotencyKeyReused {
        /// The job that already holds the key; nothing was created or changed.
        job_id: Uuid,
    },
    /// 409 `attempt_in_flight`: a live attempt exists (invariant 2).
    #[error("attempt {attempt_id} is still {status}; resolve or cancel it first")]
    AttemptInFlight {
        /// The live attempt that blocks a new one.
        attempt_id: Uuid,
        /// Its status: `scheduled`, `started` or `unknown`.
        status: AttemptStatus,
    },
    /// 409 `provider_not_certified` (invariant 6).
    #[error("provider {provider} cannot take over: {reason}")]
    ProviderNotCertified {
        /// The provider that was asked to take over.
        provider: String,
        /// Why not: not in the activity's list, or not certified for the current contract.
        reason: String,
    },
    /// 409 `activity_completed`: the result slot is taken or the job is closed.
    #[error("the activity's result slot is already taken or its job is closed")]
    ActivityCompleted,
    /// 409 `job_finished`.
    #[error("the job already finished")]
    JobFinished,
    /// 409 `not_a_workflow`: only a workflow job takes signals.
    #[error("the job is an activity job; only workflow jobs take signals")]
    NotAWorkflow,
    /// 409 `job_not_resumable`: only a `failed` job, or a parked workflow, resumes (also
    /// the loser of two concurrent resumes). `status` is the job's status then.
    #[error("the job is {status}{}; only a failed job or a parked workflow can be resumed", if *parked { " (parked)" } else { "" })]
    JobNotResumable {
        /// The job's status when the resume was refused.
        status: crate::model::JobStatus,
        /// Whether the job was parked.
        parked: bool,
    },
    /// 409 `lease_lost`: wrong lease token, or the attempt is finished (invariant 5).
    #[error("the lease token does not hold this attempt")]
    LeaseLost,
    /// 409 `attempt_not_cancellable`.
    #[error("attempt is {status} and can no longer be cancelled")]
    AttemptNotCancellable {
        /// The attempt's finished status (`succeeded`, `lost`, `failed`, `invalid` or `expired`).
        status: AttemptStatus,
    },
    /// 422 `contract_violation`: the result fails the activity's output contract.
    #[error("the result does not satisfy the output contract: {}", errors.join("; "))]
    ContractViolation {
        /// The output contract the result was checked against.
        contract_hash: String,
        /// Every way the result fails that contract, for humans.
        errors: Vec<String>,
    },
    /// 422 `invalid_result`: a worker's result or error cannot be stored as sent (it holds
    /// the character U+0000); the attempt is `invalid` and the retry/failover policy
    /// moves on, as after a contract violation.
    #[error("the result cannot be stored: {reason}")]
    InvalidResult {
        /// Where and why, for humans.
        reason: String,
    },
    /// 503 `unavailable`: the database does not answer.
    #[error("the database is unavailable")]
    Unavailable(#[source] StoreError),
    /// 500 `internal`: a bug or a database failure that is not the client's doing.
    #[error("internal error")]
    Internal(#[source] StoreError),
}

impl EngineError {
    /// An `invalid_request` error with a message naming the field.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        EngineError::InvalidRequest(message.into())
    }

    /// The docs/api.md error code.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::InvalidRequest(_) => "invalid_request",
            EngineError::MissingIdempotencyKey => "missing_idempotency_key",
            EngineError::InvalidIdempotencyKey => "invalid_idempotency_key",
            EngineError::Unauthenticated => "unauthenticated",
            EngineError::Forbidden => "forbidden",
            EngineError::NotFound => "not_found",
            EngineError::IdempotencyKeyReused { .. } => "idempotency_key_reused",
            EngineError::AttemptInFlight { .. } => "attempt_in_flight",
            EngineError::ProviderNotCertified { .. } => "provider_not_certified",
            EngineError::ActivityCompleted => "activity_completed",
            EngineError::JobFinished => "job_finished",
            EngineError::NotAWorkflow => "not_a_workflow",
            EngineError::JobNotResumable { .. } => "job_not_resumable",
            EngineError::LeaseLost => "lease_lost",
            EngineError::AttemptNotCancellable { .. } => "attempt_not_cancellable",
            EngineError::ContractViolation { .. } => "contract_violation",
            EngineError::InvalidResult { .. } => "invalid_result",
            EngineError::Unavailable(_) => "unavailable",
            EngineError::Internal(_) => "internal",
        }
    }

    /// The HTTP status docs/api.md gives this error.
    pub fn http_status(&self) -> u16 {
        match self {
            EngineError::InvalidRequest(_)
            | EngineError::MissingIdempotencyKey
            | EngineError::InvalidIdempotencyKey => 400,
            EngineError::Unauthenticated => 401,
            EngineError::Forbidden => 403,
            EngineError::NotFound => 404,
            EngineError::IdempotencyKeyReused { .. }
            | EngineError::AttemptInFlight { .. }
            | EngineError::ProviderNotCertified { .. }
            | EngineError::ActivityCompleted
            | EngineError::JobFinished
            | EngineError::NotAWorkflow
            | EngineError::JobNotResumable { .. }
            | EngineError::LeaseLost
            | EngineError::AttemptNotCancellable { .. } => 409,
            EngineError::ContractViolation { .. } | EngineError::InvalidResult { .. } => 422,
            EngineError::Unavailable(_) => 503,
            EngineError::Internal(_) => 500,
        }
    }

    /// The `details` object of the error body (`{}` when there is nothing to add).
    pub fn details(&self) -> Value {
        match self {
            EngineError::IdempotencyKeyReused { job_id } => json!({ "job_id": job_id }),
            EngineError::AttemptInFlight { attempt_id, status } => {
                json!({ "attempt_id": attempt_id, "status": status })
            }
            EngineError::ProviderNotCertified { provider, reason } => {
                json!({ "provider": provider, "reason": reason })
            }
            EngineError::AttemptNotCancellable { status } => json!({ "status": status }),
            EngineError::JobNotResumable { status, parked } => {
                json!({ "status": status, "parked": parked })
            }
            EngineError::InvalidResult { reason } => json!({ "reason": reason }),
            EngineError::ContractViolation {
                contract_hash,
                errors,
            } => {
                json!({ "contract_hash": contract_hash, "errors": errors })
            }
            _ => json!({}),
        }
    }
}

impl From<StoreError> for EngineError {
    fn from(err: StoreError) -> Self {
        if err.is_unavailable() {
            return EngineError::Unavailable(err);
        }
        match &err {
            // The engine refuses what a store cannot hold before it gets there (`text`,
            // request validation); should a value slip through, the client's input is
            // refused, never answered as the server's bug.
            StoreError::Database(sqlx::Error::Database(db))
                if is_unstorable_input(db.code().as_deref()) =>
            {
                EngineError::InvalidRequest(format!(
                    "a value of the request cannot be stored: {}",
                    db.message()
                ))
            }
            _ => EngineError::Internal(err),
        }
    }
}

/// SQLSTATEs of a value the database cannot hold: a NUL character in text or JSON
/// (`22P05`, `22021`), a number, time or interval out of range (`22003`, `22008`,
/// `22015`).
fn is_unstorable_input(code: Option<&str>) -> bool {
    matches!(code, Some("22P05" | "22021" | "22003" | "22008" | "22015"))
}
