//! Long histories: sticky execution (a worker keeps a workflow's run between tasks and
//! gets only the new part of its history, with the whole of it when it does not hold the
//! run), and continue-as-new under the same job.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::model::{ActivityStatus, JobStatus, Scope};
use onceflow_engine::{ClaimRequest, Engine, JobRequest, WorkflowTaskOutcome};
use onceflow_protocol::workflow::{
    CompleteWorkflowTaskRequest, JournalEntry, Task, WorkflowCommand, WorkflowTask,
};
use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for, ALICE};
use onceflow_worker::api::JobRequestBody;
use onceflow_worker::{
    ActivityContext, ActivityError, Client, Worker, WorkflowContext, WorkflowError,
};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

async fn workflow_task(engine: &Engine, worker: &str) -> Option<WorkflowTask> {
    let request = ClaimRequest {
        worker_id: worker.into(),
        task_queue: "default".into(),
        providers: vec![],
        max_tasks: 1,
    };
    engine
        .claim_tasks(&Scope::AllOwners, &request, &["pipeline".to_owned()])
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
    sticky_horizon: Option<i64>,
) -> WorkflowTaskOutcome {
    let request = CompleteWorkflowTaskRequest {
        lease_token: task.lease_token,
        read_version: task.read_version,
        commands,
        sticky_horizon,
    };
    engine
        .complete_workflow_task(&Scope::AllOwners, task.job_id, &request)
        .await
        .unwrap()
}

fn timer(seq: i32, duration_ms: u64) -> WorkflowCommand {
    WorkflowCommand::StartTimer { seq, duration_ms }
}

fn schedule(seq: i32, name: &str) -> WorkflowCommand {
    WorkflowCommand::ScheduleActivity {
        seq,
        activity: name.into(),
        providers: vec![name.into()],
        input: json!({"step": seq}),
        options: None,
    }
}

fn seqs(task: &WorkflowTask) -> Vec<i32> {
    task.journal.iter().map(JournalEntry::seq).collect()
}

fn workflow_job(name: &str, input: serde_json::Value) -> JobRequestBody {
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

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Count {
    n: u32,
    total: u32,
}

/// One `echo` per run, then continue as new until the third run, which returns.
async fn counter(ctx: WorkflowContext, input: Count) -> Result<Count, WorkflowError> {
    let got: Count = ctx.activity("echo", &input).await?;
    if got.n < 3 {
        return ctx.continue_as_new(Count {
            n: got.n + 1,
            total: got.total + got.n,
        });
    }
    Ok(Count {
        n: got.n,
        total: got.total + got.n,
    })
}

/// `steps` zero-length timers, each one workflow task, then an `echo`.
async fn long(ctx: WorkflowContext, steps: u32) -> Result<u32, WorkflowError> {
    for _ in 0..steps {
        ctx.sleep(Duration::ZERO).await?;
    }
    let n: u32 = ctx
        .activity("echo", steps)
        .await
        .map_err(WorkflowError::from)?;
    Ok(n)
}

/// Waits for a `go` signal between two echoes.
async fn paused(ctx: WorkflowContext, _input: serde_json::Value) -> Result<u32, WorkflowError> {
    let a: u32 = ctx.activity("echo", 1).await?;
    let b: u32 = ctx.wait_signal("go").await?;
    let c: u32 = ctx.activity("echo", 3).await?;
    Ok(a + b + c)
}

/// Takes one `item` signal per run, keeping what it took, until it has three.
async fn collector(ctx: WorkflowContext, seen: Vec<String>) -> Result<Vec<String>, WorkflowError> {
    let item: String = ctx.wait_signal("item").await?;
    let mut seen = seen;
    seen.push(item);
    if seen.len() < 3 {
        return ctx.continue_as_new(seen);
    }
    Ok(seen)
}

fn echo_worker(server: &TestServer, calls: Arc<AtomicU32>) -> onceflow_worker::WorkerBuilder {
    Worker::builder(&server.api.url, &server.tokens.worker).provider(
        "echo",
        "echo",
        move |_ctx: ActivityContext, v: serde_json::Value| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ActivityError>(v)
            }
        },
    )
}

/// The `workflow_task_started` events of a job: `(since_arrival, journal_len)` each.
async fn task_starts(client: &Client, id: uuid::Uuid) -> Vec<(Option<i64>, u64)> {
    client
        .events(id)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind == "workflow_task_started")
        .map(|e| {
            (
                e.data["since_arrival"].as_i64(),
                e.data["journal_len"].as_u64().unwrap(),
            )
        })
        .collect()
}

rules! {
    async fn a_kept_run_gets_only_what_arrived_since_its_last_task(db) {
        let engine = db.engine();
        engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap();
        let t1 = workflow_task(&engine, "w1").await.unwrap();
        assert_eq!((t1.since_arrival, t1.run, t1.first_seq), (None, 1, 0), "a first task carries the whole history");
        // An activity left running, and a timer that fires with the task (arrival 1).
        assert_eq!(complete(&engine, &t1, vec![schedule(0, "fetch"), timer(1, 0)], Some(0)).await, WorkflowTaskOutcome::Applied);
        let t2 = workflow_task(&engine, "w1").await.expect("the timer woke the workflow");
        assert_eq!(t2.since_arrival, Some(0), "the worker that keeps the run gets its new part");
        assert_eq!(seqs(&t2), vec![1], "only the timer arrived since: the running activity is not sent again");
        assert_eq!(complete(&engine, &t2, vec![timer(2, 0)], Some(1)).await, WorkflowTaskOutcome::Applied);
        let t3 = workflow_task(&engine, "w1").await.unwrap();
        assert_eq!((t3.since_arrival, seqs(&t3)), (Some(1), vec![2]));
        // A worker that does not keep the run (here: completes without a horizon) leaves
        // the next task whole, to anyone.
        assert_eq!(complete(&engine, &t3, vec![timer(3, 0)], None).await, WorkflowTaskOutcome::Applied);
        let t4 = workflow_task(&engine, "w1").await.unwrap();
        assert_eq!((t4.since_arrival, seqs(&t4)), (None, vec![0, 1, 2, 3]));
        // Another worker than the one that keeps the run gets the whole history.
        assert_eq!(complete(&engine, &t4, vec![timer(4, 0)], Some(4)).await, WorkflowTaskOutcome::Applied);
        let t5 = workflow_task(&engine, "w2").await.unwrap();
        assert_eq!((t5.since_arrival, seqs(&t5)), (None, vec![0, 1, 2, 3, 4]));
    }

    async fn a_kept_run_whose_job_moved_on_gets_the_whole_history(db) {
        // The guard on the sticky claim: the job's version must be the one the keeping
        // worker's task left. Here w1's task expires, w2 runs the next one, and w1's late
        // completion loses; w1's next claim then gets the whole history.
        let engine = db.engine().with_workflow_task_lease(Duration::from_millis(300));
        engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap();
        let t1 = workflow_task(&engine, "w1").await.unwrap();
        assert_eq!(complete(&engine, &t1, vec![timer(0, 0)], Some(0)).await, WorkflowTaskOutcome::Applied);
        let t2 = workflow_task(&engine, "w1").await.unwrap();
        assert_eq!(t2.since_arrival, Some(0));
        let t2_again = wait_for_task(&engine, "w2").await;
        assert_eq!(t2_again.since_arrival, None, "an expired task handed to another worker is whole");
        assert_eq!(complete(&engine, &t2_again, vec![timer(1, 0)], Some(1)).await, WorkflowTaskOutcome::Applied);
        let late = CompleteWorkflowTaskRequest { lease_token: t2.lease_token, read_version: t2.read_version, commands: vec![timer(1, 0)], sticky_horizon: Some(1) };
        assert_eq!(engine.complete_workflow_task(&Scope::AllOwners, t2.job_id, &late).await.unwrap(), WorkflowTaskOutcome::Stale, "the late keeper loses");
        // The stale completion's transaction rolls back as its connection goes back to the
        // pool; until then the claim passes over the locked job (SKIP LOCKED).
        let t3 = wait_for_task(&engine, "w1").await;
        assert_eq!((t3.since_arrival, seqs(&t3)), (None, vec![0, 1]), "w2 keeps the run now: w1 gets the whole history");
        // The keeper is right, but the job moved without a task of it (the owner's cancel
        // of a compensating workflow moves the version): whole again.
        let declare = WorkflowCommand::DeclareCompensation { within_ms: 60_000 };
        assert_eq!(complete(&engine, &t3, vec![declare, timer(2, 3_600_000)], Some(2)).await, WorkflowTaskOutcome::Applied);
        engine.cancel_job(&Scope::AllOwners, t3.job_id).await.unwrap();
        let t4 = workflow_task(&engine, "w1").await.expect("the cancel wakes the workflow");
        assert_eq!(t4.since_arrival, None, "the job's version is not the one w1's task left");
        assert!(t4.cancel.is_some() && seqs(&t4) == vec![0, 1, 2], "{t4:?}");
    }

    async fn the_whole_history_of_a_task_is_read_by_its_holder_only(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("pipeline", json!({}))).await.unwrap().job.id;
        let engine = &server.engine;
        let t1 = workflow_task(engine, "w1").await.unwrap();
        assert_eq!(complete(engine, &t1, vec![schedule(0, "fetch"), timer(1, 0)], Some(0)).await, WorkflowTaskOutcome::Applied);
        let t2 = workflow_task(engine, "w1").await.unwrap();
        assert_eq!(seqs(&t2), vec![1]);
        let path = format!("/v1/worker/workflow-tasks/{id}/history");
        let whole = server.api.post(&path, &server.tokens.worker, &json!({"lease_token": t2.lease_token})).await;
        assert_eq!(whole.status, StatusCode::OK, "{:?}", whole.body);
        let whole: WorkflowTask = serde_json::from_value(whole.body).unwrap();
        assert_eq!((whole.since_arrival, seqs(&whole)), (None, vec![0, 1]));
        assert_eq!((whole.lease_token, whole.read_version), (t2.lease_token, t2.read_version), "the same task, whole");
        let other = server.api.post(&path, &server.tokens.worker, &json!({"lease_token": uuid::Uuid::now_v7()})).await;
        assert_eq!((other.status, other.body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("lease_lost")));
        let garbage = server.api.post(&path, &server.tokens.worker, &json!({"lease_token": "nope"})).await;
        assert_eq!(garbage.status, StatusCode::CONFLICT, "an opaque token that is not the task's holds nothing: {:?}", garbage.body);
        let missing = server.api.post(&path, &server.tokens.worker, &json!({})).await;
        assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{:?}", missing.body);
        let nobody = server.api.post(&format!("/v1/worker/workflow-tasks/{}/history", uuid::Uuid::now_v7()), &server.tokens.worker, &json!({"lease_token": t2.lease_token})).await;
        assert_eq!(nobody.status, StatusCode::NOT_FOUND);
        let client_token = server.api.post(&path, &server.tokens.client, &json!({"lease_token": t2.lease_token})).await;
        assert_eq!(client_token.status, StatusCode::FORBIDDEN, "worker calls need a worker token");
    }

    async fn a_long_workflow_is_served_from_its_kept_run(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(AtomicU32::new(0));
        let worker = spawn_worker(echo_worker(&server, calls.clone()).workflow("long", long).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("long", json!(150))).await.unwrap().job.id;
        let done = client.wait(id, Duration::from_secs(120)).await.unwrap();
        assert_eq!((done.status, done.result.clone()), (JobStatus::Succeeded, Some(json!(150))), "{:?}", done.error);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let starts = task_starts(&client, id).await;
        assert!(starts.len() > 150, "one task per step: {}", starts.len());
        assert_eq!(starts[0], (None, 0), "the first task is whole");
        // Every later task went to the worker that keeps the run, with only its new part.
        for (i, (since, len)) in starts.iter().enumerate().skip(1) {
            assert!(since.is_some(), "task {i} carried the whole history: {starts:?}");
            assert!(*len <= 1, "task {i} carried {len} steps");
        }
        worker.shutdown_token().cancel();
    }

    async fn without_kept_runs_every_task_replays_the_whole_history(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(AtomicU32::new(0));
        let worker = spawn_worker(echo_worker(&server, calls.clone()).max_cached_workflows(0).workflow("long", long).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("long", json!(20))).await.unwrap().job.id;
        let done = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!(done.result, Some(json!(20)));
        let starts = task_starts(&client, id).await;
        assert!(starts.iter().all(|(since, _)| since.is_none()), "{starts:?}");
        assert!(starts.windows(2).all(|w| w[1].1 >= w[0].1) && starts.last().unwrap().1 >= 20, "each task carries the whole, growing history: {starts:?}");
        worker.shutdown_token().cancel();
    }

    async fn a_worker_restarted_under_the_same_id_reads_the_whole_history_and_carries_on(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(AtomicU32::new(0));
        let first = spawn_worker(echo_worker(&server, calls.clone()).worker_id("w").workflow("paused", paused).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("paused", json!({}))).await.unwrap().job.id;
        wait_for("the first echo and the wait for `go`", Duration::from_secs(30), || async {
            task_starts(&client, id).await.len() >= 2 && calls.load(Ordering::SeqCst) == 1
        }).await;
        first.shutdown_token().cancel();
        wait_for("the first worker to stop", Duration::from_secs(30), || async { Arc::strong_count(&first) == 1 }).await;
        // Same id, empty memory: the engine still sends it only the new part.
        let second = spawn_worker(echo_worker(&server, calls.clone()).worker_id("w").workflow("paused", paused).build().unwrap());
        client.signal(id, "go", &2, "go-1").await.unwrap();
        let done = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!((done.status, done.result.clone()), (JobStatus::Succeeded, Some(json!(6))), "{:?}", done.error);
        assert_eq!(calls.load(Ordering::SeqCst), 2, "no step ran twice");
        let starts = task_starts(&client, id).await;
        assert!(starts.iter().skip(1).any(|(since, _)| since.is_some()), "a task went out sticky: {starts:?}");
        second.shutdown_token().cancel();
    }

    async fn a_workflow_that_continues_as_new_keeps_its_job_and_starts_a_fresh_history(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(AtomicU32::new(0));
        let worker = spawn_worker(echo_worker(&server, calls.clone()).workflow("counter", counter).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let submitted = client.submit("count-k", &workflow_job("counter", json!({"n": 1, "total": 0}))).await.unwrap();
        let id = submitted.job.id;
        let done = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!((done.status, done.result.clone()), (JobStatus::Succeeded, Some(json!({"n": 3, "total": 6}))), "{:?}", done.error);
        assert_eq!((done.idempotency_key.as_str(), done.input.clone()), ("count-k", json!({"n": 1, "total": 0})), "the job keeps its key and the input it was submitted with");
        assert_eq!(calls.load(Ordering::SeqCst), 3, "one echo per run, none twice");
        let seqs: Vec<i32> = done.activities.iter().map(|a| a.seq).collect();
        assert_eq!(seqs, vec![0, 1, 2], "each run numbers its steps past the last run's");
        let events = client.events(id).await.unwrap();
        let runs: Vec<(i64, i64)> = events.iter().filter(|e| e.kind == "workflow_continued_as_new")
            .map(|e| (e.data["run"].as_i64().unwrap(), e.data["first_seq"].as_i64().unwrap())).collect();
        assert_eq!(runs, vec![(2, 1), (3, 2)]);
        // A run's first task carries none of the runs before it.
        let starts = task_starts(&client, id).await;
        let firsts: Vec<&(Option<i64>, u64)> = starts.iter().filter(|(since, _)| since.is_none()).collect();
        assert_eq!(firsts.len(), 3, "each run starts whole: {starts:?}");
        assert!(firsts.iter().all(|(_, len)| *len == 0), "{starts:?}");
        // Resubmitting the intent finds the one job.
        let again = client.submit("count-k", &workflow_job("counter", json!({"n": 1, "total": 0}))).await.unwrap();
        assert_eq!(again.job.id, id);
        worker.shutdown_token().cancel();
    }

    async fn signals_not_taken_carry_over_to_the_next_run(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("collector", json!([]))).await.unwrap().job.id;
        for item in ["a", "b", "c"] {
            client.signal(id, "item", &item, item).await.unwrap();
        }
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("collector", collector).build().unwrap());
        let done = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!((done.status, done.result.clone()), (JobStatus::Succeeded, Some(json!(["a", "b", "c"]))), "{:?}", done.error);
        worker.shutdown_token().cancel();
    }

    async fn a_run_that_continues_as_new_leaves_its_open_steps_behind(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({"run": 1}))).await.unwrap().job;
        let t1 = workflow_task(&engine, "w").await.unwrap();
        let commands = vec![schedule(0, "fetch"), timer(1, 3_600_000), WorkflowCommand::ContinueAsNew { input: json!({"run": 2}), first_seq: 2 }];
        assert_eq!(complete(&engine, &t1, commands, None).await, WorkflowTaskOutcome::Applied);
        let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
        assert_eq!(view.status, JobStatus::Running);
        assert_eq!(view.activities[0].status, ActivityStatus::Cancelled, "the open activity is closed");
        assert_eq!(view.activities[0].error.as_ref().map(|e| e.code.as_str()), Some("continued_as_new"));
        let t2 = workflow_task(&engine, "w").await.expect("the new run is ready at once");
        assert_eq!((t2.run, t2.first_seq, t2.input.clone(), t2.journal.len()), (2, 2, json!({"run": 2}), 0));
        assert_eq!(engine.reap().await.unwrap().timers_fired, 0);
        // The next run's steps take its positions; the old run's timer never wakes it.
        assert_eq!(complete(&engine, &t2, vec![WorkflowCommand::CompleteJob { result: json!("done") }], None).await, WorkflowTaskOutcome::Applied);
        assert_eq!(engine.job(&Scope::AllOwners, job.id).await.unwrap().result, Some(json!("done")));
    }

    async fn a_continue_as_new_that_does_not_move_past_the_run_parks_the_job(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
        let t1 = workflow_task(&engine, "w").await.unwrap();
        let commands = vec![schedule(0, "fetch"), WorkflowCommand::ContinueAsNew { input: json!({}), first_seq: 0 }];
        assert_eq!(complete(&engine, &t1, commands, None).await, WorkflowTaskOutcome::Applied);
        let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
        assert_eq!(view.error.as_ref().map(|e| e.code.as_str()), Some("invalid_request"), "{:?}", view.error);
        assert!(view.error.unwrap().message.contains("not past position 0"));
        assert!(workflow_task(&engine, "w").await.is_none(), "parked: no task");
        // Not the last command: parked too, and nothing after it applies.
        let other = engine.submit(ALICE, "k2", &JobRequest::workflow("pipeline", json!({}))).await.unwrap().job;
        let t = workflow_task(&engine, "w").await.unwrap();
        let commands = vec![WorkflowCommand::ContinueAsNew { input: json!({}), first_seq: 5 }, schedule(0, "fetch")];
        assert_eq!(complete(&engine, &t, commands, None).await, WorkflowTaskOutcome::Applied);
        let view = engine.job(&Scope::AllOwners, other.id).await.unwrap();
        assert!(view.error.as_ref().is_some_and(|e| e.message.contains("last command")), "{:?}", view.error);
        assert!(view.activities.is_empty());
    }
}

/// A workflow task for `worker`, once one is handed out (an expired lease takes a moment).
async fn wait_for_task(engine: &Engine, worker: &str) -> WorkflowTask {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(task) = workflow_task(engine, worker).await {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no workflow task for {worker} within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
