//! Admin endpoints: mint and revoke tokens.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use onceflow_protocol::api::TokenRequest;

use super::error::{ApiResult, ErrorBody};
use super::extract::{path_id, AdminRole, As, JsonBody};
use super::AppState;
use crate::error::EngineError;
use crate::model::{IssuedToken, Role};

/// Mint a token. It is shown this once and stored only as a hash.
#[utoipa::path(post, path = "/v1/tokens", tag = "admin", request_body = TokenRequest,
    responses((status = 201, body = IssuedToken), (status = 400, body = ErrorBody)))]
pub async fn create_token(
    State(state): State<AppState>,
    _admin: As<AdminRole>,
    JsonBody(body): JsonBody<TokenRequest>,
) -> ApiResult<(StatusCode, Json<IssuedToken>)> {
    let role = Role::parse(&body.role).ok_or_else(|| {
        EngineError::invalid_request("role: must be one of client, worker, operator, admin")
    })?;
    Ok((
        StatusCode::CREATED,
        Json(state.engine.create_token(&body.owner, role).await?),
    ))
}

/// Revoke a token; it stops working at once.
#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "admin", params(("id" = uuid::Uuid, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke_token(
    State(state): State<AppState>,
    _admin: As<AdminRole>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    state.engine.revoke_token(path_id(&id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}
