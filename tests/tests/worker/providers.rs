//! Providers end to end: results, heartbeats, cancellation, contracts, certification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onceflow_engine::model::{AttemptStatus, JobStatus};
use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for};
use onceflow_worker::{
    ActivityContext, ActivityError, ActivityOptions, Client, StopReason, Worker,
};
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
    ActivityOptions {
        heartbeat_timeout_s: Some(heartbeat_s),
        ..ActivityOptions::default()
    }
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
    Ok(Reply {
        text: format!(
            "{} [{} #{}]",
            prompt.text,
            ctx.idempotency_key(),
            ctx.attempt()
        ),
    })
}

/// An engine as it was before completions could share requests: it has no
/// `POST /v1/worker/completions` and ignores `completions` on polls. A loopback proxy in
/// front of the real one; it counts the completions requests it refused.
async fn start_old_engine(upstream: String) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use axum::response::IntoResponse;
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = refused.clone();
    let http = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (upstream, counter, http) = (upstream.clone(), counter.clone(), http.clone());
        async move {
            let (parts, body) = request.into_parts();
            let path = parts.uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
            if path == "/v1/worker/completions" {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let body = json!({"error": {"code": "not_found", "message": "no such route", "details": {}}});
                return (axum::http::StatusCode::NOT_FOUND, axum::Json(body)).into_response();
            }
            let mut bytes = axum::body::to_bytes(body, 16 << 20).await.unwrap().to_vec();
            if path == "/v1/worker/poll" {
                let mut poll: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                poll.as_object_mut().unwrap().remove("completions");
                bytes = serde_json::to_vec(&poll).unwrap();
            }
            let mut forwarded = http.request(parts.method, format!("{upstream}{path}")).body(bytes);
            for (name, value) in &parts.headers {
                if name != "host" && name != "content-length" {
                    forwarded = forwarded.header(name, value);
                }
            }
            let answer = forwarded.send().await.unwrap();
            let status = answer.status();
            let content_type = answer.headers().get("content-type").cloned();
            let mut response = (status, answer.bytes().await.unwrap()).into_response();
            if let Some(content_type) = content_type {
                response.headers_mut().insert("content-type", content_type);
            }
            response
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, refused)
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

    async fn a_result_the_engine_cannot_store_ends_its_attempt_instead_of_being_retried_for_ever(db) {
        let server = TestServer::start(db).await;
        // Model output can hold U+0000; PostgreSQL's jsonb cannot.
        async fn nul(_ctx: ActivityContext, prompt: Prompt) -> Result<Reply, ActivityError> {
            Ok(Reply { text: format!("{}\u{0}", prompt.text) })
        }
        let (_running, worker) = start(Worker::builder(&server.api.url, &server.tokens.worker).provider("generate", "primary-llm", nul).build().unwrap());
        let client = client(&server);
        let id = client.submit_activity("k", "generate", &["primary-llm"], &Prompt { text: "hi".into() }, options(30)).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(20)).await.unwrap();
        assert_eq!(job.status, JobStatus::Failed, "the policy moved on and, with no provider left, failed the job");
        let attempt = &job.activities[0].attempts[0];
        assert_eq!(attempt.status, AttemptStatus::Invalid);
        assert_eq!(attempt.error.as_ref().map(|e| e.code.as_str()), Some("invalid_result"));
        wait_for("the worker counted the refusal", Duration::from_secs(10), || async { worker.stats().invalid_results == 1 }).await;
        assert_eq!(worker.stats().won, 0);
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

    async fn many_short_attempts_at_once_are_each_reported_exactly_once(db) {
        let server = TestServer::start(db).await;
        let worker = Worker::builder(&server.api.url, &server.tokens.worker)
            .worker_id("w-many")
            .max_concurrent_attempts(16)
            .provider("generate", "primary-llm", echo)
            .build()
            .unwrap();
        let (_running, worker) = start(worker);
        let client = client(&server);
        let n = 300;
        let submitted = futures::future::join_all((0..n).map(|i| {
            let client = client.clone();
            async move { client.submit_activity(&format!("k{i}"), "generate", &["primary-llm"], &Prompt { text: format!("p{i}") }, options(30)).await.unwrap().job.id }
        }))
        .await;
        for id in &submitted {
            let job = client.wait(*id, Duration::from_secs(60)).await.unwrap();
            assert_eq!(job.status, JobStatus::Succeeded);
            assert_eq!(job.activities[0].attempts.len(), 1, "one attempt per job");
        }
        wait_for("every outcome to reach the worker", Duration::from_secs(20), || async { worker.stats().won == n }).await;
        let stats = worker.stats();
        assert_eq!((stats.won, stats.lost, stats.lease_lost, stats.started), (n, 0, 0, n), "each outcome reported once and won");
    }

    async fn a_worker_reports_every_outcome_to_an_engine_without_shared_completions(db) {
        let server = TestServer::start(db).await;
        let (old_engine, refused) = start_old_engine(server.api.url.clone()).await;
        let worker = Worker::builder(&old_engine, &server.tokens.worker)
            .worker_id("w-old")
            .max_concurrent_attempts(8)
            .provider("generate", "primary-llm", echo)
            .build()
            .unwrap();
        let (_running, worker) = start(worker);
        let client = client(&server);
        let n = 40;
        let submitted = futures::future::join_all((0..n).map(|i| {
            let client = client.clone();
            async move { client.submit_activity(&format!("k{i}"), "generate", &["primary-llm"], &Prompt { text: format!("p{i}") }, options(30)).await.unwrap().job.id }
        }))
        .await;
        for id in &submitted {
            assert_eq!(client.wait(*id, Duration::from_secs(60)).await.unwrap().status, JobStatus::Succeeded);
        }
        wait_for("every outcome to reach the worker", Duration::from_secs(20), || async { worker.stats().won == n }).await;
        assert_eq!(worker.stats().lost, 0);
        let refused = refused.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..=2).contains(&refused), "the worker tried shared completions, then stopped asking after the refusal ({refused} refused)");
    }
}
