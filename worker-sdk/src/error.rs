//! Errors: what a handler returns ([`ActivityError`]) and what the SDK reports
//! ([`SdkError`]).

use serde_json::Value;

/// How an activity handler failed. The engine's retry policy reads `retryable`: a
/// retryable error tries the same provider again after backoff (within the activity's
/// budget); a fatal one moves on to the next certified provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ActivityError {
    /// For humans; recorded on the attempt.
    pub message: String,
    /// Whether the same provider may try again.
    pub retryable: bool,
}

impl ActivityError {
    /// A failure worth retrying at the same provider (a timeout, a 429, a 503).
    pub fn retryable(message: impl Into<String>) -> Self {
        ActivityError {
            message: message.into(),
            retryable: true,
        }
    }

    /// A failure the same provider will not get past (a 400, a refused card): fail over.
    pub fn fatal(message: impl Into<String>) -> Self {
        ActivityError {
            message: message.into(),
            retryable: false,
        }
    }
}

/// Errors of the SDK: talking to the engine, or misconfiguration.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SdkError {
    /// The engine answered with an API error (see docs/api.md for the codes).
    #[error("{status} {code}: {message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The docs/api.md error code, e.g. `attempt_in_flight`.
        code: String,
        /// For humans.
        message: String,
        /// The error's `details`.
        details: Value,
    },
    /// The engine could not be reached or answered something that is not the API.
    #[error("transport: {0}")]
    Transport(String),
    /// The worker was configured in a way that cannot work.
    #[error("configuration: {0}")]
    Config(String),
}

impl SdkError {
    /// The docs/api.md error code, if the engine answered one.
    pub fn code(&self) -> Option<&str> {
        match self {
            SdkError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether retrying the same request later may succeed (unreachable engine, 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            SdkError::Transport(_) => true,
            SdkError::Api { status, .. } => *status >= 500,
            SdkError::Config(_) => false,
        }
    }
}
