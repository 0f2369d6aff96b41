//! Operator endpoints: find stuck attempts across owners, cancel one out-of-band.

use axum::extract::{Path, State};
use axum::Json;
use onceflow_protocol::api::{CancelAttemptRequest, StuckList};

use super::error::{ApiResult, ErrorBody};
use super::extract::{path_id, As, JsonBody, OperatorRole, QueryPairs};
use super::AppState;
use crate::error::EngineError;
use crate::model::{AttemptStatus, AttemptView};
use crate::StuckAttemptsQuery;

/// Attempts `started` or `unknown` for at least `older_than_s`, across owners.
#[utoipa::path(get, path = "/v1/attempts", tag = "operator",
    params(("status" = Option<String>, Query, description = "comma-separated: unknown,started"),
           ("older_than_s" = Option<u64>, Query), ("limit" = Option<u32>, Query, description = "1–500, default 100")),
    responses((status = 200, body = StuckList), (status = 400, body = ErrorBody)))]
pub async fn stuck_attempts(
    State(state): State<AppState>,
    _operator: As<OperatorRole>,
    query: QueryPairs,
) -> ApiResult<Json<StuckList>> {
    let statuses = match query.get("status") {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                AttemptStatus::parse(s).ok_or_else(|| {
                    EngineError::invalid_request(format!("status: unknown attempt status `{s}`"))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let attempts = state
        .engine
        .stuck_attempts(&StuckAttemptsQuery {
            statuses,
            older_than_s: query.number("older_than_s")?.unwrap_or(0),
            limit: query
                .number("limit")?
                .map(|l| u32::try_from(l).unwrap_or(u32::MAX)),
        })
        .await?;
    Ok(Json(StuckList { attempts }))
}

/// Cancel a live attempt out-of-band, with a reason. Idempotent.
#[utoipa::path(post, path = "/v1/attempts/{id}/cancel", tag = "operator",
    params(("id" = uuid::Uuid, Path)), request_body = CancelAttemptRequest,
    responses((status = 200, body = AttemptView), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, description = "attempt_not_cancellable", body = ErrorBody)))]
pub async fn cancel_attempt(
    State(state): State<AppState>,
    caller: As<OperatorRole>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<CancelAttemptRequest>,
) -> ApiResult<Json<AttemptView>> {
    let operator = caller.owner().to_owned();
    Ok(Json(
        state
            .engine
            .cancel_attempt(&operator, path_id(&id)?, &body.reason)
            .await?,
    ))
}
