//! Client endpoints: submit an intent, read it, list, cancel, resume, and the manual
//! attempt.

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use onceflow_protocol::api::{
    EventList, JobList, ManualAttempt, ResumeJobRequest, SignalRequestBody,
};

use super::error::{ApiResult, ErrorBody};
use super::extract::{json_value, path_id, As, ClientRole, JsonBody, QueryPairs, ReaderRole};
use super::AppState;
use crate::error::EngineError;
use crate::model::{AttemptView, JobStatus, JobView, SignalView};
use crate::request::{JobRequest, JobRequestBody, SignalRequest};
use crate::JobListQuery;

/// Submit an intent. Concurrent identical requests yield one 201 and the rest 200, all
/// with the same id.
#[utoipa::path(post, path = "/v1/jobs", tag = "client",
    request_body = JobRequestBody,
    params(("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters; scoped to the token's owner")),
    responses(
        (status = 201, description = "Created", body = JobView, headers(("Location" = String))),
        (status = 200, description = "Replayed: the same key and request were seen before", body = JobView, headers(("Idempotent-Replayed" = String))),
        (status = 400, description = "invalid_json, invalid_request, missing_idempotency_key, invalid_idempotency_key", body = ErrorBody),
        (status = 409, description = "idempotency_key_reused", body = ErrorBody),
    ))]
pub async fn submit(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    headers: HeaderMap,
    request: Request,
) -> ApiResult<Response> {
    let owner = caller.owner().to_owned();
    let key = match headers.get("idempotency-key") {
        None => return Err(EngineError::MissingIdempotencyKey.into()),
        Some(v) => v
            .to_str()
            .map_err(|_| EngineError::InvalidIdempotencyKey)?
            .to_owned(),
    };
    crate::request::check_idempotency_key(&key)?;
    let body = json_value(request, &state).await?;
    let job_request = JobRequest::from_json(&body)?;
    let submission = state.engine.submit(&owner, &key, &job_request).await?;
    let mut response = Json(&submission.job).into_response();
    if submission.replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    } else {
        *response.status_mut() = StatusCode::CREATED;
        if let Ok(location) = HeaderValue::from_str(&format!("/v1/jobs/{}", submission.job.id)) {
            response
                .headers_mut()
                .insert(axum::http::header::LOCATION, location);
        }
    }
    Ok(response)
}

/// The job, with its activities and their attempts.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "client",
    params(("id" = uuid::Uuid, Path)),
    responses((status = 200, body = JobView), (status = 404, description = "not_found", body = ErrorBody)))]
pub async fn get_job(
    State(state): State<AppState>,
    caller: As<ReaderRole>,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    Ok(Json(
        state
            .engine
            .job(&caller.read_scope(), path_id(&id)?)
            .await?,
    ))
}

/// The job's append-only history, a page at a time, oldest first.
#[utoipa::path(get, path = "/v1/jobs/{id}/events", tag = "client",
    params(("id" = uuid::Uuid, Path),
           ("after_seq" = Option<u64>, Query, description = "only events numbered above this (the previous page's `next`)"),
           ("limit" = Option<u32>, Query, description = "1–1000, default 100")),
    responses((status = 200, body = EventList), (status = 400, description = "invalid_request", body = ErrorBody),
              (status = 404, description = "not_found", body = ErrorBody)))]
pub async fn job_events(
    State(state): State<AppState>,
    caller: As<ReaderRole>,
    Path(id): Path<String>,
    query: QueryPairs,
) -> ApiResult<Json<EventList>> {
    let (events, next) = state
        .engine
        .job_events_page(
            &caller.read_scope(),
            path_id(&id)?,
            query.number("after_seq")?,
            query.number("limit")?,
        )
        .await?;
    Ok(Json(EventList { events, next }))
}

/// List jobs, newest first. A client sees its owner's; an operator every owner's.
#[utoipa::path(get, path = "/v1/jobs", tag = "client",
    params(
        ("status" = Option<String>, Query), ("workflow" = Option<String>, Query), ("activity" = Option<String>, Query),
        ("owner" = Option<String>, Query, description = "operators only; ignored for a client token"),
        ("created_after" = Option<String>, Query, description = "RFC 3339: only jobs created at or after this moment"),
        ("created_before" = Option<String>, Query, description = "RFC 3339: only jobs created before this moment"),
        ("limit" = Option<u32>, Query, description = "1–500, default 50"), ("after" = Option<String>, Query, description = "cursor")),
    responses((status = 200, body = JobList), (status = 400, description = "invalid_request", body = ErrorBody)))]
pub async fn list_jobs(
    State(state): State<AppState>,
    caller: As<ReaderRole>,
    query: QueryPairs,
) -> ApiResult<Json<JobList>> {
    let status = query
        .get("status")
        .map(|s| {
            JobStatus::parse(s).ok_or_else(|| {
                EngineError::invalid_request(format!("status: unknown job status `{s}`"))
            })
        })
        .transpose()?;
    let limit = query
        .number("limit")?
        .map(|l| u32::try_from(l).unwrap_or(u32::MAX));
    let page = state
        .engine
        .list_jobs(
            &caller.read_scope(),
            &JobListQuery {
                owner: query.get("owner").map(str::to_owned),
                status,
                workflow: query.get("workflow").map(str::to_owned),
                activity: query.get("activity").map(str::to_owned),
                limit,
                after: query.get("after").map(str::to_owned),
                created_after: query.time("created_after")?,
                created_before: query.time("created_before")?,
            },
        )
        .await?;
    Ok(Json(JobList {
        jobs: page.jobs,
        next: page.next,
    }))
}

/// The owner gives up the intent. Repeating answers 202 again. A workflow that declared a
/// compensation bound stays `running` (with `cancel_requested_at`) while it compensates.
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "client",
    params(("id" = uuid::Uuid, Path)),
    responses((status = 202, body = JobView), (status = 404, body = ErrorBody), (status = 409, description = "job_finished", body = ErrorBody)))]
pub async fn cancel_job(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let owner = caller.owner().to_owned();
    let job = state
        .engine
        .cancel_job(&crate::model::Scope::Owner(owner), path_id(&id)?)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// Resumes a failed job (or a parked workflow) under its own id and key: `running` again.
/// A client resumes its owner's jobs, an operator any owner's. Of concurrent resumes, one
/// succeeds and the others answer 409 `job_not_resumable`.
#[utoipa::path(post, path = "/v1/jobs/{id}/resume", tag = "client",
    params(("id" = uuid::Uuid, Path)), request_body = ResumeJobRequest,
    responses((status = 202, body = JobView), (status = 400, description = "invalid_json, invalid_request", body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, description = "job_not_resumable", body = ErrorBody)))]
pub async fn resume_job(
    State(state): State<AppState>,
    caller: As<ReaderRole>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ResumeJobRequest>,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let job = state
        .engine
        .resume_job(&caller.0 .0, path_id(&id)?, &body.reason)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// Sends a named signal to a workflow job. Concurrent identical requests under one key
/// record one signal: one 202, the rest 200 with the same signal.
#[utoipa::path(post, path = "/v1/jobs/{id}/signals", tag = "client",
    request_body = SignalRequestBody,
    params(("id" = uuid::Uuid, Path),
        ("Idempotency-Key" = String, Header, description = "1–255 visible ASCII characters; scoped to the job")),
    responses(
        (status = 202, description = "Recorded", body = SignalView),
        (status = 200, description = "Replayed: the same key and body were seen before", body = SignalView, headers(("Idempotent-Replayed" = String))),
        (status = 400, description = "invalid_json, invalid_request, missing_idempotency_key, invalid_idempotency_key", body = ErrorBody),
        (status = 404, description = "not_found", body = ErrorBody),
        (status = 409, description = "idempotency_key_reused, job_finished, not_a_workflow", body = ErrorBody),
    ))]
pub async fn send_signal(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path(id): Path<String>,
    headers: HeaderMap,
    request: Request,
) -> ApiResult<Response> {
    let owner = caller.owner().to_owned();
    let key = match headers.get("idempotency-key") {
        None => return Err(EngineError::MissingIdempotencyKey.into()),
        Some(v) => v
            .to_str()
            .map_err(|_| EngineError::InvalidIdempotencyKey)?
            .to_owned(),
    };
    crate::request::check_idempotency_key(&key)?;
    let job_id = path_id(&id)?;
    let body = json_value(request, &state).await?;
    let signal = SignalRequest::from_json(&body)?;
    let taken = state
        .engine
        .signal(&crate::model::Scope::Owner(owner), job_id, &key, &signal)
        .await?;
    let mut response = Json(&taken.signal).into_response();
    if taken.replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    } else {
        *response.status_mut() = StatusCode::ACCEPTED;
    }
    Ok(response)
}

/// The user's "try the fallback" button: a new attempt of an activity at a provider.
#[utoipa::path(post, path = "/v1/jobs/{id}/activities/{seq}/attempts", tag = "client",
    params(("id" = uuid::Uuid, Path), ("seq" = i32, Path)),
    request_body = ManualAttempt,
    responses(
        (status = 201, body = AttemptView),
        (status = 404, body = ErrorBody),
        (status = 409, description = "activity_completed, attempt_in_flight, provider_not_certified", body = ErrorBody)))]
pub async fn create_attempt(
    State(state): State<AppState>,
    caller: As<ClientRole>,
    Path((id, seq)): Path<(String, String)>,
    JsonBody(body): JsonBody<ManualAttempt>,
) -> ApiResult<(StatusCode, Json<AttemptView>)> {
    let owner = caller.owner().to_owned();
    let seq: i32 = seq.parse().map_err(|_| EngineError::NotFound)?;
    let attempt = state
        .engine
        .create_attempt(
            &crate::model::Scope::Owner(owner),
            path_id(&id)?,
            seq,
            &body.provider,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(attempt)))
}
