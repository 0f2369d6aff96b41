//! Providers end to end: results, heartbeats, cancellation, contracts, certification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onceflow_engine::model::{AttemptStatus, JobStatus};
use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for};
use onceflow_worker::{ActivityContext, ActivityError, ActivityOptions, Client, StopReason, Worker};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Prompt {
    text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Reply {
    #[schemars(length(min = 1))]
    text: String,
}

fn options(heartbeat_s: u64) -> ActivityOptions {
    ActivityOptions { heartbeat_timeout_s: Some(heartbeat_s), ..ActivityOptions::default() }
}

fn client(server: &TestServer) -> Client {
    Client::new(server.api.url.clone(), server.tokens.client.clone()).unwrap()
}

/// Runs `worker` in the background until the returned guard is dropped.
struct Running(tokio_util::sync::CancellationToken);
impl Drop for Running {
    fn drop(&mut self) {
        self.0.cancel();
    }
}
fn start(worker: Worker) -> (Running, Arc<Worker>) {
    let worker = Arc::new(worker);
    let token = worker.shutdown_token();
    let w = worker.clone();
    tokio::spawn(async move { w.run().await });
    (Running(token), worker)
}

async fn echo(ctx: ActivityContext, prompt: Prompt) -> Result<Reply, ActivityError> {
    Ok(Reply { text: format!("{} [{} #{}]", prompt.text, ctx.idempotency_key(), ctx.attempt()) })
}

rules! {
    async fn a_worker_processes_jobs_end_to_end(db) {
        let server = TestServer::start(db).await;
        let worker = Worker::builder(&server.api.url, &server.tokens.worker)
            .worker_id("w-e2e")
            .provider("generate", "primary-llm", echo)
            .build()
            .unwrap();
        let (_running, worker) = start(worker);
        let client = client(&server);
        let mut ids = Vec::new();
        for i in 0..5 {
            let submitted = client.submit_activity(&format!("k{i}"), "generate", &["primary-llm"], &Prompt { text: format!("p{i}") }, options(30)).await.unwrap();
            assert!(!submitted.replayed);
            ids.push(submitted.job.id);
        }
        for (i, id) in ids.iter().enumerate() {
            let job = client.wait(*id, Duration::from_secs(20)).await.unwrap();
            assert_eq!(job.status, JobStatus::Succeeded);
            assert_eq!(job.result, Some(json!({"text": format!("p{i} [{id}:0 #1]")})), "the handler saw the stable key and attempt number");
        }
        assert_eq!(worker.stats().won, 5);
        // The contract derived from the output type was registered with the engine.
        let contract = db.json("SELECT output_schema FROM contracts WHERE activity = 'generate'").await;
        assert_eq!(contract["required"], json!(["text"]));
    }

    async fn a_slow_handler_that_heartbeats_survives_past_the_heartbeat_timeout(db) {
        let server = TestServer::start(db).await;
        async fn slow(_ctx: ActivityContext, prompt: Prompt) -> Result<Reply, ActivityError> {
            tokio::time::sleep(Duration::from_millis(3500)).await;
            Ok(Reply { text: prompt.text })
        }
        let (_running, worker) = start(Worker::builder(&server.api.url, &server.tokens.worker).provider("generate", "primary-llm", slow).build().unwrap());
        let client = client(&server);
        let id = client.submit_activity("k", "generate", &["primary-llm"], &Prompt { text: "slow".into() }, options(1)).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(20)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded);
        let attempts = &job.activities[0].attempts;
        assert_eq!(attempts.len(), 1, "never went unknown, never retried");
        assert!(client.events(id).await.unwrap().iter().all(|e| e.kind != "attempt_heartbeat_lost"));
        assert_eq!(worker.stats().won, 1);
    }

    async fn cancellation_reaches_the_handler(db) {
        let server = TestServer::start(db).await;
        let seen: Arc<Mutex<Vec<Option<StopReason>>>> = Arc::default();
        let record = seen.clone();
        let waits_for_cancel = move |ctx: ActivityContext, _prompt: Prompt| {
            let record = record.clone();
            async move {
                tokio::select! {
                    _ = ctx.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
                record.lock().unwrap().push(ctx.stop_reason());
                Err::<Reply, _>(ActivityError::fatal("stopped on request"))
            }
        };
        let (_running, _worker) = start(Worker::builder(&server.api.url, &server.tokens.worker).provider("generate", "primary-llm", waits_for_cancel).build().unwrap());
        let client = client(&server);
        let id = client.submit_activity("k", "generate", &["primary-llm"], &Prompt { text: "x".into() }, options(1)).await.unwrap().job.id;
        wait_for("the attempt to start", Duration::from_secs(10), || async {
            client.job(id).await.unwrap().activities[0].attempts[0].status == AttemptStatus::Started
        }).await;
        let operator = Client::new(server.api.url.clone(), server.tokens.operator.clone()).unwrap();
        let attempt = client.job(id).await.unwrap().activities[0].attempts[0].id;
        operator.cancel_attempt(attempt, "customer withdrew the request").await.unwrap();
        wait_for("the handler to learn", Duration::from_secs(10), || async { !seen.lock().unwrap().is_empty() }).await;
        assert_eq!(seen.lock().unwrap()[0], Some(StopReason::CancelRequested));
    }

    async fn an_output_violating_its_own_schema_is_rejected_locally_and_by_the_engine(db) {
        let server = TestServer::start(db).await;
        async fn empty(_ctx: ActivityContext, _prompt: Prompt) -> Result<Reply, ActivityError> {
            Ok(Reply { text: String::new() })
        }
        let (_running, worker) = start(Worker::builder(&server.api.url, &server.tokens.worker).provider("generate", "primary-llm", empty).build().unwrap());
        let client = client(&server);
        let id = client.submit_activity("k", "generate", &["primary-llm"], &Prompt { text: "x".into() }, options(30)).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(20)).await.unwrap();
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.activities[0].attempts[0].status, AttemptStatus::Invalid);
        assert_eq!(job.result, None, "never committed");
        let stats = worker.stats();
        assert_eq!((stats.local_contract_violations, stats.contract_violations), (1, 1));
    }

    async fn a_panicking_handler_is_reported_as_a_non_retryable_error(db) {
        let server = TestServer::start(db).await;
        async fn panics(_ctx: ActivityContext, _prompt: Prompt) -> Result<Reply, ActivityError> {
            panic!("provider SDK bug")
        }
        let (_running, worker) = start(Worker::builder(&server.api.url, &server.tokens.worker).provider("generate", "primary-llm", panics).build().unwrap());
        let client = client(&server);
        let id = client.submit_activity("k", "generate", &["primary-llm"], &Prompt { text: "x".into() }, options(30)).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(20)).await.unwrap();
        let attempts = &job.activities[0].attempts;
        assert_eq!(attempts.len(), 1, "not retried: a panic is not retryable");
        let error = attempts[0].error.as_ref().unwrap();
        assert!(error.message.contains("provider SDK bug") && error.retryable == Some(false), "{error:?}");
        assert_eq!(worker.stats().panics, 1);
    }

    async fn a_certified_fallback_takes_over_and_a_failed_certification_blocks_only_failover(db) {
        let server = TestServer::start(db).await;
        async fn down(_ctx: ActivityContext, _p: Prompt) -> Result<Reply, ActivityError> {
            Err(ActivityError::fatal("primary is down"))
        }
        async fn terse(_ctx: ActivityContext, _p: Prompt) -> Result<Reply, ActivityError> {
            Ok(Reply { text: "ok".into() })
        }
        let worker = Worker::builder(&server.api.url, &server.tokens.worker)
            .provider("generate", "primary-llm", down)
            .provider("generate", "fallback-llm", echo)
            .certify_with([Prompt { text: "hello".into() }])
            .validate_with(|r: &Reply| if r.text.contains("hello") { Ok(()) } else { Err("lost the prompt".into()) })
            // A second activity whose fallback fails its business check.
            .provider("summarize", "primary-llm", down)
            .provider("summarize", "cheap-llm", terse)
            .certify_with([Prompt { text: "a long text".into() }])
            .validate_with(|r: &Reply| if r.text.len() > 5 { Ok(()) } else { Err("summary too short".into()) })
            .build()
            .unwrap();
        let reports = worker.certify().await.unwrap();
        let passed: HashMap<_, _> = reports.iter().map(|r| (r.provider.clone(), r.passed)).collect();
        assert_eq!((passed["fallback-llm"], passed["cheap-llm"]), (true, false));
        let (_running, worker) = start(worker);

        let client = client(&server);
        let ok = client.submit_activity("a", "generate", &["primary-llm", "fallback-llm"], &Prompt { text: "hi".into() }, options(30)).await.unwrap().job.id;
        let job = client.wait(ok, Duration::from_secs(20)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded);
        assert_eq!(job.activities[0].attempts[1].provider, "fallback-llm");

        let blocked = client.submit_activity("b", "summarize", &["primary-llm", "cheap-llm"], &Prompt { text: "hi".into() }, options(30)).await.unwrap().job.id;
        let job = client.wait(blocked, Duration::from_secs(20)).await.unwrap();
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.error.unwrap().code, "providers_exhausted");
        assert!(client.events(blocked).await.unwrap().iter().any(|e| e.kind == "failover_skipped"));
        // The worker itself kept serving: a manual attempt at the primary still runs.
        assert!(worker.stats().started >= 3);
    }
    async fn a_handler_past_its_deadline_is_told_its_lease_is_lost_and_its_result_still_counts(db) {
        let server = TestServer::start(db).await;
        let seen: Arc<Mutex<Vec<Option<StopReason>>>> = Arc::default();
        let record = seen.clone();
        let stuck_call = move |ctx: ActivityContext, prompt: Prompt| {
            let record = record.clone();
            async move {
                ctx.heartbeat(json!({"step": "calling the model"})).await.ok();
                ctx.cancelled().await;
                record.lock().unwrap().push(ctx.stop_reason());
                Ok::<_, ActivityError>(Reply { text: format!("late {}", prompt.text) })
            }
        };
        let (_running, worker) = start(Worker::builder(&server.api.url, &server.tokens.worker).provider("generate", "primary-llm", stuck_call).build().unwrap());
        let client = client(&server);
        let options = ActivityOptions { start_to_close_timeout_s: Some(1), heartbeat_timeout_s: Some(1), ..ActivityOptions::default() };
        let id = client.submit_activity("k", "generate", &["primary-llm"], &Prompt { text: "x".into() }, options).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(20)).await.unwrap();
        assert_eq!(seen.lock().unwrap().clone(), vec![Some(StopReason::LeaseLost)]);
        assert_eq!(job.status, JobStatus::Succeeded, "nobody else answered: the late result still won the CAS");
        assert_eq!(job.result, Some(json!({"text": "late x"})));
        assert_eq!(worker.stats().won, 1);
        let details = db.json("SELECT heartbeat_details FROM attempts").await;
        assert_eq!(details, json!({"step": "calling the model"}), "ctx.heartbeat details are kept on the attempt");
    }
}
