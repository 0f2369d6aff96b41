//! Workflows written with the SDK, run by real workers against a real engine.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::model::{AttemptStatus, JobStatus, Role};
use onceflow_tests::server::{ServerProcess, TestServer};
use onceflow_tests::{rules, wait_for};
use onceflow_worker::api::JobRequestBody;
use onceflow_worker::{
    ActivityContext, ActivityError, Client, Worker, WorkflowContext, WorkflowError,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Text {
    text: String,
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

/// fetch → generate → store.
async fn pipeline(ctx: WorkflowContext, input: Text) -> Result<Text, WorkflowError> {
    let page: Text = ctx.activity("fetch", &input).await?;
    let summary: Text = ctx
        .activity("generate", &page)
        .providers(["primary-llm"])
        .await?;
    let stored: Text = ctx.activity("store", &summary).await?;
    Ok(stored)
}

/// Providers that count their calls.
#[derive(Default)]
struct Calls {
    fetch: AtomicU32,
    generate: AtomicU32,
    store: AtomicU32,
}

fn with_providers(
    builder: onceflow_worker::WorkerBuilder,
    calls: Arc<Calls>,
) -> onceflow_worker::WorkerBuilder {
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls);
    builder
        .provider("fetch", "fetch", move |_ctx: ActivityContext, t: Text| {
            let c = c1.clone();
            async move {
                c.fetch.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ActivityError>(Text {
                    text: format!("page of {}", t.text),
                })
            }
        })
        .provider(
            "generate",
            "primary-llm",
            move |_ctx: ActivityContext, t: Text| {
                let c = c2.clone();
                async move {
                    c.generate.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ActivityError>(Text {
                        text: format!("summary of {}", t.text),
                    })
                }
            },
        )
        .provider("store", "store", move |_ctx: ActivityContext, t: Text| {
            let c = c3.clone();
            async move {
                c.store.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ActivityError>(Text {
                    text: format!("stored {}", t.text),
                })
            }
        })
}

fn spawn_worker(worker: Worker) -> Arc<Worker> {
    let worker = Arc::new(worker);
    let w = worker.clone();
    tokio::spawn(async move { w.run().await });
    worker
}

rules! {
    async fn a_three_step_workflow_runs_to_completion(db) {
        let server = TestServer::start(db).await;
        let calls = Arc::new(Calls::default());
        let worker = spawn_worker(with_providers(Worker::builder(&server.api.url, &server.tokens.worker).workflow("pipeline", pipeline), calls.clone()).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("pipeline", json!({"text": "rust.org"}))).await.unwrap().job.id;
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"text": "stored summary of page of rust.org"})));
        let seqs: Vec<_> = job.activities.iter().map(|a| (a.seq, a.name.as_str())).collect();
        assert_eq!(seqs, vec![(0, "fetch"), (1, "generate"), (2, "store")]);
        assert_eq!((calls.fetch.load(Ordering::SeqCst), calls.generate.load(Ordering::SeqCst), calls.store.load(Ordering::SeqCst)), (1, 1, 1));
        worker.shutdown_token().cancel();
    }

    async fn a_worker_killed_between_steps_is_replaced_without_rerunning_completed_activities(db) {
        // A workflow task the killed worker may hold comes back after its lease: 2 s here
        // (30 s by default), so the replacement's wait stays short on a loaded machine.
        let engine = db.engine().with_workflow_task_lease(Duration::from_secs(2));
        let tokens = onceflow_tests::server::Tokens::mint(&engine).await;
        let config = onceflow_engine::http::ServerConfig { reaper_interval: Duration::from_millis(100), ..Default::default() };
        let server = TestServer::start_engine(engine, tokens, config).await;
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("pipeline", json!({"text": "x"}))).await.unwrap().job.id;
        // A worker process that runs the workflow and `fetch` only: the job stops after step 1.
        let mut child = onceflow_tests::server::spawn_child_test("workflow::sdk::child_pipeline_worker", &server.api.url, &server.tokens.worker);
        wait_for("step 1 done and step 2 scheduled", Duration::from_secs(60), || async {
            let job = client.job(id).await.unwrap();
            job.activities.len() == 2 && job.activities[0].status.as_str() == "succeeded"
        }).await;
        // SAFETY: kill(2) on the child we spawned.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
        child.wait().unwrap();

        let calls = Arc::new(Calls::default());
        let worker = spawn_worker(with_providers(Worker::builder(&server.api.url, &server.tokens.worker).workflow("pipeline", pipeline), calls.clone()).build().unwrap());
        let job = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(calls.fetch.load(Ordering::SeqCst), 0, "the completed step was not re-run");
        assert_eq!((calls.generate.load(Ordering::SeqCst), calls.store.load(Ordering::SeqCst)), (1, 1));
        assert_eq!(job.activities[0].attempts.len(), 1, "fetch ran once in all");
        worker.shutdown_token().cancel();
    }

    async fn a_timer_survives_an_engine_restart_and_fires_once(db) {
        let engine = db.engine();
        let client_token = engine.create_token("alice", Role::Client).await.unwrap().token;
        let worker_token = engine.create_token("*", Role::Worker).await.unwrap().token;
        let mut server = ServerProcess::start(&db.url(), &[]).await;
        let port = server.port();
        async fn napper(ctx: WorkflowContext, _input: serde_json::Value) -> Result<i64, WorkflowError> {
            let before = ctx.now();
            ctx.sleep(Duration::from_secs(2)).await?;
            Ok((ctx.now() - before).num_milliseconds())
        }
        let worker = spawn_worker(Worker::builder(&server.api.url, &worker_token).workflow("napper", napper).build().unwrap());
        let client = Client::new(&server.api.url, &client_token).unwrap();
        let id = client.submit("k", &workflow_job("napper", json!({}))).await.unwrap().job.id;
        wait_for("the timer to start", Duration::from_secs(20), || async {
            client.events(id).await.unwrap().iter().any(|e| e.kind == "timer_started")
        }).await;
        server.signal(libc::SIGKILL);
        server.wait();
        let _server = ServerProcess::start_at(&db.url(), port, &[]).await;
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        let slept_ms = job.result.as_ref().and_then(|r| r.as_i64()).unwrap();
        assert!(slept_ms >= 2000, "ctx.now() moved to when the timer fired: {slept_ms} ms");
        let fired = client.events(id).await.unwrap().iter().filter(|e| e.kind == "timer_fired").count();
        assert_eq!(fired, 1);
        worker.shutdown_token().cancel();
    }

    async fn a_nondeterministic_workflow_is_detected_and_parked(db) {
        let server = TestServer::start(db).await;
        static REPLAYS: AtomicU32 = AtomicU32::new(0);
        async fn flaky(ctx: WorkflowContext, _input: serde_json::Value) -> Result<Text, WorkflowError> {
            // Wrong on purpose: the input depends on how often the workflow was replayed.
            let n = REPLAYS.fetch_add(1, Ordering::SeqCst);
            let first: Text = ctx.activity("fetch", json!({"text": format!("try {n}")})).await?;
            Ok(first)
        }
        let calls = Arc::new(Calls::default());
        // Every task a replay (no kept runs): a kept run never runs its code twice, so the
        // check that matters is the one a replay makes (a restarted or another worker).
        let worker = spawn_worker(with_providers(Worker::builder(&server.api.url, &server.tokens.worker).max_cached_workflows(0).workflow("flaky", flaky), calls).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("flaky", json!({}))).await.unwrap().job.id;
        wait_for("the job to be parked", Duration::from_secs(30), || async {
            client.job(id).await.unwrap().error.is_some()
        }).await;
        let job = client.job(id).await.unwrap();
        assert_eq!(job.error.as_ref().unwrap().code, "nondeterminism");
        assert!(job.error.as_ref().unwrap().message.contains("position 0"), "{:?}", job.error);
        assert_eq!(job.status, JobStatus::Running, "parked visibly; never silently re-planned");
        assert_eq!(job.activities.len(), 1, "no new activity was planned");
        assert!(client.events(id).await.unwrap().iter().any(|e| e.kind == "workflow_task_failed"));
        worker.shutdown_token().cancel();
    }

    async fn an_unknown_workflow_activity_blocks_the_workflow_until_an_operator_cancels_it(db) {
        let server = TestServer::start(db).await;
        async fn writer(ctx: WorkflowContext, input: Text) -> Result<Text, WorkflowError> {
            let draft: Text = ctx
                .activity("generate", &input)
                .providers(["primary-llm", "fallback-llm"])
                .start_to_close_timeout(Duration::from_secs(1))
                .await?;
            Ok(Text { text: format!("final: {}", draft.text) })
        }
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("writer", writer)
                .provider("generate", "primary-llm", |_ctx: ActivityContext, _t: Text| async move {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok::<_, ActivityError>(Text { text: "never".into() })
                })
                .provider("generate", "fallback-llm", |_ctx: ActivityContext, t: Text| async move { Ok::<_, ActivityError>(Text { text: format!("fallback on {}", t.text) }) })
                .certify_with([Text { text: "sample".into() }])
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let operator = Client::new(&server.api.url, &server.tokens.operator).unwrap();
        let id = client.submit("k", &workflow_job("writer", json!({"text": "essay"}))).await.unwrap().job.id;
        wait_for("the primary's attempt to go unknown", Duration::from_secs(30), || async {
            let job = client.job(id).await.unwrap();
            job.activities.first().and_then(|a| a.attempts.first()).map(|a| a.status) == Some(AttemptStatus::Unknown)
        }).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let blocked = client.job(id).await.unwrap();
        assert_eq!(blocked.status, JobStatus::Running);
        assert_eq!(blocked.activities[0].status.as_str(), "blocked", "the workflow waits; nothing is retried");
        assert_eq!(blocked.activities[0].attempts.len(), 1);
        operator.cancel_attempt(blocked.activities[0].attempts[0].id, "primary confirmed dead").await.unwrap();
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!({"text": "final: fallback on essay"})));
        worker.shutdown_token().cancel();
    }

    async fn join_schedules_two_activities_in_one_workflow_task(db) {
        let server = TestServer::start(db).await;
        async fn both(ctx: WorkflowContext, _input: serde_json::Value) -> Result<String, WorkflowError> {
            let (a, b) = tokio::join!(
                ctx.activity::<Text>("fetch", json!({"text": "a"})),
                ctx.activity::<Text>("store", json!({"text": "b"})),
            );
            Ok(format!("{} + {}", a?.text, b?.text))
        }
        // First only the workflow runs, so the scheduled activities wait for us to look.
        let planner = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("both", both).build().unwrap());
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("both", json!({}))).await.unwrap().job.id;
        wait_for("the first workflow task", Duration::from_secs(20), || async { client.job(id).await.unwrap().activities.len() == 2 }).await;
        let events = client.events(id).await.unwrap();
        let first_task = events.iter().find(|e| e.kind == "workflow_task_completed").unwrap();
        assert_eq!(first_task.data["commands"], json!(2), "both activities scheduled by one workflow task");
        let job = client.job(id).await.unwrap();
        assert!(job.activities.iter().all(|a| a.attempts[0].status == AttemptStatus::Scheduled), "both at once, neither waiting for the other");
        let calls = Arc::new(Calls::default());
        let runner = spawn_worker(with_providers(Worker::builder(&server.api.url, &server.tokens.worker), calls).build().unwrap());
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.result, Some(json!("page of a + stored b")));
        planner.shutdown_token().cancel();
        runner.shutdown_token().cancel();
    }

    async fn workflow_errors_fail_the_job_and_exhausted_providers_can_be_handled(db) {
        let server = TestServer::start(db).await;
        async fn resilient(ctx: WorkflowContext, _input: serde_json::Value) -> Result<String, WorkflowError> {
            match ctx.activity::<Text>("generate", json!({"text": "x"})).providers(["broken"]).await {
                Ok(t) => Ok(t.text),
                Err(failed) if failed.code == "providers_exhausted" => Ok("used the cached answer".into()),
                Err(other) => Err(other.into()),
            }
        }
        async fn strict(_ctx: WorkflowContext, _input: serde_json::Value) -> Result<String, WorkflowError> {
            Err(WorkflowError::with_code("quota_exceeded", "this customer is over quota"))
        }
        let worker = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .workflow("resilient", resilient)
                .workflow("strict", strict)
                .provider("generate", "broken", |_ctx: ActivityContext, _t: Text| async move { Err::<Text, _>(ActivityError::fatal("400 bad request")) })
                .build()
                .unwrap(),
        );
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let handled = client.submit("a", &workflow_job("resilient", json!({}))).await.unwrap().job.id;
        let failed = client.submit("b", &workflow_job("strict", json!({}))).await.unwrap().job.id;
        let handled = client.wait(handled, Duration::from_secs(30)).await.unwrap();
        assert_eq!((handled.status, handled.result.clone()), (JobStatus::Succeeded, Some(json!("used the cached answer"))));
        let failed = client.wait(failed, Duration::from_secs(30)).await.unwrap();
        assert_eq!(failed.status, JobStatus::Failed);
        assert_eq!(failed.error.as_ref().map(|e| e.code.as_str()), Some("quota_exceeded"));
        worker.shutdown_token().cancel();
    }

    async fn a_race_between_an_activity_and_a_timer_takes_the_same_branch_on_every_replay(db) {
        race_where_the_listed_first_arrives_second(db, "timer").await;
    }

    async fn a_race_between_two_activities_takes_the_same_branch_on_every_replay(db) {
        race_where_the_listed_first_arrives_second(db, "activities").await;
    }

    async fn outcomes_that_arrived_before_one_replay_are_delivered_in_the_order_they_arrived(db) {
        let server = TestServer::start(db).await;
        // First only the workflow runs: it schedules fetch and store, then stops.
        let planner = Arc::new(Worker::builder(&server.api.url, &server.tokens.worker).workflow("racer", racer).build().unwrap());
        let p = planner.clone();
        let planning = tokio::spawn(async move { p.run().await });
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("k", &workflow_job("racer", json!({ "against": "store" }))).await.unwrap().job.id;
        wait_for("fetch and store to be scheduled", Duration::from_secs(30), || async { client.job(id).await.unwrap().activities.len() == 2 }).await;
        planner.shutdown_token().cancel();
        let _ = planning.await;
        // Then both outcomes arrive with no workflow running: store first, fetch second.
        let fetch_gate = Arc::new(tokio::sync::Semaphore::new(0));
        let fg = fetch_gate.clone();
        let runner = spawn_worker(
            Worker::builder(&server.api.url, &server.tokens.worker)
                .provider("fetch", "fetch", move |_ctx: ActivityContext, t: Text| {
                    let gate = fg.clone();
                    async move {
                        let _ = gate.acquire().await;
                        Ok::<_, ActivityError>(t)
                    }
                })
                .provider("store", "store", |_ctx: ActivityContext, t: Text| async move { Ok::<_, ActivityError>(t) })
                .provider("generate", "primary-llm", |_ctx: ActivityContext, t: Text| async move {
                    Ok::<_, ActivityError>(Text { text: format!("after {}", t.text) })
                })
                .build()
                .unwrap(),
        );
        let finished = |name: &'static str| {
            let client = &client;
            async move { client.job(id).await.unwrap().activities.iter().any(|a| a.name == name && a.status.as_str() == "succeeded") }
        };
        wait_for("store to succeed", Duration::from_secs(30), || finished("store")).await;
        fetch_gate.add_permits(1);
        wait_for("fetch to succeed", Duration::from_secs(30), || finished("fetch")).await;
        // One replay now sees both outcomes; fetch is listed first (`biased`), store arrived first.
        let replayer = spawn_worker(Worker::builder(&server.api.url, &server.tokens.worker).workflow("racer", racer).build().unwrap());
        let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.result, Some(json!("after store")));
        runner.shutdown_token().cancel();
        replayer.shutdown_token().cancel();
    }
}

/// The worker process that `a_worker_killed_between_steps_is_replaced_without_rerunning_completed_activities`
/// kills: a test of its own (no database: it is killed, so nothing it made is dropped).
#[tokio::test]
#[ignore = "run as a child process by a_worker_killed_between_steps_is_replaced_without_rerunning_completed_activities"]
async fn child_pipeline_worker() {
    onceflow_tests::time_limit(async {
        let (Ok(url), Ok(token)) = (
            std::env::var("ONCEFLOW_CHILD_URL"),
            std::env::var("ONCEFLOW_CHILD_TOKEN"),
        ) else {
            return;
        };
        let worker = Worker::builder(url, token)
            .workflow("pipeline", pipeline)
            .provider(
                "fetch",
                "fetch",
                |_ctx: ActivityContext, t: Text| async move {
                    Ok::<_, ActivityError>(Text {
                        text: format!("page of {}", t.text),
                    })
                },
            )
            .build()
            .unwrap();
        worker.run().await.unwrap();
    })
    .await;
}

/// Races `fetch` (listed first, `biased`) against a timer or against `store`, then asks
/// for `generate` with the winner's name: a replay that took the other branch would ask
/// for a different input at position 2 and park the job as nondeterministic.
async fn racer(ctx: WorkflowContext, input: serde_json::Value) -> Result<String, WorkflowError> {
    let slow = ctx
        .activity::<Text>("fetch", json!({"text": "slow"}))
        .into_future();
    let won = if input["against"] == "timer" {
        let timer = ctx.sleep(Duration::from_millis(100));
        tokio::select! {
            biased;
            _ = slow => "fetch",
            _ = timer => "timer",
        }
    } else {
        let quick = ctx
            .activity::<Text>("store", json!({"text": "quick"}))
            .into_future();
        tokio::select! {
            biased;
            _ = slow => "fetch",
            _ = quick => "store",
        }
    };
    let next: Text = ctx
        .activity("generate", json!({ "text": won }))
        .providers(["primary-llm"])
        .await?;
    Ok(next.text)
}

/// Runs `racer` where the outcome listed first (`fetch`) arrives second: `fetch` finishes
/// only after the other branch won and the workflow moved on, and `generate` only after
/// a replay has seen both outcomes; the job must finish on the branch that won first.
async fn race_where_the_listed_first_arrives_second(db: &onceflow_tests::TestDb, against: &str) {
    let server = TestServer::start(db).await;
    let slow_gate = Arc::new(tokio::sync::Semaphore::new(0));
    let next_gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (sg, ng) = (slow_gate.clone(), next_gate.clone());
    let worker = spawn_worker(
        Worker::builder(&server.api.url, &server.tokens.worker)
            .workflow("racer", racer)
            .provider("fetch", "fetch", move |_ctx: ActivityContext, t: Text| {
                let gate = sg.clone();
                async move {
                    let _ = gate.acquire().await;
                    Ok::<_, ActivityError>(t)
                }
            })
            .provider(
                "store",
                "store",
                |_ctx: ActivityContext, t: Text| async move { Ok::<_, ActivityError>(t) },
            )
            .provider(
                "generate",
                "primary-llm",
                move |_ctx: ActivityContext, t: Text| {
                    let gate = ng.clone();
                    async move {
                        let _ = gate.acquire().await;
                        Ok::<_, ActivityError>(Text {
                            text: format!("after {}", t.text),
                        })
                    }
                },
            )
            .build()
            .unwrap(),
    );
    let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
    let id = client
        .submit("k", &workflow_job("racer", json!({ "against": against })))
        .await
        .unwrap()
        .job
        .id;
    let before_fetch = 2 + i32::from(against != "timer");
    wait_for(
        "the other branch to win and the workflow to move on",
        Duration::from_secs(30),
        || async {
            client
                .job(id)
                .await
                .unwrap()
                .activities
                .iter()
                .any(|a| a.name == "generate")
        },
    )
    .await;
    let tasks = |events: &[onceflow_worker::model::JobEvent]| {
        events
            .iter()
            .filter(|e| e.kind == "workflow_task_completed" || e.kind == "workflow_task_failed")
            .count()
    };
    let seen = tasks(&client.events(id).await.unwrap());
    // Now the first-listed outcome arrives, second.
    slow_gate.add_permits(1);
    wait_for(
        "a replay with both outcomes in the journal",
        Duration::from_secs(30),
        || async { tasks(&client.events(id).await.unwrap()) > seen },
    )
    .await;
    let job = client.job(id).await.unwrap();
    assert_eq!(
        job.activities.len() as i32,
        before_fetch,
        "{:?}",
        job.activities
    );
    assert_eq!(
        job.error, None,
        "the replay took the branch of the outcome that arrived first"
    );
    next_gate.add_permits(1);
    let job = client.wait(id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
    let first = if against == "timer" { "timer" } else { "store" };
    assert_eq!(job.result, Some(json!(format!("after {first}"))));
    worker.shutdown_token().cancel();
}
