//! Worker processes: concurrency, shutdown, crashes and reconnects.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::http::ServerConfig;
use onceflow_engine::model::{AttemptStatus, JobStatus};
use onceflow_tests::server::{TestServer, Tokens};
use onceflow_tests::{rules, wait_for};
use onceflow_worker::{ActivityContext, ActivityError, ActivityOptions, Client, Worker};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Work {
    n: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Done {
    n: u32,
}

fn options(heartbeat_s: u64) -> ActivityOptions {
    ActivityOptions {
        heartbeat_timeout_s: Some(heartbeat_s),
        ..ActivityOptions::default()
    }
}

rules! {
    async fn two_workers_on_one_queue_never_run_the_same_attempt(db) {
        let server = TestServer::start(db).await;
        let runs: Arc<Mutex<Vec<uuid::Uuid>>> = Arc::default();
        let make = |name: &str| {
            let runs = runs.clone();
            Worker::builder(&server.api.url, &server.tokens.worker)
                .worker_id(name)
                .max_concurrent_attempts(4)
                .provider("work", "cpu", move |ctx: ActivityContext, w: Work| {
                    let runs = runs.clone();
                    async move {
                        runs.lock().unwrap().push(ctx.attempt_id());
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok::<_, ActivityError>(Done { n: w.n })
                    }
                })
                .build()
                .unwrap()
        };
        let (a, b) = (Arc::new(make("a")), Arc::new(make("b")));
        for w in [&a, &b] {
            let w = w.clone();
            tokio::spawn(async move { w.run().await });
        }
        let client = Client::new(server.api.url.clone(), server.tokens.client.clone()).unwrap();
        let ids = join_all((0..30).map(|n| {
            let client = client.clone();
            async move { client.submit_activity(&format!("k{n}"), "work", &["cpu"], &Work { n }, options(30)).await.unwrap().job.id }
        })).await;
        for id in &ids {
            assert_eq!(client.wait(*id, Duration::from_secs(30)).await.unwrap().status, JobStatus::Succeeded);
        }
        a.shutdown_token().cancel();
        b.shutdown_token().cancel();
        let runs = runs.lock().unwrap().clone();
        let unique: HashSet<_> = runs.iter().collect();
        assert_eq!((runs.len(), unique.len()), (30, 30), "each attempt ran once, on one worker");
        assert!(a.stats().won > 0 && b.stats().won > 0, "both workers took work: {:?} {:?}", a.stats(), b.stats());
        assert_eq!(a.stats().won + b.stats().won, 30);
    }

    async fn graceful_shutdown_lets_running_attempts_finish(db) {
        let server = TestServer::start(db).await;
        let worker = Arc::new(Worker::builder(&server.api.url, &server.tokens.worker)
            .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move {
                tokio::time::sleep(Duration::from_millis(800)).await;
                Ok::<_, ActivityError>(Done { n: w.n })
            })
            .build()
            .unwrap());
        let running = { let w = worker.clone(); tokio::spawn(async move { w.run().await }) };
        let client = Client::new(server.api.url.clone(), server.tokens.client.clone()).unwrap();
        let id = client.submit_activity("k", "work", &["cpu"], &Work { n: 1 }, options(30)).await.unwrap().job.id;
        wait_for("the attempt to start", Duration::from_secs(10), || async { worker.stats().started == 1 }).await;
        worker.shutdown_token().cancel();
        running.await.unwrap().unwrap();
        let job = client.job(id).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "finished within the grace period before the worker exited");
    }

    async fn past_the_grace_period_attempts_are_abandoned_and_become_unknown(db) {
        let server = TestServer::start(db).await;
        let worker = Arc::new(Worker::builder(&server.api.url, &server.tokens.worker)
            .shutdown_grace(Duration::from_millis(200))
            .provider("work", "cpu", |_ctx: ActivityContext, _w: Work| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, ActivityError>(Done { n: 0 })
            })
            .build()
            .unwrap());
        let running = { let w = worker.clone(); tokio::spawn(async move { w.run().await }) };
        let client = Client::new(server.api.url.clone(), server.tokens.client.clone()).unwrap();
        let id = client.submit_activity("k", "work", &["cpu"], &Work { n: 1 }, options(1)).await.unwrap().job.id;
        wait_for("the attempt to start", Duration::from_secs(10), || async { worker.stats().started == 1 }).await;
        worker.shutdown_token().cancel();
        running.await.unwrap().unwrap();
        wait_for("the abandoned attempt to become unknown", Duration::from_secs(10), || async {
            client.job(id).await.unwrap().activities[0].attempts[0].status == AttemptStatus::Unknown
        }).await;
        assert_eq!(client.job(id).await.unwrap().activities[0].attempts.len(), 1, "not re-run automatically");
    }

    async fn a_worker_started_before_the_engine_connects_when_it_comes_up(db) {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let engine = db.engine();
        let tokens = Tokens::mint(&engine).await;
        let url = format!("http://127.0.0.1:{port}");
        let worker = Arc::new(Worker::builder(&url, &tokens.worker)
            .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move { Ok::<_, ActivityError>(Done { n: w.n * 2 }) })
            .build()
            .unwrap());
        { let w = worker.clone(); tokio::spawn(async move { w.run().await }); }
        tokio::time::sleep(Duration::from_millis(400)).await;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("the port is still free");
        let shutdown = tokio_util::sync::CancellationToken::new();
        tokio::spawn(onceflow_engine::http::serve_on(listener, engine, ServerConfig::default(), shutdown.clone()));
        let client = Client::new(url, tokens.client.clone()).unwrap();
        let id = client.submit_activity("k", "work", &["cpu"], &Work { n: 21 }, options(30)).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.result, Some(serde_json::json!({"n": 42})));
        worker.shutdown_token().cancel();
        shutdown.cancel();
    }

    async fn a_worker_process_killed_mid_attempt_leaves_it_unknown_not_rerun(db) {
        let server = TestServer::start(db).await;
        let client = Client::new(server.api.url.clone(), server.tokens.client.clone()).unwrap();
        let id = client.submit_activity("k", "work", &["cpu"], &Work { n: 1 }, options(1)).await.unwrap().job.id;
        // A real worker process: this test binary re-run as the child below.
        let mut child = onceflow_tests::server::spawn_child_test("worker::lifecycle::child_worker_process", &server.api.url, &server.tokens.worker);
        wait_for("the child worker to start the attempt", Duration::from_secs(30), || async {
            client.job(id).await.unwrap().activities[0].attempts[0].status == AttemptStatus::Started
        }).await;
        // SAFETY: kill(2) on the child we spawned.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
        child.wait().unwrap();
        wait_for("the attempt to become unknown", Duration::from_secs(10), || async {
            client.job(id).await.unwrap().activities[0].attempts[0].status == AttemptStatus::Unknown
        }).await;
        // Several more reaper passes later, nothing was re-run.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let job = client.job(id).await.unwrap();
        assert_eq!(job.activities[0].attempts.len(), 1);
        assert_eq!(job.status, JobStatus::Running);
    }
}

/// The worker process that `a_worker_process_killed_mid_attempt_leaves_it_unknown_not_rerun`
/// kills: a test of its own (no database: it is killed, so nothing it made is dropped).
#[tokio::test]
#[ignore = "run as a child process by a_worker_process_killed_mid_attempt_leaves_it_unknown_not_rerun"]
async fn child_worker_process() {
    onceflow_tests::time_limit(async {
        let (Ok(url), Ok(token)) = (
            std::env::var("ONCEFLOW_CHILD_URL"),
            std::env::var("ONCEFLOW_CHILD_TOKEN"),
        ) else {
            return;
        };
        let worker = Worker::builder(url, token)
            .provider(
                "work",
                "cpu",
                |_ctx: ActivityContext, _w: Work| async move {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok::<_, ActivityError>(Done { n: 0 })
                },
            )
            .build()
            .unwrap();
        worker.run().await.unwrap();
    })
    .await;
}
