//! Workflow versioning: `ctx.patched` (Temporal's semantics) lets changed workflow code
//! keep the jobs that ran the old code on their recorded path, `ctx.deprecate_patch`
//! retires a patch, and a changed workflow without a patch parks its old jobs with an
//! error naming the step and both sides.

use std::sync::{Arc, Mutex};
use std::time::Duration;

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
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use uuid::Uuid;

fn workflow_job(name: &str, input: Value) -> JobRequestBody {
    JobRequestBody {
        workflow: Some(name.into()),
        activity: None,
        providers: None,
        input: Some(input),
        task_queue: None,
        options: None,
    }
}

/// Every provider call, as (provider, input), in the order they ran.
#[derive(Default)]
struct Calls(Mutex<Vec<(String, Value)>>);

impl Calls {
    fn of(&self, provider: &str) -> Vec<Value> {
        let calls = self.0.lock().unwrap();
        calls
            .iter()
            .filter(|(p, _)| p == provider)
            .map(|(_, input)| input.clone())
            .collect()
    }
}

/// A running worker and the way to stop it for good (a deploy).
struct Deployed {
    worker: Arc<Worker>,
    running: JoinHandle<()>,
}

impl Deployed {
    async fn stop(self) {
        self.worker.shutdown_token().cancel();
        let _ = self.running.await;
    }
}

/// A worker with the providers every version uses: `price` (100), `price_with_discount`
/// (90) and `ship` (echoes its input), each call recorded.
fn deploy(
    server: &TestServer,
    calls: &Arc<Calls>,
    register: impl FnOnce(onceflow_worker::WorkerBuilder) -> onceflow_worker::WorkerBuilder,
) -> Deployed {
    let provider = |name: &'static str, answer: fn(&Value) -> Value| {
        let calls = calls.clone();
        move |_ctx: ActivityContext, input: Value| {
            let calls = calls.clone();
            async move {
                calls
                    .0
                    .lock()
                    .unwrap()
                    .push((name.to_owned(), input.clone()));
                Ok::<Value, ActivityError>(answer(&input))
            }
        }
    };
    let builder = Worker::builder(&server.api.url, &server.tokens.worker)
        .provider("price", "price", provider("price", |_| json!(100)))
        .provider(
            "price_with_discount",
            "price_with_discount",
            provider("price_with_discount", |_| json!(90)),
        )
        .provider("ship", "ship", provider("ship", |input| input.clone()));
    let worker = Arc::new(register(builder).build().unwrap());
    let w = worker.clone();
    let running = tokio::spawn(async move {
        let _ = w.run().await;
    });
    Deployed { worker, running }
}

/// v1 of `order`: price it, wait for `ship`, ship it.
async fn order_v1(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    let price: i64 = ctx.activity("price", input).await?;
    let _: Value = ctx.wait_signal("ship").await?;
    let label: Value = ctx
        .activity("ship", json!({"price": price, "mode": "standard"}))
        .await?;
    Ok(json!({"price": price, "shipped": label}))
}

/// v2 of `order`: the discount and express shipping, behind one patch (asked twice: the
/// second answer is the first one's).
async fn order_v2(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    let price: i64 = if ctx.patched("discount") {
        ctx.activity("price_with_discount", input).await?
    } else {
        ctx.activity("price", input).await?
    };
    let _: Value = ctx.wait_signal("ship").await?;
    let mode = if ctx.patched("discount") {
        "express"
    } else {
        "standard"
    };
    let label: Value = ctx
        .activity("ship", json!({"price": price, "mode": mode}))
        .await?;
    Ok(json!({"price": price, "shipped": label}))
}

/// v2 without a patch: the deploy that breaks old jobs.
async fn order_v2_unpatched(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    let price: i64 = ctx.activity("price_with_discount", input).await?;
    let _: Value = ctx.wait_signal("ship").await?;
    let label: Value = ctx
        .activity("ship", json!({"price": price, "mode": "express"}))
        .await?;
    Ok(json!({"price": price, "shipped": label}))
}

/// v3 of `order`: every v1 job is gone, the patch is retired.
async fn order_v3(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    ctx.deprecate_patch("discount");
    let price: i64 = ctx.activity("price_with_discount", input).await?;
    let _: Value = ctx.wait_signal("ship").await?;
    let label: Value = ctx
        .activity("ship", json!({"price": price, "mode": "express"}))
        .await?;
    Ok(json!({"price": price, "shipped": label}))
}

/// Waits until the job's workflow has taken `tasks` workflow tasks (it then waits for
/// `ship`).
async fn tasks_completed(client: &Client, id: Uuid, tasks: usize) {
    wait_for(
        "the workflow to wait for its signal",
        Duration::from_secs(30),
        || async {
            client
                .events(id)
                .await
                .unwrap()
                .iter()
                .filter(|e| e.kind == "workflow_task_completed")
                .count()
                >= tasks
        },
    )
    .await;
}

async fn patch_events(client: &Client, id: Uuid) -> Vec<Value> {
    client
        .events(id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "patch_recorded")
        .map(|e| e.data)
        .collect()
}

async fn workflow_task(engine: &Engine) -> Option<WorkflowTask> {
    let request = ClaimRequest {
        worker_id: "w".into(),
        task_queue: "default".into(),
        providers: vec![],
        max_tasks: 1,
    };
    engine
        .claim_tasks(&Scope::AllOwners, &request, &["order".to_owned()])
        .await
        .unwrap()
        .into_iter()
        .find_map(|t| match t {
            Task::Workflow(w) => Some(w),
            Task::Activity(_) => None,
        })
}

fn record(id: &str, deprecated: bool) -> WorkflowCommand {
    WorkflowCommand::RecordPatch {
        id: id.into(),
        deprecated,
    }
}

rules! {
    async fn an_old_job_finishes_along_the_old_path_while_new_jobs_take_the_patched_one(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let calls = Arc::new(Calls::default());
        let v1 = deploy(&server, &calls, |b| b.workflow("order", order_v1));
        let old = client.submit("old", &workflow_job("order", json!({"sku": "old"}))).await.unwrap().job.id;
        // Priced under v1, then waiting for `ship`.
        tasks_completed(&client, old, 2).await;
        assert_eq!(calls.of("price"), vec![json!({"sku": "old"})]);
        v1.stop().await;

        let v2 = deploy(&server, &calls, |b| b.workflow("order", order_v2));
        let new = client.submit("new", &workflow_job("order", json!({"sku": "new"}))).await.unwrap().job.id;
        tasks_completed(&client, new, 2).await;
        for id in [old, new] {
            client.signal(id, "ship", &json!({}), "go").await.unwrap();
        }
        let (old_job, new_job) = (client.wait(old, Duration::from_secs(30)).await.unwrap(), client.wait(new, Duration::from_secs(30)).await.unwrap());
        assert_eq!(old_job.status, JobStatus::Succeeded, "{:?}", old_job.error);
        assert_eq!(new_job.status, JobStatus::Succeeded, "{:?}", new_job.error);
        // The old job stayed on v1's path, both times v2 asked: the price it recorded and
        // standard shipping, though its second question came at the frontier.
        assert_eq!(old_job.result, Some(json!({"price": 100, "shipped": {"price": 100, "mode": "standard"}})));
        assert_eq!(new_job.result, Some(json!({"price": 90, "shipped": {"price": 90, "mode": "express"}})));
        assert_eq!(calls.of("price"), vec![json!({"sku": "old"})], "the old path's step ran once, under v1");
        assert_eq!(calls.of("price_with_discount"), vec![json!({"sku": "new"})], "only the new job took the patched path");
        let mut shipped: Vec<String> = calls.of("ship").iter().map(Value::to_string).collect();
        shipped.sort();
        assert_eq!(shipped, vec![r#"{"mode":"express","price":90}"#, r#"{"mode":"standard","price":100}"#]);
        assert!(patch_events(&client, old).await.is_empty(), "the old job recorded no marker");
        assert_eq!(patch_events(&client, new).await, vec![json!({"patch_id": "discount", "deprecated": false})], "the new job recorded one");
        // Positions are not shifted by the patch: both jobs have their steps at 0 and 2.
        for job in [&old_job, &new_job] {
            let seqs: Vec<i32> = job.activities.iter().map(|a| a.seq).collect();
            assert_eq!(seqs, vec![0, 2]);
        }
        v2.stop().await;
    }

    async fn a_deploy_without_a_patch_parks_the_job_naming_the_step_and_what_differed(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let calls = Arc::new(Calls::default());
        let v1 = deploy(&server, &calls, |b| b.workflow("order", order_v1));
        let old = client.submit("old", &workflow_job("order", json!({"sku": "old"}))).await.unwrap().job.id;
        tasks_completed(&client, old, 2).await;
        v1.stop().await;

        let v2 = deploy(&server, &calls, |b| b.workflow("order", order_v2_unpatched));
        client.signal(old, "ship", &json!({}), "go").await.unwrap();
        wait_for("the old job to be parked", Duration::from_secs(30), || async {
            client.job(old).await.unwrap().error.is_some()
        })
        .await;
        let job = client.job(old).await.unwrap();
        let error = job.error.clone().unwrap();
        assert_eq!(error.code, "nondeterminism");
        for part in ["position 0", "activity `price_with_discount` with input {\"sku\":\"old\"}", "activity `price` with input {\"sku\":\"old\"}", "ctx.patched"] {
            assert!(error.message.contains(part), "the message names {part}: {}", error.message);
        }
        assert_eq!(job.status, JobStatus::Running, "parked visibly, not failed");
        assert!(calls.of("price_with_discount").is_empty(), "the new code's step never ran for the old job");
        assert!(calls.of("ship").is_empty());
        assert!(client.events(old).await.unwrap().iter().any(|e| e.kind == "workflow_task_failed"));
        v2.stop().await;
    }

    async fn deprecate_patch_keeps_patched_histories_replayable(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let calls = Arc::new(Calls::default());
        // A job runs under v2 and records the marker.
        let v2 = deploy(&server, &calls, |b| b.workflow("order", order_v2));
        let patched = client.submit("patched", &workflow_job("order", json!({"sku": "a"}))).await.unwrap().job.id;
        tasks_completed(&client, patched, 2).await;
        v2.stop().await;

        // v3 retires the patch: the v2 job replays through it, and a v3 job records the
        // marker too.
        let v3 = deploy(&server, &calls, |b| b.workflow("order", order_v3));
        let retired = client.submit("retired", &workflow_job("order", json!({"sku": "b"}))).await.unwrap().job.id;
        tasks_completed(&client, retired, 2).await;
        client.signal(patched, "ship", &json!({}), "go").await.unwrap();
        let job = client.wait(patched, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"price": 90, "shipped": {"price": 90, "mode": "express"}})));
        assert_eq!(patch_events(&client, retired).await, vec![json!({"patch_id": "discount", "deprecated": true})]);
        v3.stop().await;

        // A worker still running v2 (a rollback) replays the v3 job along the patched path.
        let back = deploy(&server, &calls, |b| b.workflow("order", order_v2));
        client.signal(retired, "ship", &json!({}), "go").await.unwrap();
        let job = client.wait(retired, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"price": 90, "shipped": {"price": 90, "mode": "express"}})));
        assert!(calls.of("price").is_empty(), "no job took the old path");
        assert_eq!(calls.of("price_with_discount").len(), 2);
        back.stop().await;
    }

    async fn a_patch_marker_is_recorded_once_and_handed_to_every_later_task(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("order", json!({}))).await.unwrap().job;
        let t1 = workflow_task(&engine).await.unwrap();
        assert!(t1.patches.is_empty());
        let complete = |task: &WorkflowTask, commands: Vec<WorkflowCommand>| CompleteWorkflowTaskRequest { lease_token: task.lease_token, read_version: task.read_version, commands, sticky_horizon: None };
        let outcome = engine.complete_workflow_task(&Scope::AllOwners, job.id, &complete(&t1, vec![record("b", false), record("a", true), record("b", false), WorkflowCommand::StartTimer { seq: 0, duration_ms: 0 }])).await.unwrap();
        assert_eq!(outcome, WorkflowTaskOutcome::Applied);
        let recorded = event_types(&engine, job.id).await.iter().filter(|e| *e == "patch_recorded").count();
        assert_eq!(recorded, 2, "a marker is recorded once per job");
        let due = chrono::Utc::now() + chrono::Duration::milliseconds(50);
        wait_for("the timer to be due", Duration::from_secs(10), || async { chrono::Utc::now() > due }).await;
        engine.reap().await.unwrap();
        let t2 = workflow_task(&engine).await.expect("the timer wakes the workflow");
        assert_eq!(t2.patches, vec!["a".to_owned(), "b".to_owned()]);
        let seqs: Vec<i32> = t2.journal.iter().map(|e| e.seq()).collect();
        assert_eq!(seqs, vec![0], "a marker takes no position");
        // An id no store should hold parks the workflow, visibly.
        let long = "x".repeat(201);
        engine.complete_workflow_task(&Scope::AllOwners, job.id, &complete(&t2, vec![record("a", false), record(&long, false)])).await.unwrap();
        let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
        let error = view.error.expect("parked");
        assert_eq!(error.code, "invalid_request");
        assert!(error.message.contains("patch id"), "{}", error.message);
    }
}
