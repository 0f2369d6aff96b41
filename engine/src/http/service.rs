//! Service endpoints (no auth): liveness, readiness, the OpenAPI document.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::AppState;

/// 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "service", responses((status = 200)))]
pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// 200 when the database answers, else 503.
#[utoipa::path(get, path = "/readyz", tag = "service", responses((status = 200), (status = 503)))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    match tokio::time::timeout(std::time::Duration::from_secs(2), state.engine.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, Json(json!({ "status": "ready" }))),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({ "error": { "code": "unavailable", "message": "the database does not answer", "details": {} } }),
            ),
        ),
    }
}

/// Prometheus metrics (text exposition format).
#[utoipa::path(get, path = "/metrics", tag = "service", responses((status = 200, content_type = "text/plain"), (status = 503)))]
pub async fn metrics(State(state): State<AppState>) -> axum::response::Response {
    use axum::response::IntoResponse;
    match state.engine.metrics_text().await {
        Ok(text) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4",
            )],
            text,
        )
            .into_response(),
        Err(e) => super::error::ApiError::from(e).into_response(),
    }
}
