//! Worker endpoints: long-poll for tasks, heartbeat, complete, contracts, certifications.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use onceflow_protocol::api::{
    CertificationRequest, CompleteRequest, CompleteResponse, ContractRequest, ContractResponse, HeartbeatRequest,
    HeartbeatResponse, PollRequest, PollResponse, MAX_WAIT_MS,
};

use super::error::{ApiResult, ErrorBody};
use super::extract::{path_id, As, Caller, JsonBody, WorkerRole};
use super::AppState;
use crate::error::EngineError;
use onceflow_protocol::workflow::{CompleteWorkflowTaskRequest, CompleteWorkflowTaskResponse};
use crate::model::{Certification, Scope};
use crate::{ClaimRequest, Completion, CompletionBody};














fn worker_scope(caller: &Caller) -> ApiResult<Scope> {
    Ok(Scope::for_worker(caller.owner()))
}

/// Long-poll for tasks: answers as soon as a task is available, or with an empty list
/// after `wait_ms`.
#[utoipa::path(post, path = "/v1/worker/poll", tag = "worker", request_body = PollRequest,
    responses((status = 200, body = PollResponse), (status = 400, body = ErrorBody)))]
pub async fn poll(State(state): State<AppState>, caller: As<WorkerRole>, JsonBody(body): JsonBody<PollRequest>) -> ApiResult<Json<PollResponse>> {
    let scope = worker_scope(&caller)?;
    if body.wait_ms > MAX_WAIT_MS {
        return Err(EngineError::invalid_request(format!("wait_ms: must be at most {MAX_WAIT_MS}")).into());
    }
    let request = ClaimRequest {
        worker_id: body.worker_id,
        task_queue: body.task_queue,
        providers: body.providers.into_iter().map(|p| (p.activity, p.provider)).collect(),
        max_tasks: body.max_tasks,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(body.wait_ms);
    let signal = state.engine.work_signal();
    loop {
        // Register interest before looking, so a wake-up between the two is not missed.
        let woken = signal.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let tasks = state.engine.claim_tasks(&scope, &request, &body.workflows).await?;
        let now = tokio::time::Instant::now();
        if !tasks.is_empty() || now >= deadline {
            return Ok(Json(PollResponse { tasks }));
        }
        let recheck = now + state.config.poll_recheck;
        tokio::select! {
            _ = &mut woken => {}
            _ = tokio::time::sleep_until(recheck.min(deadline)) => {}
            _ = state.shutdown.cancelled() => return Ok(Json(PollResponse { tasks: Vec::new() })),
        }
    }
}

/// Complete a workflow task with the commands its replay produced (format: docs/workflows.md).
#[utoipa::path(post, path = "/v1/worker/workflow-tasks/{job_id}/complete", tag = "worker",
    params(("job_id" = uuid::Uuid, Path)), request_body = CompleteWorkflowTaskRequest,
    responses((status = 200, body = CompleteWorkflowTaskResponse), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, description = "lease_lost", body = ErrorBody)))]
pub async fn complete_workflow_task(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    Path(job_id): Path<String>,
    JsonBody(body): JsonBody<CompleteWorkflowTaskRequest>,
) -> ApiResult<Json<CompleteWorkflowTaskResponse>> {
    let scope = worker_scope(&caller)?;
    let outcome = state.engine.complete_workflow_task(&scope, path_id(&job_id)?, &body).await?;
    Ok(Json(CompleteWorkflowTaskResponse { outcome: outcome.as_str().to_owned() }))
}

/// Renew the lease; learn whether the attempt was cancelled.
#[utoipa::path(post, path = "/v1/worker/attempts/{id}/heartbeat", tag = "worker",
    params(("id" = uuid::Uuid, Path)), request_body = HeartbeatRequest,
    responses((status = 200, body = HeartbeatResponse), (status = 404, body = ErrorBody), (status = 409, description = "lease_lost", body = ErrorBody)))]
pub async fn heartbeat(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<HeartbeatRequest>,
) -> ApiResult<Json<HeartbeatResponse>> {
    let scope = worker_scope(&caller)?;
    let ack = state.engine.heartbeat(&scope, path_id(&id)?, body.lease_token, body.details.as_ref()).await?;
    Ok(Json(HeartbeatResponse { cancel_requested: ack.cancel_requested }))
}

/// Report a result (judged by CAS) or an error (judged by the retry policy).
#[utoipa::path(post, path = "/v1/worker/attempts/{id}/complete", tag = "worker",
    params(("id" = uuid::Uuid, Path)), request_body = CompleteRequest,
    responses(
        (status = 200, body = CompleteResponse),
        (status = 404, body = ErrorBody),
        (status = 409, description = "lease_lost", body = ErrorBody),
        (status = 422, description = "contract_violation", body = ErrorBody)))]
pub async fn complete(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<CompleteRequest>,
) -> ApiResult<Json<CompleteResponse>> {
    let scope = worker_scope(&caller)?;
    let completion_body = match (body.result, body.error) {
        (Some(result), None) => CompletionBody::Result(result),
        (None, Some(error)) => CompletionBody::Error { message: error.message, retryable: error.retryable },
        _ => return Err(EngineError::invalid_request("exactly one of `result` or `error` is required").into()),
    };
    let outcome = state
        .engine
        .complete(&scope, path_id(&id)?, &Completion { lease_token: body.lease_token, body: completion_body })
        .await?;
    Ok(Json(CompleteResponse { outcome }))
}

/// Register (or confirm) an activity's output contract.
#[utoipa::path(post, path = "/v1/worker/contracts", tag = "worker", request_body = ContractRequest,
    responses((status = 200, body = ContractResponse), (status = 400, body = ErrorBody)))]
pub async fn register_contract(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    JsonBody(body): JsonBody<ContractRequest>,
) -> ApiResult<Json<ContractResponse>> {
    worker_scope(&caller)?;
    let contract_hash = state.engine.register_contract(caller.owner(), &body.activity, &body.output_schema).await?;
    Ok(Json(ContractResponse { contract_hash }))
}

/// Record a certification run of a provider against a contract.
#[utoipa::path(post, path = "/v1/worker/certifications", tag = "worker", request_body = CertificationRequest,
    responses((status = 201, body = Certification), (status = 400, body = ErrorBody)))]
pub async fn record_certification(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    JsonBody(body): JsonBody<CertificationRequest>,
) -> ApiResult<(StatusCode, Json<Certification>)> {
    worker_scope(&caller)?;
    let certification = state
        .engine
        .record_certification(
            caller.owner(),
            &body.activity,
            &body.provider,
            &body.contract_hash,
            body.passed,
            body.report.unwrap_or_else(|| serde_json::json!({})),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(certification)))
}
