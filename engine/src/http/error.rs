//! The HTTP layer's errors and their JSON bodies. Every rejection the server makes, from
//! routing to the domain, becomes `{"error": {"code", "message", "details"}}` here, with
//! the status docs/api.md gives it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

pub use onceflow_protocol::api::{ErrorBody, ErrorDetail};

use crate::error::EngineError;

/// Errors of the HTTP layer: the domain's, plus what only HTTP can get wrong.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A domain error; its code and status come from [`EngineError::code`].
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// 400 `invalid_json`: the body is not JSON (whatever its `Content-Type`), or nests
    /// too deep.
    #[error("the body is not valid JSON: {0}")]
    InvalidJson(String),
    /// 413 `payload_too_large`.
    #[error("the body is larger than the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// 404 `not_found` for a route that does not exist.
    #[error("no such route")]
    NoRoute,
    /// 405 `method_not_allowed`.
    #[error("this method is not allowed on this route")]
    MethodNotAllowed,
    /// 503 `request_timeout`: the request took longer than the server's limit.
    #[error("the request took too long")]
    Timeout,
    /// 500 `internal`: a handler panicked. A bug, never the client's doing.
    #[error("internal error")]
    Panic,
}

impl ApiError {
    /// The docs/api.md code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Engine(e) => e.code(),
            ApiError::InvalidJson(_) => "invalid_json",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::NoRoute => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Timeout => "request_timeout",
            ApiError::Panic => "internal",
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        let code = match self {
            ApiError::Engine(e) => e.http_status(),
            ApiError::InvalidJson(_) => 400,
            ApiError::PayloadTooLarge { .. } => 413,
            ApiError::NoRoute => 404,
            ApiError::MethodNotAllowed => 405,
            ApiError::Timeout => 503,
            ApiError::Panic => 500,
        };
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn details(&self) -> Value {
        match self {
            ApiError::Engine(e) => e.details(),
            ApiError::PayloadTooLarge { limit } => json!({ "limit_bytes": limit }),
            _ => json!({}),
        }
    }

    /// The error as docs/api.md's error body shows it (its `error` member).
    pub fn detail(&self) -> ErrorDetail {
        ErrorDetail {
            code: self.code().to_owned(),
            message: self.to_string(),
            details: self.details(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = ?self, code = self.code(), "request failed");
        }
        let body = ErrorBody {
            error: self.detail(),
        };
        (status, Json(body)).into_response()
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;
