//! Cancellation that reaches workflow code: a workflow that declared a compensation bound
//! learns of its job's cancel (its pending step resolves to `job_cancelled`), compensates,
//! and the job ends `cancelled`; within its bound, once, whatever races it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::model::{JobStatus, Scope};
use onceflow_engine::{ClaimRequest, Engine, JobRequest, WorkflowTaskOutcome};
use onceflow_protocol::workflow::{
    CompleteWorkflowTaskRequest, Task, WorkflowCommand, WorkflowTask,
};
use onceflow_tests::server::TestServer;
use onceflow_tests::{event_types, rules, wait_for, ALICE};
use onceflow_worker::api::JobRequestBody;
use onceflow_worker::{
    ActivityContext, ActivityError, Client, Worker, WorkflowContext, WorkflowError,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    id: String,
    /// How long the workflow may compensate, in ms (0: it declares no bound).
    bound_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Charge {
    charge_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Refund {
    refunded: String,
}

/// The saga: charge, wait a day (say, for the goods), ship. Cancelled while waiting, it
/// refunds the charge and says so.
async fn saga(ctx: WorkflowContext, order: Order) -> Result<String, WorkflowError> {
    if order.bound_ms > 0 {
        ctx.compensate_within(Duration::from_millis(order.bound_ms));
    }
    let charge: Charge = ctx.activity("charge", &order).await?;
    match ctx.sleep(Duration::from_secs(24 * 3600)).await {
        Ok(()) => {}
        Err(cancelled) if cancelled.is_cancelled() => {
            assert!(
                ctx.is_cancelled(),
                "the cancel is delivered when the step resolves"
            );
            let refund: Refund = ctx.activity("refund", &charge).await?;
            return Ok(format!("refunded {}", refund.refunded));
        }
        Err(other) => return Err(other),
    }
    let shipped: Charge = ctx.activity("ship", &charge).await?;
    Ok(format!("shipped {}", shipped.charge_id))
}

/// Charge then ship at once: used where the cancel arrives between the two, before any
/// workflow task scheduled `ship`.
async fn quick_saga(ctx: WorkflowContext, order: Order) -> Result<String, WorkflowError> {
    ctx.compensate_within(Duration::from_millis(order.bound_ms));
    let charge: Charge = ctx.activity("charge", &order).await?;
    match ctx.activity::<Charge>("ship", &charge).await {
        Ok(shipped) => Ok(format!("shipped {}", shipped.charge_id)),
        Err(failed) if failed.is_cancelled() => {
            let refund: Refund = ctx.activity("refund", &charge).await?;
            Ok(format!("refunded {}", refund.refunded))
        }
        Err(failed) => Err(failed.into()),
    }
}

/// What the providers saw.
#[derive(Default)]
struct Calls {
    charge: AtomicU32,
    ship: AtomicU32,
    refunds: Mutex<Vec<String>>,
}

/// What a test worker runs.
#[derive(Clone, Copy, PartialEq)]
enum Runs {
    /// The sagas and the providers.
    All,
    /// The sagas only.
    Workflows,
    /// The providers only.
    Providers,
    /// The sagas and the providers, with a `refund` that never finishes.
    HangingRefund,
}

/// A worker that runs `runs`, running until its shutdown token is cancelled.
fn worker(
    server: &TestServer,
    calls: &Arc<Calls>,
    runs: Runs,
) -> (Arc<Worker>, tokio::task::JoinHandle<()>) {
    let refund_hangs = runs == Runs::HangingRefund;
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls.clone());
    let mut builder = Worker::builder(&server.api.url, &server.tokens.worker);
    if runs != Runs::Workflows {
        builder = builder
            .provider(
                "charge",
                "charge",
                move |_ctx: ActivityContext, o: Order| {
                    let c = c1.clone();
                    async move {
                        c.charge.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ActivityError>(Charge {
                            charge_id: format!("ch-{}", o.id),
                        })
                    }
                },
            )
            .provider("ship", "ship", move |_ctx: ActivityContext, ch: Charge| {
                let c = c2.clone();
                async move {
                    c.ship.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ActivityError>(ch)
                }
            })
            .provider(
                "refund",
                "refund",
                move |_ctx: ActivityContext, ch: Charge| {
                    let c = c3.clone();
                    async move {
                        if refund_hangs {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                        }
                        c.refunds.lock().unwrap().push(ch.charge_id.clone());
                        Ok::<_, ActivityError>(Refund {
                            refunded: ch.charge_id,
                        })
                    }
                },
            );
    }
    if runs != Runs::Providers {
        builder = builder
            .workflow("saga", saga)
            .workflow("quick_saga", quick_saga);
    }
    let worker = Arc::new(builder.build().unwrap());
    let w = worker.clone();
    let running = tokio::spawn(async move {
        let _ = w.run().await;
    });
    (worker, running)
}

fn saga_job(workflow: &str, id: &str, bound_ms: u64) -> JobRequestBody {
    JobRequestBody {
        workflow: Some(workflow.into()),
        activity: None,
        providers: None,
        input: Some(json!({ "id": id, "bound_ms": bound_ms })),
        task_queue: None,
        options: None,
    }
}

/// The position of the first event of `kind` (panics when there is none).
fn position(events: &[String], kind: &str) -> usize {
    events
        .iter()
        .position(|e| e == kind)
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
}

async fn workflow_task(engine: &Engine) -> Option<WorkflowTask> {
    let request = ClaimRequest {
        worker_id: "w".into(),
        task_queue: "default".into(),
        providers: vec![],
        max_tasks: 1,
    };
    engine
        .claim_tasks(&Scope::AllOwners, &request, &["saga".to_owned()])
        .await
        .unwrap()
        .into_iter()
        .find_map(|t| match t {
            Task::Workflow(w) => Some(w),
            Task::Activity(_) => None,
        })
}

async fn complete(
    engine: &Engine,
    task: &WorkflowTask,
    commands: Vec<WorkflowCommand>,
) -> WorkflowTaskOutcome {
    let request = CompleteWorkflowTaskRequest {
        lease_token: task.lease_token,
        read_version: task.read_version,
        commands,
        sticky_horizon: None,
    };
    engine
        .complete_workflow_task(&Scope::AllOwners, task.job_id, &request)
        .await
        .unwrap()
}

/// A workflow job whose first task declared `bound_ms` and started an hour's timer.
async fn declared(engine: &Engine, bound_ms: u64) -> uuid::Uuid {
    let job = engine
        .submit(ALICE, "k", &JobRequest::workflow("saga", json!({})))
        .await
        .unwrap()
        .job;
    let t1 = workflow_task(engine).await.expect("the first task");
    let commands = vec![
        WorkflowCommand::DeclareCompensation {
            within_ms: bound_ms,
        },
        WorkflowCommand::StartTimer {
            seq: 0,
            duration_ms: 3_600_000,
        },
    ];
    assert_eq!(
        complete(engine, &t1, commands).await,
        WorkflowTaskOutcome::Applied
    );
    job.id
}

rules! {
    async fn a_cancelled_saga_refunds_the_charge(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(Calls::default());
        let (worker, _running) = worker(&server, &calls, Runs::All);
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("order-7", &saga_job("saga", "7", 60_000)).await.unwrap().job.id;
        wait_for("the charge, then the wait", Duration::from_secs(30), || async {
            client.events(id).await.unwrap().iter().any(|e| e.kind == "timer_started")
        }).await;
        let answered = client.cancel(id).await.unwrap();
        assert_eq!(answered.status, JobStatus::Running, "compensating, not closed");
        assert!(answered.cancel_requested_at.is_some());
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "{:?}", job.error);
        assert_eq!(job.error.as_ref().map(|e| e.code.as_str()), Some("job_cancelled"));
        assert_eq!(job.cancel_requested_at, answered.cancel_requested_at);
        assert_eq!(job.result, None, "a cancelled job has no result");
        assert_eq!(*calls.refunds.lock().unwrap(), vec!["ch-7".to_owned()], "refunded once, the charge's id");
        assert_eq!(calls.charge.load(Ordering::SeqCst), 1);
        assert_eq!(calls.ship.load(Ordering::SeqCst), 0, "the cancelled saga never ships");
        let names: Vec<_> = job.activities.iter().map(|a| (a.name.as_str(), a.status.as_str())).collect();
        assert_eq!(names, vec![("charge", "succeeded"), ("refund", "succeeded")]);
        let events = client.events(id).await.unwrap();
        let kinds: Vec<String> = events.iter().map(|e| e.kind.clone()).collect();
        assert!(position(&kinds, "compensation_declared") < position(&kinds, "cancel_requested"));
        assert!(position(&kinds, "cancel_requested") < position(&kinds, "job_cancelled"));
        assert_eq!(kinds.iter().filter(|k| *k == "job_cancelled").count(), 1);
        let closing = events.iter().find(|e| e.kind == "job_cancelled").unwrap();
        assert_eq!(closing.data["compensation"]["result"], json!("refunded ch-7"));
        worker.shutdown_token().cancel();
    }

    async fn a_step_not_yet_scheduled_when_the_cancel_arrives_is_never_scheduled(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(Calls::default());
        // The workflow declares its bound and schedules the charge, then stops.
        let (planner, planning) = worker(&server, &calls, Runs::Workflows);
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("order-8", &saga_job("quick_saga", "8", 60_000)).await.unwrap().job.id;
        wait_for("the charge to be scheduled", Duration::from_secs(30), || async {
            client.job(id).await.unwrap().activities.len() == 1
        }).await;
        planner.shutdown_token().cancel();
        planning.await.unwrap();
        // The charge's outcome (1st) and the cancel (2nd) arrive with no workflow running:
        // the replay that sees both creates `ship` before the cancel is delivered, with no
        // outcome; it must resolve to the cancellation, never be scheduled.
        let (charger, charging) = worker(&server, &calls, Runs::Providers);
        wait_for("the charge to succeed", Duration::from_secs(30), || async {
            client.job(id).await.unwrap().activities.first().map(|a| a.status.as_str() == "succeeded") == Some(true)
        }).await;
        charger.shutdown_token().cancel();
        charging.await.unwrap();
        assert_eq!(client.cancel(id).await.unwrap().status, JobStatus::Running);
        let (runner, _running) = worker(&server, &calls, Runs::All);
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "{:?}", job.error);
        let names: Vec<_> = job.activities.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, vec!["charge", "refund"], "ship was never scheduled");
        assert_eq!(calls.ship.load(Ordering::SeqCst), 0);
        assert_eq!(*calls.refunds.lock().unwrap(), vec!["ch-8".to_owned()]);
        runner.shutdown_token().cancel();
    }

    async fn a_workflow_without_a_compensation_bound_is_cancelled_at_once(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(Calls::default());
        let (worker, _running) = worker(&server, &calls, Runs::All);
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("order-9", &saga_job("saga", "9", 0)).await.unwrap().job.id;
        wait_for("the charge, then the wait", Duration::from_secs(30), || async {
            client.events(id).await.unwrap().iter().any(|e| e.kind == "timer_started")
        }).await;
        let tasks_before = client.events(id).await.unwrap().iter().filter(|e| e.kind == "workflow_task_started").count();
        let answered = client.cancel(id).await.unwrap();
        assert_eq!(answered.status, JobStatus::Cancelled, "closed at once");
        assert_eq!(answered.cancel_requested_at, None);
        assert!(answered.finished_at.is_some());
        let kinds = event_types(&server.engine, id).await;
        assert!(!kinds.iter().any(|k| k == "cancel_requested" || k == "compensation_declared"), "{kinds:?}");
        assert_eq!(kinds.last().map(String::as_str), Some("job_cancelled"));
        assert_eq!(
            kinds.iter().filter(|k| *k == "workflow_task_started").count(), tasks_before,
            "the workflow is not woken: its code never learns"
        );
        assert!(workflow_task(&server.engine).await.is_none(), "no task for a closed job");
        assert!(calls.refunds.lock().unwrap().is_empty());
        worker.shutdown_token().cancel();
    }

    async fn compensation_past_its_bound_ends_the_job_cancelled(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(Calls::default());
        let (worker, _running) = worker(&server, &calls, Runs::HangingRefund);
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("order-10", &saga_job("saga", "10", 3_000)).await.unwrap().job.id;
        wait_for("the charge, then the wait", Duration::from_secs(30), || async {
            client.events(id).await.unwrap().iter().any(|e| e.kind == "timer_started")
        }).await;
        client.cancel(id).await.unwrap();
        wait_for("the refund to start (it never finishes)", Duration::from_secs(30), || async {
            let job = client.job(id).await.unwrap();
            job.activities.iter().any(|a| a.name == "refund" && a.attempts.iter().any(|t| t.status.as_str() == "started"))
        }).await;
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "{:?}", job.error);
        let refund = job.activities.iter().find(|a| a.name == "refund").unwrap();
        assert_eq!(refund.status.as_str(), "cancelled", "its open activity is closed");
        assert!(refund.attempts.iter().all(|t| t.status.as_str() == "cancelled"), "{:?}", refund.attempts);
        let requested = job.cancel_requested_at.expect("cancel recorded");
        let finished = job.finished_at.expect("closed");
        assert!(finished - requested >= chrono::Duration::milliseconds(3_000), "not before its bound");
        let kinds = event_types(&server.engine, id).await;
        assert!(position(&kinds, "cancel_requested") < position(&kinds, "compensation_timed_out"));
        assert!(position(&kinds, "compensation_timed_out") < position(&kinds, "job_cancelled"));
        assert_eq!(kinds.iter().filter(|k| *k == "job_cancelled").count(), 1);
        assert!(calls.refunds.lock().unwrap().is_empty());
        worker.shutdown_token().cancel();
    }

    async fn a_workflow_task_after_the_compensation_deadline_is_stale(db) {
        // Engine only: no reaper runs, so the late task itself meets the deadline.
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("saga", json!({}))).await.unwrap().job;
        let id = job.id;
        let t1 = workflow_task(&engine).await.unwrap();
        complete(&engine, &t1, vec![
            // Long enough that the bound cannot pass before the task that carries the cancel is
            // claimed, however loaded the machine; the test then waits it out.
            WorkflowCommand::DeclareCompensation { within_ms: 2_000 },
            WorkflowCommand::StartTimer { seq: 0, duration_ms: 1 },
        ]).await;
        wait_for("the timer to fire", Duration::from_secs(10), || async {
            engine.reap().await.unwrap().timers_fired == 1
        }).await;
        // A task in flight when the cancel arrives replayed without it: stale.
        let in_flight = workflow_task(&engine).await.expect("the timer wakes the workflow");
        assert!(in_flight.cancel.is_none());
        let view = engine.cancel_job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!(view.status, JobStatus::Running);
        let ship = WorkflowCommand::ScheduleActivity {
            seq: 1, activity: "ship".into(), providers: vec!["ship".into()], input: json!({}), options: None,
        };
        assert_eq!(complete(&engine, &in_flight, vec![ship]).await, WorkflowTaskOutcome::Stale);
        assert!(engine.job(&Scope::AllOwners, id).await.unwrap().activities.is_empty(), "nothing scheduled");
        // The task that carries the cancel completes after the bound: stale too.
        let late = workflow_task(&engine).await.expect("the cancel wakes the workflow at once");
        let cancel = late.cancel.expect("the task carries the cancel");
        assert_eq!(late.compensation_ms, Some(2_000));
        assert!(cancel.arrival > 1, "after the timer's: {cancel:?}");
        let deadline = cancel.requested_at + chrono::Duration::milliseconds(2_000);
        wait_for("the bound to pass", Duration::from_secs(10), || async { db.clock().await > deadline }).await;
        let done = WorkflowCommand::CompleteJob { result: json!("refunded") };
        assert_eq!(complete(&engine, &late, vec![done]).await, WorkflowTaskOutcome::Stale);
        let job = engine.job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled);
        let events = engine.job_events(&Scope::AllOwners, id).await.unwrap();
        let kinds: Vec<String> = events.iter().map(|e| e.kind.clone()).collect();
        assert!(position(&kinds, "cancel_requested") < position(&kinds, "compensation_timed_out"));
        assert!(position(&kinds, "compensation_timed_out") < position(&kinds, "job_cancelled"));
        let closing = events.iter().find(|e| e.kind == "job_cancelled").unwrap();
        assert_eq!(closing.data["compensation"]["result"], serde_json::Value::Null, "the late result applied nothing");
        // The deadlines' pass finds nothing left to close.
        assert_eq!(engine.reap().await.unwrap().compensations_timed_out, 0);
    }

    async fn the_deadlines_pass_closes_an_overdue_compensation_once(db) {
        let (engines, _turn) = db.separate_engines(4).await;
        let id = declared(&engines[0], 200).await;
        engines[0].cancel_job(&Scope::AllOwners, id).await.unwrap();
        let requested = engines[0].job(&Scope::AllOwners, id).await.unwrap().cancel_requested_at.unwrap();
        let deadline = requested + chrono::Duration::milliseconds(200);
        wait_for("the bound to pass", Duration::from_secs(10), || async { db.clock().await > deadline }).await;
        let reports = join_all(engines.iter().map(|e| e.reap())).await;
        let closed: u64 = reports.into_iter().map(|r| r.unwrap().compensations_timed_out).sum();
        assert_eq!(closed, 1, "closed by one pass only");
        let job = engines[0].job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled);
        let kinds = event_types(&engines[0], id).await;
        assert_eq!(kinds.iter().filter(|k| *k == "compensation_timed_out").count(), 1);
        assert_eq!(kinds.iter().filter(|k| *k == "job_cancelled").count(), 1);
        let task = workflow_task(&engines[0]).await;
        assert!(task.is_none(), "no task for a closed job");
    }

    async fn cancelling_twice_while_compensating_requests_once(db) {
        let (engines, _turn) = db.separate_engines(4).await;
        let id = declared(&engines[0], 60_000).await;
        let answers = join_all(engines.iter().map(|e| e.cancel_job(&Scope::AllOwners, id))).await;
        let answers: Vec<_> = answers.into_iter().map(|a| a.unwrap()).collect();
        assert!(answers.iter().all(|v| v.status == JobStatus::Running), "compensating");
        let requested = answers[0].cancel_requested_at.expect("recorded");
        assert!(answers.iter().all(|v| v.cancel_requested_at == Some(requested)), "one request, the same for all");
        let again = engines[1].cancel_job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!((again.status, again.cancel_requested_at, again.version), (JobStatus::Running, Some(requested), answers[0].version));
        let kinds = event_types(&engines[0], id).await;
        assert_eq!(kinds.iter().filter(|k| *k == "cancel_requested").count(), 1, "{kinds:?}");
        // One task carries the cancel; the workflow returns and the job ends cancelled.
        let task = workflow_task(&engines[0]).await.expect("the cancel wakes the workflow");
        assert_eq!(task.cancel.map(|c| c.requested_at), Some(requested));
        assert!(workflow_task(&engines[1]).await.is_none(), "one task at a time");
        let done = WorkflowCommand::FailJob { error: onceflow_engine::model::ErrorInfo::new("refund_failed", "the bank said no") };
        assert_eq!(complete(&engines[0], &task, vec![done]).await, WorkflowTaskOutcome::Applied);
        let job = engines[0].job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "cancelled, not failed");
        assert_eq!(job.error.as_ref().map(|e| e.code.as_str()), Some("job_cancelled"));
        assert!(job.error.as_ref().unwrap().message.contains("refund_failed"), "{:?}", job.error);
        let events = engines[0].job_events(&Scope::AllOwners, id).await.unwrap();
        let closing = events.iter().find(|e| e.kind == "job_cancelled").unwrap();
        assert_eq!(closing.data["compensation"]["error"]["code"], json!("refund_failed"));
        // A cancel of the cancelled job answers it as today.
        let after = engines[2].cancel_job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!(after.status, JobStatus::Cancelled);
        assert_eq!(event_types(&engines[0], id).await.iter().filter(|k| *k == "job_cancelled").count(), 1);
    }

    async fn a_compensation_bound_over_24_hours_parks_the_workflow(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("saga", json!({}))).await.unwrap().job;
        let t1 = workflow_task(&engine).await.unwrap();
        let too_long = WorkflowCommand::DeclareCompensation { within_ms: 24 * 3600 * 1000 + 1 };
        assert_eq!(complete(&engine, &t1, vec![too_long]).await, WorkflowTaskOutcome::Applied);
        let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
        assert_eq!(view.status, JobStatus::Running, "parked, visibly");
        assert_eq!(view.error.as_ref().map(|e| e.code.as_str()), Some("invalid_request"));
        assert!(event_types(&engine, job.id).await.contains(&"workflow_task_failed".to_owned()));
        // A parked workflow cannot compensate: its cancel closes it at once.
        let cancelled = engine.cancel_job(&Scope::AllOwners, job.id).await.unwrap();
        assert_eq!(cancelled.status, JobStatus::Cancelled);
    }
}
