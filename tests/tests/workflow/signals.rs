//! Signals: `POST /v1/jobs/{id}/signals` (one signal per key), `ctx.wait_signal` (each
//! signal taken once, in the order recorded, kept until a wait takes it), the timeout
//! form, and a race against an activity decided once.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::model::JobStatus;
use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for};
use onceflow_worker::api::JobRequestBody;
use onceflow_worker::{
    ActivityContext, ActivityError, Client, Worker, WorkflowContext, WorkflowError,
};
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Approval {
    by: String,
}

/// Waits for one `approve`, then gives any second one a second to come.
async fn approval(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
    let first: Approval = ctx.wait_signal("approve").await?;
    let second: Option<Approval> = ctx
        .wait_signal_timeout("approve", Duration::from_secs(1))
        .await?;
    Ok(json!({ "first": first.by, "second": second.map(|a| a.by) }))
}

/// Takes five `item` signals and returns them in the order it took them.
async fn collector(ctx: WorkflowContext, _input: Value) -> Result<Vec<i64>, WorkflowError> {
    let mut items = Vec::new();
    for _ in 0..5 {
        items.push(ctx.wait_signal::<i64>("item").await?);
    }
    Ok(items)
}

/// Runs `fetch` first, then waits for `approve`.
async fn fetch_then_wait(ctx: WorkflowContext, _input: Value) -> Result<String, WorkflowError> {
    let _: Value = ctx.activity("fetch", json!({})).await?;
    let a: Approval = ctx.wait_signal("approve").await?;
    Ok(a.by)
}

/// `approve` against a short timer, then a plain wait for `approve`.
async fn timed(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
    let ms = input["timeout_ms"].as_u64().unwrap_or(200);
    let first: Option<String> = ctx
        .wait_signal_timeout("approve", Duration::from_millis(ms))
        .await?;
    let second: String = ctx.wait_signal("approve").await?;
    Ok(json!({ "first": first, "second": second }))
}

async fn signal(
    server: &TestServer,
    id: &str,
    key: &str,
    body: &Value,
) -> onceflow_tests::server::Reply {
    server
        .api
        .send(
            Method::POST,
            &format!("/v1/jobs/{id}/signals"),
            Some(&server.tokens.client),
            &[("Idempotency-Key", key)],
            Some(body),
        )
        .await
}

async fn started(client: &Client, id: uuid::Uuid) {
    wait_for(
        "the workflow's first task to complete",
        Duration::from_secs(30),
        || async {
            client
                .events(id)
                .await
                .unwrap()
                .iter()
                .any(|e| e.kind == "workflow_task_completed")
        },
    )
    .await;
}

rules! {
    async fn a_workflow_waiting_for_a_signal_resumes_with_its_payload(db) {
        let server = TestServer::start(db).await;
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("approval", approval).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("expense-1", &workflow_job("approval", json!({}))).await.unwrap().job.id;
        started(&client, id).await;
        assert_eq!(client.job(id).await.unwrap().status, JobStatus::Running, "it waits");
        let sent = client.signal(id, "approve", &Approval { by: "ann".into() }, "click-1").await.unwrap();
        assert!(!sent.replayed);
        assert_eq!((sent.signal.name.as_str(), sent.signal.seq, sent.signal.consumed), ("approve", 1, false));
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"first": "ann", "second": null})));
        let signals = job.signals.expect("a workflow job's view lists its signals");
        assert_eq!(signals.len(), 1);
        assert!(signals[0].consumed && signals[0].consumed_at.is_some(), "{signals:?}");
        assert_eq!(signals[0].payload, json!({"by": "ann"}));
        let kinds: Vec<String> = client.events(id).await.unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds.iter().filter(|k| *k == "signal_received").count(), 1);
        assert_eq!(kinds.iter().filter(|k| *k == "signal_consumed").count(), 1);
        worker.shutdown_token().cancel();
    }

    async fn a_double_clicked_signal_is_recorded_once(db) {
        let server = TestServer::start(db).await;
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("approval", approval).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("expense-2", &workflow_job("approval", json!({}))).await.unwrap().job.id.to_string();
        let body = json!({"name": "approve", "payload": {"by": "ann"}});
        // Twenty clicks of one button at once, each a separate connection.
        let replies = join_all((0..20).map(|_| signal(&server, &id, "approve-button", &body))).await;
        let recorded: Vec<_> = replies.iter().filter(|r| r.status == StatusCode::ACCEPTED).collect();
        let replayed: Vec<_> = replies.iter().filter(|r| r.status == StatusCode::OK).collect();
        assert_eq!((recorded.len(), replayed.len()), (1, 19), "{:?}", replies.iter().map(|r| (r.status, r.body.clone())).collect::<Vec<_>>());
        let signal_id = &recorded[0].body["signal_id"];
        assert!(replies.iter().all(|r| &r.body["signal_id"] == signal_id), "one signal for all twenty");
        assert!(replayed.iter().all(|r| r.headers["idempotent-replayed"] == "true"));
        assert_eq!(recorded[0].body["seq"], json!(1));
        let job = client.wait(id.parse().unwrap(), Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"first": "ann", "second": null})), "one approval, not two");
        assert_eq!(job.signals.unwrap().len(), 1);
        worker.shutdown_token().cancel();
    }

    async fn a_reused_signal_key_with_another_body_is_refused_and_changes_nothing(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("expense-3", &workflow_job("approval", json!({}))).await.unwrap().job.id.to_string();
        let first = signal(&server, &id, "k", &json!({"name": "approve", "payload": {"by": "ann"}})).await;
        assert_eq!(first.status, StatusCode::ACCEPTED, "{:?}", first.body);
        // The same body spelled differently is the same signal.
        let same = signal(&server, &id, "k", &json!({"payload": {"by": "ann"}, "name": "approve"})).await;
        assert_eq!(same.status, StatusCode::OK, "{:?}", same.body);
        let other = signal(&server, &id, "k", &json!({"name": "approve", "payload": {"by": "bob"}})).await;
        assert_eq!((other.status, other.code()), (StatusCode::CONFLICT, "idempotency_key_reused"));
        let renamed = signal(&server, &id, "k", &json!({"name": "reject", "payload": {"by": "ann"}})).await;
        assert_eq!((renamed.status, renamed.code()), (StatusCode::CONFLICT, "idempotency_key_reused"));
        let job = client.job(id.parse().unwrap()).await.unwrap();
        let signals = job.signals.unwrap();
        assert_eq!(signals.len(), 1);
        assert_eq!(signals[0].payload, json!({"by": "ann"}));
    }

    async fn a_signal_to_an_activity_job_a_finished_job_or_another_owners_job_is_refused(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let body = json!({"name": "approve"});
        let activity = server.api.submit(&server.tokens.client, "act", &json!({"activity": "generate", "providers": ["p"], "input": {}})).await;
        let activity_id = activity.body["id"].as_str().unwrap().to_owned();
        let refused = signal(&server, &activity_id, "k", &body).await;
        assert_eq!((refused.status, refused.code()), (StatusCode::CONFLICT, "not_a_workflow"));

        let id = client.submit("wf", &workflow_job("approval", json!({}))).await.unwrap().job.id;
        let kept = signal(&server, &id.to_string(), "before", &body).await;
        assert_eq!(kept.status, StatusCode::ACCEPTED);
        // Bob cannot see alice's job at all.
        let bobs = server.api.send(Method::POST, &format!("/v1/jobs/{id}/signals"), Some(&server.tokens.bob), &[("Idempotency-Key", "b")], Some(&body)).await;
        assert_eq!((bobs.status, bobs.code()), (StatusCode::NOT_FOUND, "not_found"));
        // Bad input: a clear 400, nothing recorded.
        let no_key = server.api.post(&format!("/v1/jobs/{id}/signals"), &server.tokens.client, &body).await;
        assert_eq!((no_key.status, no_key.code()), (StatusCode::BAD_REQUEST, "missing_idempotency_key"));
        for bad in [json!({}), json!({"name": ""}), json!({"name": "two words"}), json!({"name": "x".repeat(256)}), json!({"name": 7}), json!({"name": "ok", "payload": "nul\u{0}"})] {
            let reply = signal(&server, &id.to_string(), "bad", &bad).await;
            assert_eq!((reply.status, reply.code()), (StatusCode::BAD_REQUEST, "invalid_request"), "{bad}: {:?}", reply.body);
        }
        client.cancel(id).await.unwrap();
        let late = signal(&server, &id.to_string(), "after", &body).await;
        assert_eq!((late.status, late.code()), (StatusCode::CONFLICT, "job_finished"));
        // The click that was recorded before the job finished still answers as recorded.
        let again = signal(&server, &id.to_string(), "before", &body).await;
        assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
        let missing = signal(&server, &uuid::Uuid::now_v7().to_string(), "k", &body).await;
        assert_eq!((missing.status, missing.code()), (StatusCode::NOT_FOUND, "not_found"));
        assert_eq!(client.job(id).await.unwrap().signals.unwrap().len(), 1);
    }

    async fn a_signal_sent_before_the_workflow_waits_is_kept_until_it_does(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("expense-4", &workflow_job("fetch_then_wait", json!({}))).await.unwrap().job.id;
        // No worker yet: the signal arrives before the workflow ever ran.
        client.signal(id, "approve", &Approval { by: "early".into() }, "k").await.unwrap();
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("fetch_then_wait", fetch_then_wait)
                .provider("fetch", "fetch", |_ctx: ActivityContext, v: Value| async move { Ok::<_, ActivityError>(v) })
                .build()
                .unwrap(),
        );
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!("early")));
        worker.shutdown_token().cancel();
    }

    async fn signals_are_taken_in_the_order_they_were_recorded_each_once(db) {
        let server = TestServer::start(db).await;
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("collector", collector).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("batch", &workflow_job("collector", json!({}))).await.unwrap().job.id;
        // Sent one after another while the workflow replays after each: some arrive while
        // it waits, some while a task is out.
        for item in 1..=5i64 {
            client.signal(id, "item", &item, &format!("item-{item}")).await.unwrap();
            // A repeat of each click changes nothing.
            assert!(client.signal(id, "item", &item, &format!("item-{item}")).await.unwrap().replayed);
        }
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!([1, 2, 3, 4, 5])));
        let signals = job.signals.unwrap();
        let taken: Vec<(i64, bool)> = signals.iter().map(|s| (s.seq, s.consumed)).collect();
        assert_eq!(taken, vec![(1, true), (2, true), (3, true), (4, true), (5, true)]);
        let late = client.signal(id, "item", &6, "item-6").await.unwrap_err();
        assert!(matches!(late, onceflow_worker::SdkError::Api { ref code, .. } if code == "job_finished"), "{late:?}");
        worker.shutdown_token().cancel();
    }

    async fn a_signal_wait_with_a_timeout_ends_none_when_the_timer_wins_and_leaves_the_signal_for_the_next_wait(db) {
        let server = TestServer::start(db).await;
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("timed", timed).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("t1", &workflow_job("timed", json!({"timeout_ms": 200}))).await.unwrap().job.id;
        wait_for("the timeout's timer to fire", Duration::from_secs(30), || async {
            client.events(id).await.unwrap().iter().any(|e| e.kind == "timer_fired")
        })
        .await;
        client.signal(id, "approve", &"late", "k").await.unwrap();
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"first": null, "second": "late"})));
        worker.shutdown_token().cancel();
    }

    async fn a_signal_wait_with_a_timeout_takes_a_signal_that_arrives_before_the_timer(db) {
        let server = TestServer::start(db).await;
        let worker = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("timed", timed).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("t2", &workflow_job("timed", json!({"timeout_ms": 600_000}))).await.unwrap().job.id;
        started(&client, id).await;
        client.signal(id, "approve", &"one", "k1").await.unwrap();
        client.signal(id, "approve", &"two", "k2").await.unwrap();
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"first": "one", "second": "two"})));
        worker.shutdown_token().cancel();
    }

    async fn a_race_between_an_activity_and_a_signal_takes_the_same_branch_on_every_replay(db) {
        // `fetch` is listed first (biased) but finishes after the signal arrived and the
        // workflow moved on; a replay that delivered both at once would take `fetch`'s
        // branch, ask for another input at position 2 and park the job.
        async fn racer(ctx: WorkflowContext, _input: Value) -> Result<String, WorkflowError> {
            let slow = ctx.activity::<Value>("fetch", json!({})).into_future();
            let go = ctx.wait_signal::<String>("go");
            let won = tokio::select! {
                biased;
                _ = slow => "fetch".to_owned(),
                by = go => format!("signal from {}", by?),
            };
            let next: String = ctx.activity("generate", json!({ "won": won })).await?;
            Ok(next)
        }
        let server = TestServer::start(db).await;
        let slow_gate = Arc::new(tokio::sync::Semaphore::new(0));
        let next_gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (sg, ng) = (slow_gate.clone(), next_gate.clone());
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("racer", racer)
                .provider("fetch", "fetch", move |_ctx: ActivityContext, v: Value| {
                    let gate = sg.clone();
                    async move {
                        let _ = gate.acquire().await;
                        Ok::<_, ActivityError>(v)
                    }
                })
                .provider("generate", "generate", move |_ctx: ActivityContext, v: Value| {
                    let gate = ng.clone();
                    async move {
                        let _ = gate.acquire().await;
                        Ok::<_, ActivityError>(format!("after {}", v["won"].as_str().unwrap_or("?")))
                    }
                })
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("race", &workflow_job("racer", json!({}))).await.unwrap().job.id;
        started(&client, id).await;
        client.signal(id, "go", &"ann", "k").await.unwrap();
        wait_for("the signal's branch to win and the workflow to move on", Duration::from_secs(30), || async {
            client.job(id).await.unwrap().activities.iter().any(|a| a.name == "generate")
        })
        .await;
        // Now `fetch` finishes: the next replay sees both outcomes, in the order they came.
        slow_gate.add_permits(1);
        wait_for("fetch to succeed and the workflow to replay", Duration::from_secs(30), || async {
            let events = client.events(id).await.unwrap();
            let fetched = events.iter().position(|e| e.kind == "attempt_succeeded");
            fetched.is_some_and(|at| events[at..].iter().any(|e| e.kind == "workflow_task_completed"))
        })
        .await;
        next_gate.add_permits(1);
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!("after signal from ann")));
        worker.shutdown_token().cancel();
    }

    async fn a_signal_is_taken_by_one_wait_and_a_task_that_gives_it_to_another_parks_the_job(db) {
        // The guard under the engine: a workflow task that hands an already-taken signal
        // to a different wait (a stale or changed workflow) changes nothing and parks.
        let engine = db.engine();
        let scope = onceflow_engine::model::Scope::Owner("alice".into());
        let job = engine.submit("alice", "k", &onceflow_engine::JobRequest::from_json(&json!({"workflow": "w", "input": {}})).unwrap()).await.unwrap().job;
        let request = onceflow_engine::SignalRequest::from_json(&json!({"name": "approve"})).unwrap();
        engine.signal(&scope, job.id, "s1", &request).await.unwrap();
        let claim = |worker: &str| onceflow_engine::ClaimRequest {
            worker_id: worker.into(),
            task_queue: "default".into(),
            providers: vec![],
            max_tasks: 1,
        };
        let tasks = engine.claim_tasks(&onceflow_engine::model::Scope::AllOwners, &claim("w1"), &["w".into()]).await.unwrap();
        let onceflow_protocol::workflow::Task::Workflow(t1) = &tasks[0] else { panic!("a workflow task") };
        assert_eq!(t1.signals.len(), 1);
        let consume = |seq: i32, t: &onceflow_protocol::workflow::WorkflowTask| onceflow_protocol::workflow::CompleteWorkflowTaskRequest {
            lease_token: t.lease_token,
            read_version: t.read_version,
            commands: vec![onceflow_protocol::workflow::WorkflowCommand::ConsumeSignal { seq, signal_seq: 1 }],
 sticky_horizon: None,
};
        let outcome = engine.complete_workflow_task(&onceflow_engine::model::Scope::AllOwners, job.id, &consume(0, t1)).await.unwrap();
        assert_eq!(outcome, onceflow_engine::WorkflowTaskOutcome::Applied);
        // The same task again is stale: nothing changes.
        let again = engine.complete_workflow_task(&onceflow_engine::model::Scope::AllOwners, job.id, &consume(3, t1)).await.unwrap();
        assert_eq!(again, onceflow_engine::WorkflowTaskOutcome::Stale);
        // A newer task that gives signal 1 to position 3 instead is refused: parked.
        engine.signal(&scope, job.id, "s2", &onceflow_engine::SignalRequest::from_json(&json!({"name": "other"})).unwrap()).await.unwrap();
        let tasks = engine.claim_tasks(&onceflow_engine::model::Scope::AllOwners, &claim("w2"), &["w".into()]).await.unwrap();
        let onceflow_protocol::workflow::Task::Workflow(t2) = &tasks[0] else { panic!("a workflow task") };
        assert_eq!(t2.signals.iter().map(|s| s.consumed_by).collect::<Vec<_>>(), vec![Some(0), None]);
        engine.complete_workflow_task(&onceflow_engine::model::Scope::AllOwners, job.id, &consume(3, t2)).await.unwrap();
        let view = engine.job(&scope, job.id).await.unwrap();
        assert_eq!(view.error.map(|e| e.code), Some("nondeterminism".to_owned()));
        let signals = view.signals.unwrap();
        assert_eq!(signals.iter().map(|s| s.consumed).collect::<Vec<_>>(), vec![true, false], "signal 1 stays with its first wait");
    }

    async fn a_signal_wait_pending_when_the_job_is_cancelled_returns_job_cancelled_and_compensation_runs(db) {
        // The expense waits for `approve` with a compensation bound; the owner cancels it:
        // the wait resolves to `job_cancelled`, the workflow notifies the requester (a
        // compensation step), and a signal sent afterwards is refused.
        async fn cancellable(ctx: WorkflowContext, _input: Value) -> Result<String, WorkflowError> {
            ctx.compensate_within(Duration::from_secs(60));
            match ctx.wait_signal::<Approval>("approve").await {
                Ok(a) => Ok(format!("approved by {}", a.by)),
                Err(e) if e.is_cancelled() => {
                    let told: String = ctx.activity("notify", json!({"why": "cancelled"})).await?;
                    Ok(told)
                }
                Err(e) => Err(e),
            }
        }
        let server = TestServer::start(db).await;
        let notified = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let n = notified.clone();
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("cancellable", cancellable)
                .provider("notify", "notify", move |_ctx: ActivityContext, _v: Value| {
                    let n = n.clone();
                    async move {
                        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Ok::<_, ActivityError>("requester told".to_owned())
                    }
                })
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("c1", &workflow_job("cancellable", json!({}))).await.unwrap().job.id;
        wait_for("the bound to be declared", Duration::from_secs(30), || async {
            client.events(id).await.unwrap().iter().any(|e| e.kind == "compensation_declared")
        })
        .await;
        let answered = client.cancel(id).await.unwrap();
        assert!(answered.cancel_requested_at.is_some(), "{answered:?}");
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "{:?}", job.error);
        assert_eq!(notified.load(std::sync::atomic::Ordering::SeqCst), 1, "the compensation ran once");
        let events = client.events(id).await.unwrap();
        let ended = events.iter().find(|e| e.kind == "job_cancelled").expect("job_cancelled");
        assert_eq!(ended.data["compensation"]["result"], json!("requester told"));
        let late = client.signal(id, "approve", &Approval { by: "ann".into() }, "late").await.unwrap_err();
        assert!(matches!(late, onceflow_worker::SdkError::Api { ref code, .. } if code == "job_finished"), "{late:?}");
        assert_eq!(job.signals.map(|s| s.len()), Some(0));
        worker.shutdown_token().cancel();
    }
}
