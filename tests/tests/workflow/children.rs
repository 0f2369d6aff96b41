//! Child workflows: a workflow starts another workflow job of its owner, once, however
//! often it is replayed; the child's outcome comes back to the parent in arrival order;
//! cancelling a parent cancels its open children (grandchildren too).

use std::future::IntoFuture;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::model::{JobStatus, Scope};
use onceflow_engine::store::Arrival;
use onceflow_engine::{ClaimRequest, Engine, JobRequest, WorkflowTaskOutcome};
use onceflow_protocol::workflow::{
    CompleteWorkflowTaskRequest, JournalEntry, Task, WorkflowCommand, WorkflowTask,
};
use onceflow_tests::server::TestServer;
use onceflow_tests::{event_types, rules, wait_for, ALICE};
use onceflow_worker::api::JobRequestBody;
use onceflow_worker::{
    ActivityContext, ActivityError, Client, Worker, WorkflowContext, WorkflowError,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Text {
    text: String,
}

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

fn spawn_worker(worker: Worker) -> Arc<Worker> {
    let worker = Arc::new(worker);
    let w = worker.clone();
    tokio::spawn(async move { w.run().await });
    worker
}

fn child_key(parent: Uuid, seq: i32) -> String {
    format!("{parent}:child:{seq}")
}

/// Summarizes through a child workflow.
async fn summarize(ctx: WorkflowContext, input: Text) -> Result<Text, WorkflowError> {
    let summary: Text = ctx.child_workflow("summary", &input).await?;
    Ok(Text {
        text: format!("parent got {}", summary.text),
    })
}

/// The child: one activity.
async fn summary(ctx: WorkflowContext, input: Text) -> Result<Text, WorkflowError> {
    let page: Text = ctx.activity("fetch", &input).await?;
    Ok(Text {
        text: format!("summary of {}", page.text),
    })
}

fn fetch_provider(builder: onceflow_worker::WorkerBuilder) -> onceflow_worker::WorkerBuilder {
    builder.provider(
        "fetch",
        "fetch",
        |_ctx: ActivityContext, t: Text| async move {
            Ok::<_, ActivityError>(Text {
                text: format!("page of {}", t.text),
            })
        },
    )
}

/// The next workflow task of one of `workflows`, straight from the engine.
async fn workflow_task(engine: &Engine, workflows: &[&str]) -> Option<WorkflowTask> {
    let request = ClaimRequest {
        worker_id: "w".into(),
        task_queue: "default".into(),
        providers: vec![],
        max_tasks: 1,
    };
    let workflows: Vec<String> = workflows.iter().map(|w| (*w).to_owned()).collect();
    engine
        .claim_tasks(&Scope::AllOwners, &request, &workflows)
        .await
        .unwrap()
        .into_iter()
        .find_map(|t| match t {
            Task::Workflow(w) => Some(w),
            Task::Activity(_) => None,
        })
}

async fn complete(engine: &Engine, task: &WorkflowTask, commands: Vec<WorkflowCommand>) {
    let request = CompleteWorkflowTaskRequest {
        lease_token: task.lease_token,
        read_version: task.read_version,
        commands,
        sticky_horizon: None,
    };
    assert_eq!(
        engine
            .complete_workflow_task(&Scope::AllOwners, task.job_id, &request)
            .await
            .unwrap(),
        WorkflowTaskOutcome::Applied
    );
}

fn start_child(seq: i32, workflow: &str) -> WorkflowCommand {
    WorkflowCommand::StartChild {
        seq,
        workflow: workflow.into(),
        input: json!({"n": seq}),
        task_queue: None,
    }
}

/// A `parent` workflow job whose first task started child `child` at position 0, by the
/// engine alone: (parent id, child id).
async fn parent_with_child(engine: &Engine) -> (Uuid, Uuid) {
    let parent = engine
        .submit(ALICE, "p", &JobRequest::workflow("parent", json!({})))
        .await
        .unwrap()
        .job;
    let task = workflow_task(engine, &["parent"])
        .await
        .expect("the parent's task");
    complete(engine, &task, vec![start_child(0, "child")]).await;
    let view = engine.job(&Scope::AllOwners, parent.id).await.unwrap();
    assert_eq!(view.children.len(), 1, "{view:?}");
    (parent.id, view.children[0])
}

rules! {
    async fn a_child_workflow_returns_its_result_to_the_parent(db) {
        let server = TestServer::start(db).await;
        let worker = spawn_worker(fetch_provider(Worker::builder(&server.api.url, &server.tokens.worker).workflow("summarize", summarize).workflow("summary", summary)).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("summarize", json!({"text": "rust.org"}))).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"text": "parent got summary of page of rust.org"})));
        assert_eq!(job.children.len(), 1);
        let child = client.job(job.children[0]).await.unwrap();
        assert_eq!(child.parent_job_id, Some(id));
        assert_eq!(child.idempotency_key, child_key(id, 0));
        assert_eq!(child.owner, job.owner, "a child belongs to its parent's owner");
        assert_eq!(child.workflow.as_deref(), Some("summary"));
        assert_eq!(child.status, JobStatus::Succeeded);
        assert_eq!(child.result, Some(json!({"text": "summary of page of rust.org"})));
        let events = client.events(id).await.unwrap();
        let started: Vec<_> = events.iter().filter(|e| e.kind == "child_started").collect();
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].data["child_job_id"], json!(child.id));
        assert_eq!((started[0].data["seq"].clone(), started[0].data["workflow"].clone()), (json!(0), json!("summary")));
        let finished: Vec<_> = events.iter().filter(|e| e.kind == "child_finished").collect();
        assert_eq!(finished.len(), 1);
        assert_eq!(finished[0].data, json!({"child_job_id": child.id, "status": "succeeded"}));
        assert!(client.events(child.id).await.unwrap().iter().any(|e| e.kind == "job_created"));
        worker.shutdown_token().cancel();
    }

    async fn a_failed_child_gives_the_parent_its_error(db) {
        let server = TestServer::start(db).await;
        async fn failing(_ctx: WorkflowContext, _input: Value) -> Result<Text, WorkflowError> {
            Err(WorkflowError::with_code("out_of_stock", "none left"))
        }
        async fn careful(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            let before = ctx.now();
            match ctx.child_workflow::<Text>("failing", json!({})).await {
                Ok(t) => Ok(json!({"unexpected": t.text})),
                // ctx.now() moved to when the child finished.
                Err(e) => Ok(json!({"code": e.code, "message": e.message, "clock_moved": ctx.now() > before})),
            }
        }
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("careful", careful).workflow("failing", failing).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("careful", json!({}))).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        let result = job.result.unwrap();
        assert_eq!(result["code"], json!("out_of_stock"), "{result}");
        assert!(result["message"].as_str().unwrap().contains("none left"), "{result}");
        assert_eq!(result["clock_moved"], json!(true));
        let child = client.job(job.children[0]).await.unwrap();
        assert_eq!(child.status, JobStatus::Failed);
        assert_eq!(child.error.unwrap().code, "out_of_stock");

        // Unhandled (`?`), the child's error fails the parent with the child's code.
        async fn careless(ctx: WorkflowContext, _input: Value) -> Result<Text, WorkflowError> {
            ctx.child_workflow::<Text>("failing", json!({})).await
        }
        drop(worker);
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("careless", careless).workflow("failing", failing).build().unwrap());
        let id = client.submit("k2", &workflow_job("careless", json!({}))).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.error.unwrap().code, "out_of_stock");
        worker.shutdown_token().cancel();
    }

    async fn a_replayed_parent_never_starts_its_child_twice(db) {
        let server = TestServer::start(db).await;
        // The parent starts its child, then runs five steps one after another while the
        // child waits for them: every step's result replays the parent, the child already
        // recorded. Two workers take the parent's tasks.
        async fn busy_parent(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            let child = ctx.child_workflow::<Text>("waiting_child", json!({"for": "steps"}));
            let steps = async {
                for i in 0..5 {
                    let _: Text = ctx.activity("step", json!({"i": i})).await?;
                }
                Ok::<_, WorkflowError>(())
            };
            let (child, steps) = futures::join!(child.into_future(), steps);
            steps?;
            Ok(json!(child?.text))
        }
        async fn waiting_child(ctx: WorkflowContext, _input: Value) -> Result<Text, WorkflowError> {
            Ok(ctx.activity("wait_for_steps", json!({})).await?)
        }
        let steps = Arc::new(AtomicU32::new(0));
        let builder = |steps: Arc<AtomicU32>| {
            let waited = steps.clone();
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("busy_parent", busy_parent)
                .workflow("waiting_child", waiting_child)
                .provider("step", "step", move |_ctx: ActivityContext, _: Value| {
                    let steps = steps.clone();
                    async move {
                        steps.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ActivityError>(Text { text: "step".into() })
                    }
                })
                .provider("wait_for_steps", "wait_for_steps", move |_ctx: ActivityContext, _: Value| {
                    let steps = waited.clone();
                    async move {
                        // The child stays open until the parent's steps are done.
                        while steps.load(Ordering::SeqCst) < 5 {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Ok::<_, ActivityError>(Text { text: "child done".into() })
                    }
                })
                .build()
                .unwrap()
        };
        let w1 = spawn_worker(builder(steps.clone()));
        let w2 = spawn_worker(builder(steps.clone()));
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("busy_parent", json!({}))).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!("child done")));
        let key = child_key(id, 0);
        assert_eq!(db.count(&format!("SELECT count(*) FROM jobs WHERE idempotency_key = '{key}'")).await, 1);
        assert_eq!(db.count(&format!("SELECT count(*) FROM jobs WHERE parent_job_id = '{id}'")).await, 1);
        let events = event_types(&server.engine, id).await;
        assert_eq!(events.iter().filter(|e| *e == "child_started").count(), 1, "{events:?}");
        let replays = events.iter().filter(|e| *e == "workflow_task_completed").count();
        assert!(replays >= 6, "the parent was replayed after each step with its child recorded: {events:?}");
        assert_eq!(job.children.len(), 1);
        w1.shutdown_token().cancel();
        w2.shutdown_token().cancel();
    }

    async fn cancelling_a_parent_cancels_its_open_children(db) {
        let server = TestServer::start(db).await;
        // parent → quick (finishes) and middle → grandchild (hangs in an activity).
        async fn family(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            let quick: Value = ctx.child_workflow("quick", json!({})).await?;
            let middle: Value = ctx.child_workflow("middle", json!({})).await?;
            Ok(json!([quick, middle]))
        }
        async fn quick(_ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            Ok(json!("quick"))
        }
        async fn middle(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            ctx.child_workflow("grandchild", json!({})).await
        }
        async fn grandchild(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            Ok(ctx.activity("hang", json!({})).await?)
        }
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("family", family)
                .workflow("quick", quick)
                .workflow("middle", middle)
                .workflow("grandchild", grandchild)
                .provider("hang", "hang", |ctx: ActivityContext, _: Value| async move {
                    ctx.cancelled().await;
                    Err::<Value, _>(ActivityError::fatal("cancelled"))
                })
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("family", json!({}))).await.unwrap().job.id;
        // (quick, middle, grandchild) once the grandchild's activity runs.
        let family_ids = || async {
            let parent = client.job(id).await.unwrap();
            let [quick, middle] = parent.children[..] else { return None };
            let grandchild = *client.job(middle).await.unwrap().children.first()?;
            let view = client.job(grandchild).await.unwrap();
            let running = view.activities.first().is_some_and(|a| a.attempts.first().is_some_and(|t| t.status.as_str() == "started"));
            running.then_some((quick, middle, grandchild))
        };
        wait_for("the grandchild's activity to run", Duration::from_secs(30), || async { family_ids().await.is_some() }).await;
        let (quick, middle, grandchild) = family_ids().await.unwrap();
        let cancelled = client.cancel(id).await.unwrap();
        assert_eq!(cancelled.status, JobStatus::Cancelled);
        // The cascade ran before the cancel answered.
        assert_eq!(client.job(quick).await.unwrap().status, JobStatus::Succeeded, "a finished child is left alone");
        for (who, child) in [("child", middle), ("grandchild", grandchild)] {
            let view = client.job(child).await.unwrap();
            assert_eq!(view.status, JobStatus::Cancelled, "the {who} was cancelled");
            assert_eq!(view.error.unwrap().code, "job_cancelled");
        }
        let hang = client.job(grandchild).await.unwrap();
        assert_eq!(hang.activities[0].attempts[0].status.as_str(), "cancelled", "the grandchild's running attempt was cancelled");
        let events = client.events(id).await.unwrap();
        assert!(events.iter().any(|e| e.kind == "child_finished" && e.data == json!({"child_job_id": middle, "status": "cancelled"})), "{events:?}");
        // Cancelling again changes nothing and answers the same.
        assert_eq!(client.cancel(id).await.unwrap().status, JobStatus::Cancelled);
        worker.shutdown_token().cancel();
    }

    async fn the_job_view_shows_parent_and_children(db) {
        let server = TestServer::start(db).await;
        // Eleven children at once: positions 0..=10, shown in position order (10 after 9).
        async fn many(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            let calls: Vec<_> = (0..11).map(|i| ctx.child_workflow::<Value>("echo", json!({"i": i})).into_future()).collect();
            let results: Result<Vec<Value>, WorkflowError> = join_all(calls).await.into_iter().collect();
            Ok(json!(results?))
        }
        async fn echo(_ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
            Ok(input["i"].clone())
        }
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("many", many).workflow("echo", echo).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("many", json!({}))).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!((0..11).collect::<Vec<_>>())));

        let parent = server.api.get(&format!("/v1/jobs/{id}"), &server.tokens.client).await;
        assert_eq!(parent.status, 200);
        assert_eq!(parent.body["parent_job_id"], Value::Null, "a top-level job: null, present");
        assert!(parent.body.as_object().unwrap().contains_key("parent_job_id"));
        let children: Vec<Uuid> = serde_json::from_value(parent.body["children"].clone()).unwrap();
        assert_eq!(children.len(), 11);
        for (seq, child) in children.iter().enumerate() {
            let view = server.api.get(&format!("/v1/jobs/{child}"), &server.tokens.client).await;
            assert_eq!(view.status, 200);
            assert_eq!(view.body["parent_job_id"], json!(id));
            assert_eq!(view.body["idempotency_key"], json!(child_key(id, seq as i32)), "children in position order");
            assert_eq!(view.body["input"], json!({"i": seq}));
            assert_eq!(view.body["children"], json!([]), "always present");
        }
        // Another owner sees neither.
        assert_eq!(server.api.get(&format!("/v1/jobs/{}", children[0]), &server.tokens.bob).await.status, 404);
        // An activity job: no parent, no children, both present.
        let activity = server.api.submit(&server.tokens.client, "a", &json!({"activity": "fetch", "providers": ["fetch"], "input": {}})).await;
        assert_eq!(activity.status, 201, "{:?}", activity.body);
        assert_eq!(activity.body["parent_job_id"], Value::Null);
        assert_eq!(activity.body["children"], json!([]));
        // The job list shows them too.
        let listed = server.api.get("/v1/jobs?workflow=many", &server.tokens.client).await;
        assert_eq!(listed.body["jobs"][0]["children"], json!(children));
        worker.shutdown_token().cancel();
    }

    async fn a_childs_arrival_is_recorded_once(db) {
        let engine = db.engine();
        let (parent, child) = parent_with_child(&engine).await;
        let task = workflow_task(&engine, &["child"]).await.expect("the child's task");
        assert_eq!(task.job_id, child);
        complete(&engine, &task, vec![WorkflowCommand::CompleteJob { result: json!("done") }]).await;
        let arrival_of = |journal: &[JournalEntry]| match journal.first() {
            Some(JournalEntry::Child { status, result, arrival, .. }) => {
                assert_eq!((*status, result.clone()), (JobStatus::Succeeded, Some(json!("done"))));
                *arrival
            }
            other => panic!("the child at position 0: {other:?}"),
        };
        let task = workflow_task(&engine, &["parent"]).await.expect("the parent, woken by its child");
        let first = arrival_of(&task.journal).expect("numbered");
        // A late second writer of the same outcome (or of a job that is not this parent's
        // child) changes no number.
        let stranger = engine.submit(ALICE, "s", &JobRequest::workflow("other", json!({}))).await.unwrap().job.id;
        let store = db.store();
        let mut tx = store.begin().await.unwrap();
        tx.lock_job(ALICE, parent).await.unwrap();
        tx.mark_workflow_ready(ALICE, parent, Arrival::Child(child)).await.unwrap();
        tx.mark_workflow_ready(ALICE, parent, Arrival::Child(stranger)).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(db.count("SELECT count(*) FROM jobs WHERE parent_arrival IS NOT NULL").await, 1);
        complete(&engine, &task, vec![]).await;
        let task = workflow_task(&engine, &["parent"]).await.expect("the parent, woken again");
        assert_eq!(arrival_of(&task.journal), Some(first), "an outcome arrives once");
    }

    async fn a_child_key_held_by_another_job_or_an_invalid_workflow_name_parks_the_parent(db) {
        let engine = db.engine();
        let parent = engine.submit(ALICE, "p", &JobRequest::workflow("parent", json!({}))).await.unwrap().job;
        // The owner took the child's key first.
        engine.submit(ALICE, &child_key(parent.id, 0), &JobRequest::workflow("squatter", json!({}))).await.unwrap();
        let task = workflow_task(&engine, &["parent"]).await.unwrap();
        complete(&engine, &task, vec![start_child(0, "child")]).await;
        let view = engine.job(&Scope::AllOwners, parent.id).await.unwrap();
        assert_eq!(view.error.unwrap().code, "idempotency_key_reused");
        assert_eq!((view.status, view.children.len()), (JobStatus::Running, 0), "parked visibly, nothing started");

        let other = engine.submit(ALICE, "p2", &JobRequest::workflow("parent", json!({}))).await.unwrap().job;
        let task = workflow_task(&engine, &["parent"]).await.unwrap();
        assert_eq!(task.job_id, other.id);
        complete(&engine, &task, vec![start_child(0, "")]).await;
        let view = engine.job(&Scope::AllOwners, other.id).await.unwrap();
        assert_eq!(view.error.unwrap().code, "invalid_request");
        assert!(view.children.is_empty());
        assert!(event_types(&engine, other.id).await.contains(&"workflow_task_failed".to_owned()));
    }

    async fn the_reaper_cancels_open_children_of_a_cancelled_parent(db) {
        let engine = db.engine();
        let (parent, child) = parent_with_child(&engine).await;
        // A crash between the parent's cancel and its cascade: the parent is cancelled,
        // its child is not.
        db.execute(&format!("UPDATE jobs SET status = 'cancelled' WHERE id = '{parent}'")).await.unwrap();
        assert_eq!(engine.job(&Scope::AllOwners, child).await.unwrap().status, JobStatus::Queued);
        let report = engine.reap().await.unwrap();
        assert_eq!(report.children_cancelled, 1);
        let view = engine.job(&Scope::AllOwners, child).await.unwrap();
        assert_eq!(view.status, JobStatus::Cancelled);
        assert_eq!(view.error.unwrap().code, "job_cancelled");
        assert_eq!(engine.reap().await.unwrap().children_cancelled, 0, "once");
    }

    async fn a_child_pending_when_its_compensating_parent_is_cancelled_is_cancelled_and_the_parent_compensates(db) {
        async fn waiter(ctx: WorkflowContext, _input: Value) -> Result<String, WorkflowError> {
            let go: String = ctx.wait_signal("go").await?;
            Ok(go)
        }
        async fn parent(ctx: WorkflowContext, _input: Value) -> Result<String, WorkflowError> {
            ctx.compensate_within(Duration::from_secs(60));
            match ctx.child_workflow::<String>("waiter", json!({})).await {
                Ok(done) => Ok(done),
                Err(e) if e.is_cancelled() => {
                    let undone: Text = ctx.activity("undo", Text { text: "child".into() }).await?;
                    Ok(undone.text)
                }
                Err(e) => Err(e),
            }
        }
        let server = TestServer::start(db).await;
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("parent", parent)
                .workflow("waiter", waiter)
                .provider("undo", "undo", |_ctx: ActivityContext, t: Text| async move {
                    Ok::<_, ActivityError>(Text { text: format!("undid {}", t.text) })
                })
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("p", &workflow_job("parent", json!({}))).await.unwrap().job.id;
        wait_for("the child to start and wait", Duration::from_secs(30), || async {
            let job = client.job(id).await.unwrap();
            match job.children.first() {
                Some(child) => client.events(*child).await.unwrap().iter().any(|e| e.kind == "workflow_task_completed"),
                None => false,
            }
        })
        .await;
        let child = client.job(id).await.unwrap().children[0];
        client.cancel(id).await.unwrap();
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "{:?}", job.error);
        let ended = client.events(id).await.unwrap().into_iter().find(|e| e.kind == "job_cancelled").expect("job_cancelled");
        assert_eq!(ended.data["compensation"]["result"], json!("undid child"));
        assert_eq!(client.job(child).await.unwrap().status, JobStatus::Cancelled, "the cancel reached the child");
        worker.shutdown_token().cancel();
    }
}
