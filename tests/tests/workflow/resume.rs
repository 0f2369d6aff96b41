//! Resume: a failed job (or a parked workflow) runs again under its own id and key.
//! Recorded outcomes are replayed, never run again; the failed step runs again with a
//! fresh attempt at its first provider and a fresh retry budget; two resumes at once
//! resume once.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::model::{JobStatus, Scope};
use onceflow_engine::{Completion, CompletionBody, JobRequest};
use onceflow_tests::server::TestServer;
use onceflow_tests::{claim_one, llm_job, quick_options, rules, wait_for, ALICE};
use onceflow_worker::api::JobRequestBody;
use onceflow_worker::{
    ActivityContext, ActivityError, Client, RetryPolicy, Worker, WorkflowContext, WorkflowError,
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

/// Runs `worker` until it is stopped; the handle ends when it has.
fn spawn_worker(worker: Worker) -> (Arc<Worker>, JoinHandle<()>) {
    let worker = Arc::new(worker);
    let w = worker.clone();
    let handle = tokio::spawn(async move {
        let _ = w.run().await;
    });
    (worker, handle)
}

/// Stops a worker and waits until it no longer polls.
async fn stop((worker, handle): (Arc<Worker>, JoinHandle<()>)) {
    worker.shutdown_token().cancel();
    let _ = handle.await;
}

/// One retry at most: a failure exhausts the provider at once.
fn no_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts_per_provider: 1,
        ..RetryPolicy::default()
    }
}

/// A failed activity job of alice (its one provider refused the attempt for good),
/// made with the engine alone.
async fn failed_activity_job(server: &TestServer, key: &str) -> Uuid {
    let engine = &server.engine;
    let job = engine
        .submit(ALICE, key, &llm_job(json!({"text": "x"}), quick_options()))
        .await
        .unwrap()
        .job;
    let task = claim_one(engine, "primary-llm").await;
    engine
        .complete(
            &Scope::AllOwners,
            task.attempt_id,
            &Completion {
                lease_token: task.lease_token,
                body: CompletionBody::Error {
                    message: "card declined".into(),
                    retryable: false,
                },
            },
        )
        .await
        .unwrap();
    let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
    assert_eq!(view.status, JobStatus::Failed, "{view:?}");
    job.id
}

fn resume_path(id: Uuid) -> String {
    format!("/v1/jobs/{id}/resume")
}

rules! {
    async fn a_resumed_activity_job_keeps_its_id_and_key_and_succeeds_on_a_fresh_attempt(db) {
        let server = TestServer::start(db).await;
        // Declines its first three calls: two attempts (the whole budget) before the
        // resume, one after it; the fourth call succeeds. Without a fresh budget the third
        // failure would fail the job again.
        let calls = Arc::new(AtomicU32::new(0));
        let counted = calls.clone();
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .provider("charge", "primary", move |_ctx: ActivityContext, input: Value| {
                    let calls = counted.clone();
                    async move {
                        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                        if n <= 3 {
                            return Err(ActivityError::retryable(format!("declined ({n})")));
                        }
                        Ok::<_, ActivityError>(json!({"charged": input["amount"]}))
                    }
                })
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let body: JobRequestBody = serde_json::from_value(json!({
            "activity": "charge", "providers": ["primary", "backup"], "input": {"amount": 5},
            "options": {"retry": {"max_attempts_per_provider": 2, "initial_backoff_ms": 10, "max_backoff_ms": 10}}
        })).unwrap();
        let id = client.submit("order-7", &body).await.unwrap().job.id;
        let failed = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(failed.status, JobStatus::Failed, "{failed:?}");
        assert_eq!(failed.error.as_ref().unwrap().code, "providers_exhausted");
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        let resumed = client.resume(id, "the card's limit was raised").await.unwrap();
        assert_eq!((resumed.id, resumed.idempotency_key.as_str(), resumed.status), (id, "order-7", JobStatus::Running));
        assert!(resumed.error.is_none(), "{resumed:?}");
        let done = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
        assert_eq!(done.result, Some(json!({"charged": 5})));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        let attempts = &done.activities[0].attempts;
        let seen: Vec<(i32, &str, &str)> = attempts.iter().map(|a| (a.number, a.provider.as_str(), a.status.as_str())).collect();
        assert_eq!(seen, vec![(1, "primary", "failed"), (2, "primary", "failed"), (3, "primary", "failed"), (4, "primary", "succeeded")],
            "a fresh attempt at the first provider, then a retry from a fresh budget; nothing before it rewritten");
        let events = client.events(id).await.unwrap();
        let resumes: Vec<_> = events.iter().filter(|e| e.kind == "job_resumed").collect();
        assert_eq!(resumes.len(), 1);
        assert_eq!(resumes[0].actor, "client:alice");
        assert_eq!(resumes[0].data["reason"], json!("the card's limit was raised"));
        assert!(events.iter().any(|e| e.kind == "attempt_scheduled" && e.data["reason"] == json!("resume") && e.data["number"] == json!(3)));
        assert_eq!(events.iter().filter(|e| e.kind == "job_failed").count(), 1, "the failure stays in the history");
        // One intent, still one job: the key replays it.
        assert_eq!(client.submit("order-7", &body).await.unwrap().job.id, id);
        stop(worker).await;
    }

    async fn a_resumed_workflow_replays_completed_steps_and_reruns_only_the_failed_one(db) {
        let server = TestServer::start(db).await;
        let reserved = Arc::new(AtomicU32::new(0));
        let charged = Arc::new(AtomicU32::new(0));
        let shipped = Arc::new(AtomicU32::new(0));
        let broken = Arc::new(AtomicBool::new(true));
        async fn order(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
            let reservation: Value = ctx.activity("reserve", &input).await?;
            ctx.sleep(Duration::from_millis(10)).await?;
            let payment: Value = ctx.activity("charge", &input).retry(no_retry()).await?;
            let parcel: Value = ctx.activity("ship", &input).await?;
            Ok(json!([reservation, payment, parcel]))
        }
        let counter = |calls: &Arc<AtomicU32>, answer: &'static str| {
            let calls = calls.clone();
            move |_ctx: ActivityContext, _: Value| {
                let calls = calls.clone();
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ActivityError>(json!(answer))
                }
            }
        };
        let payments = charged.clone();
        let down = broken.clone();
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("order", order)
                .provider("reserve", "reserve", counter(&reserved, "reserved"))
                .provider("ship", "ship", counter(&shipped, "shipped"))
                .provider("charge", "charge", move |_ctx: ActivityContext, _: Value| {
                    let calls = payments.clone();
                    let down = down.clone();
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        if down.load(Ordering::SeqCst) {
                            return Err(ActivityError::fatal("the bank is down"));
                        }
                        Ok::<_, ActivityError>(json!("charged"))
                    }
                })
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("order-1", &workflow_job("order", json!({"sku": "x"}))).await.unwrap().job.id;
        let failed = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(failed.status, JobStatus::Failed, "{failed:?}");
        assert_eq!(failed.error.as_ref().unwrap().code, "providers_exhausted", "{failed:?}");
        assert_eq!((reserved.load(Ordering::SeqCst), charged.load(Ordering::SeqCst), shipped.load(Ordering::SeqCst)), (1, 1, 0));

        broken.store(false, Ordering::SeqCst);
        let resumed = client.resume(id, "the bank is back").await.unwrap();
        assert_eq!((resumed.id, resumed.status), (id, JobStatus::Running));
        let done = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
        assert_eq!(done.result, Some(json!(["reserved", "charged", "shipped"])));
        assert_eq!(
            (reserved.load(Ordering::SeqCst), charged.load(Ordering::SeqCst), shipped.load(Ordering::SeqCst)),
            (1, 2, 1),
            "the completed step was replayed, not run again; only the failed step ran again"
        );
        let charge = done.activities.iter().find(|a| a.name == "charge").unwrap();
        let tries: Vec<(i32, &str, &str)> = charge.attempts.iter().map(|a| (a.number, a.provider.as_str(), a.status.as_str())).collect();
        assert_eq!(tries, vec![(1, "charge", "failed"), (2, "charge", "succeeded")]);
        assert_eq!(done.activities.iter().find(|a| a.name == "reserve").unwrap().attempts.len(), 1);
        let events = client.events(id).await.unwrap();
        assert_eq!(events.iter().filter(|e| e.kind == "timer_started").count(), 1, "the timer was not started again");
        assert_eq!(events.iter().filter(|e| e.kind == "job_resumed").count(), 1);
        stop(worker).await;
    }

    async fn a_parked_workflow_resumes_with_fixed_code(db) {
        let server = TestServer::start(db).await;
        let fetched = Arc::new(AtomicU32::new(0));
        let fetch = |calls: Arc<AtomicU32>| move |_ctx: ActivityContext, _: Value| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ActivityError>(json!("page"))
            }
        };
        // v1: fetch, then wait for `go`.
        async fn v1(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            let page: Value = ctx.activity("fetch", json!({"url": "a"})).await?;
            let go: Value = ctx.wait_signal("go").await?;
            Ok(json!({"page": page, "go": go}))
        }
        // A bad deploy: another activity at position 0.
        async fn v2(ctx: WorkflowContext, _input: Value) -> Result<Value, WorkflowError> {
            let page: Value = ctx.activity("lookup", json!({"url": "a"})).await?;
            Ok(page)
        }
        // The fix: v1's steps again.
        async fn v3(ctx: WorkflowContext, input: Value) -> Result<Value, WorkflowError> {
            v1(ctx, input).await
        }
        let builder = |calls: Arc<AtomicU32>| Worker::builder(&server.api.url, &server.tokens.worker)
            .provider("fetch", "fetch", fetch(calls.clone()))
            .provider("lookup", "lookup", fetch(calls));
        let first = spawn_worker(builder(fetched.clone()).workflow("reader", v1).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("read-1", &workflow_job("reader", json!({}))).await.unwrap().job.id;
        wait_for("v1 to fetch and wait for its signal", Duration::from_secs(30), || async {
            client.events(id).await.unwrap().iter().filter(|e| e.kind == "workflow_task_completed").count() >= 2
        }).await;
        stop(first).await;

        let bad = spawn_worker(builder(fetched.clone()).workflow("reader", v2).build().unwrap());
        client.signal(id, "go", &json!("now"), "go-1").await.unwrap();
        wait_for("the bad deploy to park the job", Duration::from_secs(30), || async {
            client.job(id).await.unwrap().error.is_some_and(|e| e.code == "nondeterminism")
        }).await;
        stop(bad).await;
        let parked = client.job(id).await.unwrap();
        assert_eq!(parked.status, JobStatus::Running, "parked: {parked:?}");

        let fixed = spawn_worker(builder(fetched.clone()).workflow("reader", v3).build().unwrap());
        let resumed = client.resume(id, "deployed the fix").await.unwrap();
        assert_eq!(resumed.status, JobStatus::Running);
        assert!(resumed.error.is_none(), "the park's error is cleared: {resumed:?}");
        let done = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
        assert_eq!(done.result, Some(json!({"page": "page", "go": "now"})));
        assert_eq!(fetched.load(Ordering::SeqCst), 1, "the recorded fetch was replayed, never run again");
        assert_eq!(done.activities.len(), 1, "the bad deploy planned nothing");
        let events = client.events(id).await.unwrap();
        let resume = events.iter().find(|e| e.kind == "job_resumed").unwrap();
        assert_eq!(resume.data["parked"], json!(true));
        assert_eq!(resume.data["error"]["code"], json!("nondeterminism"));
        stop(fixed).await;
    }

    async fn two_concurrent_resumes_resume_once(db) {
        let server = TestServer::start(db).await;
        let id = failed_activity_job(&server, "k").await;
        let api = Arc::new(server.api.clone());
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let api = api.clone();
                let token = if i % 2 == 0 { server.tokens.client.clone() } else { server.tokens.operator.clone() };
                tokio::spawn(async move {
                    api.post(&resume_path(id), &token, &json!({"reason": format!("try {i}")})).await
                })
            })
            .collect();
        let mut accepted = 0;
        for task in tasks {
            let reply = task.await.unwrap();
            match reply.status.as_u16() {
                202 => accepted += 1,
                409 => assert_eq!(reply.code(), "job_not_resumable", "{:?}", reply.body),
                other => panic!("unexpected {other}: {:?}", reply.body),
            }
        }
        assert_eq!(accepted, 1, "one resume took effect");
        let events = onceflow_tests::event_types(&server.engine, id).await;
        assert_eq!(events.iter().filter(|e| *e == "job_resumed").count(), 1, "{events:?}");
        let view = server.engine.job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!(view.status, JobStatus::Running);
        assert_eq!(view.activities[0].attempts.len(), 2, "one fresh attempt: {view:?}");
        assert_eq!(db.count(&format!("SELECT count(*) FROM attempts WHERE job_id = '{id}' AND status = 'scheduled'")).await, 1);
    }

    async fn only_a_failed_or_parked_job_can_be_resumed(db) {
        let server = TestServer::start(db).await;
        let engine = &server.engine;
        let (client, operator) = (&server.tokens.client, &server.tokens.operator);
        let why = json!({"reason": "try again"});
        let refused = |reply: onceflow_tests::server::Reply, status: &str| {
            assert_eq!(reply.status.as_u16(), 409, "{:?}", reply.body);
            assert_eq!(reply.code(), "job_not_resumable");
            assert_eq!(reply.body["error"]["details"]["status"], json!(status), "{:?}", reply.body);
        };
        // Queued.
        let queued = engine.submit(ALICE, "queued", &llm_job(json!({"text": "q"}), quick_options())).await.unwrap().job.id;
        refused(server.api.post(&resume_path(queued), client, &why).await, "queued");
        // Running (its attempt started).
        let task = claim_one(engine, "primary-llm").await;
        refused(server.api.post(&resume_path(queued), operator, &why).await, "running");
        // Succeeded.
        engine.complete(&Scope::AllOwners, task.attempt_id, &Completion { lease_token: task.lease_token, body: CompletionBody::Result(json!({"text": "done"})) }).await.unwrap();
        refused(server.api.post(&resume_path(queued), client, &why).await, "succeeded");
        // Cancelled.
        let cancelled = engine.submit(ALICE, "cancelled", &JobRequest::workflow("never", json!({}))).await.unwrap().job.id;
        engine.cancel_job(&Scope::AllOwners, cancelled).await.unwrap();
        refused(server.api.post(&resume_path(cancelled), client, &why).await, "cancelled");

        let failed = failed_activity_job(&server, "failed").await;
        for body in [json!({}), json!({"reason": "  "}), json!({"reason": 7})] {
            let reply = server.api.post(&resume_path(failed), client, &body).await;
            assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{body}: {:?}", reply.body);
        }
        let reply = server.api.post(&resume_path(failed), &server.tokens.bob, &why).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"), "another owner's job: {:?}", reply.body);
        let reply = server.api.post(&resume_path(Uuid::now_v7()), client, &why).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"));
        let reply = server.api.post(&resume_path(failed), &server.tokens.worker, &why).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (403, "forbidden"));
        assert_eq!(engine.job(&Scope::AllOwners, failed).await.unwrap().status, JobStatus::Failed, "nothing changed");
        // An operator resumes any owner's job.
        let reply = server.api.post(&resume_path(failed), operator, &json!({"reason": "provider fixed"})).await;
        assert_eq!(reply.status.as_u16(), 202, "{:?}", reply.body);
        assert_eq!(reply.body["status"], json!("running"));
        assert_eq!(reply.body["id"], json!(failed));
        assert_eq!(reply.body["idempotency_key"], json!("failed"));
        let events = engine.job_events(&Scope::AllOwners, failed).await.unwrap();
        let resume = events.iter().find(|e| e.kind == "job_resumed").unwrap();
        assert_eq!((resume.actor.as_str(), resume.data["reason"].clone()), ("operator:ops", json!("provider fixed")));
        // Running again: not resumable a second time.
        refused(server.api.post(&resume_path(failed), client, &why).await, "running");
    }
}
