//! Worker endpoints: long-poll for tasks, heartbeat, complete, contracts, certifications.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use onceflow_protocol::api::{
    AttemptCompletion, CertificationRequest, CompleteManyRequest, CompleteManyResponse,
    CompleteRequest, CompleteResponse, CompletionAnswer, ContractRequest, ContractResponse,
    HeartbeatRequest, HeartbeatResponse, PollRequest, PollResponse, WorkerError, MAX_COMPLETIONS,
    MAX_WAIT_MS,
};

use super::error::{ApiError, ApiResult, ErrorBody};
use super::extract::{path_id, AnswerBody, As, Caller, JsonBody, WorkerRole};
use super::AppState;
use crate::error::EngineError;
use crate::model::{Certification, CompletionOutcome, Scope};
use crate::{ClaimRequest, Completion, CompletionBody};
use onceflow_protocol::workflow::{
    CompleteWorkflowTaskRequest, CompleteWorkflowTaskResponse, Task, WorkflowHistoryRequest,
    WorkflowTask,
};

fn worker_scope(caller: &Caller) -> ApiResult<Scope> {
    Ok(Scope::for_worker(caller.owner()))
}

/// Long-poll for tasks: answers as soon as a task is available, or with an empty list
/// after `wait_ms`.
#[utoipa::path(post, path = "/v1/worker/poll", tag = "worker", request_body = PollRequest,
    responses((status = 200, body = PollResponse), (status = 400, body = ErrorBody)))]
pub async fn poll(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    AnswerBody(body): AnswerBody<PollRequest>,
) -> ApiResult<Json<PollResponse>> {
    let scope = worker_scope(&caller)?;
    if body.wait_ms > MAX_WAIT_MS {
        return Err(EngineError::invalid_request(format!(
            "wait_ms: must be at most {MAX_WAIT_MS}"
        ))
        .into());
    }
    if body.completions.len() > MAX_COMPLETIONS {
        return Err(EngineError::invalid_request(format!(
            "completions: must hold at most {MAX_COMPLETIONS}"
        ))
        .into());
    }
    let request = ClaimRequest {
        worker_id: body.worker_id,
        task_queue: body.task_queue,
        providers: body
            .providers
            .into_iter()
            .map(|p| (p.activity, p.provider))
            .collect(),
        max_tasks: body.max_tasks,
    };
    // A request that will be refused as a whole must not have judged its completions.
    request.validate()?;
    let carried = !body.completions.is_empty();
    if carried && body.workflows.is_empty() {
        // The worker's whole cycle in one call: its completions and its claim.
        let (accepted, mut answers) = accept_completions(body.completions);
        let (judged, tasks) = state
            .engine
            .complete_and_claim(&scope, &accepted, &request)
            .await?;
        let completions = answer_completions(&mut answers, judged);
        let tasks = tasks.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "claim after completions failed; answering the completions with no tasks");
            Vec::new()
        });
        return Ok(Json(PollResponse {
            tasks: tasks.into_iter().map(Task::Activity).collect(),
            completions,
        }));
    }
    let completions = if carried {
        judge_completions(&state, &scope, body.completions).await
    } else {
        Vec::new()
    };
    // Completions' answers are not held up by the wait.
    let wait_ms = if carried { 0 } else { body.wait_ms };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let signal = state.engine.work_signal();
    loop {
        // Register interest before looking, so a wake-up between the two is not missed.
        let woken = signal.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let tasks = match state
            .engine
            .claim_tasks(&scope, &request, &body.workflows)
            .await
        {
            Ok(tasks) => tasks,
            // The completions were judged: answer them, with no tasks, rather than an
            // error that would hide their outcomes.
            Err(e) if carried => {
                tracing::warn!(error = %e, "claim after completions failed; answering the completions with no tasks");
                Vec::new()
            }
            Err(e) => return Err(e.into()),
        };
        let now = tokio::time::Instant::now();
        if !tasks.is_empty() || now >= deadline {
            return Ok(Json(PollResponse { tasks, completions }));
        }
        let recheck = now + state.config.poll_recheck;
        // Counted as waiting until woken, re-checking or done.
        let _waiting = state.engine.long_poll_waiting();
        tokio::select! {
            _ = &mut woken => {}
            _ = tokio::time::sleep_until(recheck.min(deadline)) => {}
            _ = state.shutdown.cancelled() => return Ok(Json(PollResponse { tasks: Vec::new(), completions })),
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
    AnswerBody(body): AnswerBody<CompleteWorkflowTaskRequest>,
) -> ApiResult<Json<CompleteWorkflowTaskResponse>> {
    let scope = worker_scope(&caller)?;
    let outcome = state
        .engine
        .complete_workflow_task(&scope, path_id(&job_id)?, &body)
        .await?;
    Ok(Json(CompleteWorkflowTaskResponse {
        outcome: outcome.as_str().to_owned(),
    }))
}

/// The whole history of a workflow task handed out with only its new part (sticky
/// execution), for a worker that does not hold the workflow's state (format:
/// docs/workflows.md).
#[utoipa::path(post, path = "/v1/worker/workflow-tasks/{job_id}/history", tag = "worker",
    params(("job_id" = uuid::Uuid, Path)), request_body = WorkflowHistoryRequest,
    responses((status = 200, body = WorkflowTask), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, description = "lease_lost", body = ErrorBody)))]
pub async fn workflow_history(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    Path(job_id): Path<String>,
    AnswerBody(body): AnswerBody<WorkflowHistoryRequest>,
) -> ApiResult<Json<WorkflowTask>> {
    let scope = worker_scope(&caller)?;
    let task = state
        .engine
        .workflow_history(&scope, path_id(&job_id)?, body.lease_token)
        .await?;
    Ok(Json(task))
}

/// Renew the lease; learn whether the attempt was cancelled.
#[utoipa::path(post, path = "/v1/worker/attempts/{id}/heartbeat", tag = "worker",
    params(("id" = uuid::Uuid, Path)), request_body = HeartbeatRequest,
    responses((status = 200, body = HeartbeatResponse), (status = 404, body = ErrorBody), (status = 409, description = "lease_lost", body = ErrorBody)))]
pub async fn heartbeat(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    Path(id): Path<String>,
    AnswerBody(body): AnswerBody<HeartbeatRequest>,
) -> ApiResult<Json<HeartbeatResponse>> {
    let scope = worker_scope(&caller)?;
    let ack = state
        .engine
        .heartbeat(
            &scope,
            path_id(&id)?,
            body.lease_token,
            body.details.as_ref(),
        )
        .await?;
    Ok(Json(HeartbeatResponse {
        cancel_requested: ack.cancel_requested,
    }))
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
    AnswerBody(body): AnswerBody<CompleteRequest>,
) -> ApiResult<Json<CompleteResponse>> {
    let scope = worker_scope(&caller)?;
    let completion = completion(body.lease_token, body.result, body.error)?;
    let outcome = state
        .engine
        .complete(&scope, path_id(&id)?, &completion)
        .await?;
    Ok(Json(CompleteResponse { outcome }))
}

/// A completion as the engine takes it: exactly one of a result or an error.
fn completion(
    lease_token: uuid::Uuid,
    result: Option<serde_json::Value>,
    error: Option<WorkerError>,
) -> Result<Completion, EngineError> {
    let body = match (result, error) {
        (Some(result), None) => CompletionBody::Result(result),
        (None, Some(error)) => CompletionBody::Error {
            message: error.message,
            retryable: error.retryable,
        },
        _ => {
            return Err(EngineError::invalid_request(
                "exactly one of `result` or `error` is required",
            ))
        }
    };
    Ok(Completion { lease_token, body })
}

/// Report how several attempts ended in one request: each completion is judged exactly as
/// `POST /v1/worker/attempts/{id}/complete` judges it alone and answered on its own, with
/// an outcome or with the status and error that endpoint would have answered.
#[utoipa::path(post, path = "/v1/worker/completions", tag = "worker", request_body = CompleteManyRequest,
    responses((status = 200, body = CompleteManyResponse), (status = 400, body = ErrorBody)))]
pub async fn complete_many(
    State(state): State<AppState>,
    caller: As<WorkerRole>,
    AnswerBody(body): AnswerBody<CompleteManyRequest>,
) -> ApiResult<Json<CompleteManyResponse>> {
    let scope = worker_scope(&caller)?;
    if body.completions.is_empty() || body.completions.len() > MAX_COMPLETIONS {
        return Err(EngineError::invalid_request(format!(
            "completions: must hold 1 to {MAX_COMPLETIONS}"
        ))
        .into());
    }
    let results = judge_completions(&state, &scope, body.completions).await;
    Ok(Json(CompleteManyResponse { results }))
}

/// Judges each completion as the single-attempt endpoint would, and answers each: its
/// outcome, or the status and error that endpoint would have answered.
async fn judge_completions(
    state: &AppState,
    scope: &Scope,
    completions: Vec<AttemptCompletion>,
) -> Vec<CompletionAnswer> {
    let (accepted, mut answers) = accept_completions(completions);
    let judged = state.engine.complete_many(scope, &accepted).await;
    answer_completions(&mut answers, judged)
}

/// A completion's answer while it is being judged: its attempt, and its answer once known.
type Answering = (uuid::Uuid, Option<Result<CompletionOutcome, EngineError>>);

/// The well-formed completions, for the engine to judge, and every completion's place in
/// the answer (the malformed ones already answered).
fn accept_completions(
    completions: Vec<AttemptCompletion>,
) -> (Vec<(uuid::Uuid, Completion)>, Vec<Answering>) {
    let mut accepted = Vec::with_capacity(completions.len());
    let mut answers = Vec::with_capacity(completions.len());
    for c in completions {
        match completion(c.lease_token, c.result, c.error) {
            Ok(completion) => {
                accepted.push((c.attempt_id, completion));
                answers.push((c.attempt_id, None));
            }
            Err(e) => answers.push((c.attempt_id, Some(Err(e)))),
        }
    }
    (accepted, answers)
}

/// Every completion's answer, in order: the engine's judgements fill the places left open.
fn answer_completions(
    answers: &mut Vec<Answering>,
    judged: Vec<Result<CompletionOutcome, EngineError>>,
) -> Vec<CompletionAnswer> {
    let mut judged = judged.into_iter();
    answers
        .drain(..)
        .map(
            |(attempt_id, answer)| match answer.or_else(|| judged.next()) {
                Some(Ok(outcome)) => CompletionAnswer {
                    attempt_id,
                    outcome: Some(outcome),
                    status: None,
                    error: None,
                },
                Some(Err(e)) => {
                    let e = ApiError::from(e);
                    CompletionAnswer {
                        attempt_id,
                        outcome: None,
                        status: Some(e.status().as_u16()),
                        error: Some(e.detail()),
                    }
                }
                // The engine answers every completion it is given.
                None => CompletionAnswer {
                    attempt_id,
                    outcome: None,
                    status: Some(500),
                    error: Some(ApiError::Panic.detail()),
                },
            },
        )
        .collect()
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
    let contract_hash = state
        .engine
        .register_contract(caller.owner(), &body.activity, &body.output_schema)
        .await?;
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
