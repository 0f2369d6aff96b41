//! Schedule endpoints (docs/api.md, Schedules): owner-scoped like jobs, role `client`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use onceflow_protocol::api::{ScheduleEventList, ScheduleList, ScheduleRequestBody};

use super::error::{ApiResult, ErrorBody};
use super::extract::{As, ClientRole, JsonBody, QueryPairs};
use super::AppState;
use crate::model::ScheduleView;

/// Create or replace a schedule. Each tick submits `job` once, with idempotency key
/// `schedule:{name}:{tick time}`, however many engines run.
#[utoipa::path(put, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "1–128 characters of A-Z a-z 0-9 - _ .")),
    request_body = ScheduleRequestBody,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 200, description = "Replaced", body = ScheduleView),
        (status = 400, description = "invalid_request: a cron expression, time zone or job that does not parse", body = ErrorBody)))]
pub async fn put_schedule(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<ScheduleRequestBody>,
) -> ApiResult<(StatusCode, Json<ScheduleView>)> {
    let put = state
        .engine
        .put_schedule(caller.owner(), &name, &body)
        .await?;
    let status = if put.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(put.schedule)))
}

/// The owner's schedules, by name.
#[utoipa::path(get, path = "/v1/schedules", tag = "schedules", responses((status = 200, body = ScheduleList)))]
pub async fn list_schedules(
    State(state): State<AppState>,
    caller: As<ClientRole>,
) -> ApiResult<Json<ScheduleList>> {
    Ok(Json(ScheduleList {
        schedules: state.engine.list_schedules(caller.owner()).await?,
    }))
}

/// One schedule, with `next_fire_at`, `last_fired_at` and its counters.
#[utoipa::path(get, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path)),
    responses((status = 200, body = ScheduleView), (status = 404, description = "not_found", body = ErrorBody)))]
pub async fn get_schedule(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleView>> {
    Ok(Json(state.engine.schedule(caller.owner(), &name).await?))
}

/// Delete a schedule and its history; jobs its ticks submitted stay.
#[utoipa::path(delete, path = "/v1/schedules/{name}", tag = "schedules",
    params(("name" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, description = "not_found", body = ErrorBody)))]
pub async fn delete_schedule(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    state.engine.delete_schedule(caller.owner(), &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pause a schedule: no tick fires until it is resumed. Idempotent.
#[utoipa::path(post, path = "/v1/schedules/{name}/pause", tag = "schedules",
    params(("name" = String, Path)),
    responses((status = 200, body = ScheduleView), (status = 404, description = "not_found", body = ErrorBody)))]
pub async fn pause_schedule(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleView>> {
    Ok(Json(
        state.engine.pause_schedule(caller.owner(), &name).await?,
    ))
}

/// Resume a schedule from its first tick after now. Idempotent.
#[utoipa::path(post, path = "/v1/schedules/{name}/resume", tag = "schedules",
    params(("name" = String, Path)),
    responses((status = 200, body = ScheduleView), (status = 404, description = "not_found", body = ErrorBody)))]
pub async fn resume_schedule(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(name): Path<String>,
) -> ApiResult<Json<ScheduleView>> {
    Ok(Json(
        state.engine.resume_schedule(caller.owner(), &name).await?,
    ))
}

/// The schedule's history: fired, skipped for overlap, skipped as too old, changes.
#[utoipa::path(get, path = "/v1/schedules/{name}/events", tag = "schedules",
    params(("name" = String, Path), ("limit" = Option<u32>, Query, description = "the latest 1–1000, default 100")),
    responses((status = 200, body = ScheduleEventList), (status = 404, description = "not_found", body = ErrorBody)))]
pub async fn schedule_events(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(name): Path<String>,
    query: QueryPairs,
) -> ApiResult<Json<ScheduleEventList>> {
    let events = state
        .engine
        .schedule_events(caller.owner(), &name, query.number("limit")?)
        .await?;
    Ok(Json(ScheduleEventList { events }))
}
