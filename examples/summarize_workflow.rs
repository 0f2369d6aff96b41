//! A workflow as ordinary Rust: fetch → generate (with a certified fallback) → sleep →
//! store. Every step is durable: kill the worker or the engine at any point and the job
//! resumes where it was, without re-running finished steps.
//!
//! Run against a server (see `examples/env.rs` for the variables):
//! `cargo run --example summarize_workflow`. Exits non-zero, with the reason,
//! unless the story played out as told.

#[path = "env.rs"]
mod env;

use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use onceflow_worker::api::JobRequestBody;
use onceflow_worker::model::JobStatus;
use onceflow_worker::{
    ActivityContext, ActivityError, Client, Worker, WorkflowContext, WorkflowError,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Request {
    url: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Page {
    url: String,
    body: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Summary {
    #[schemars(length(min = 1))]
    text: String,
    model: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Stored {
    key: String,
    summary: String,
}

/// The workflow: deterministic orchestration only; every side effect is an activity.
async fn summarize(ctx: WorkflowContext, request: Request) -> Result<Stored, WorkflowError> {
    let page: Page = ctx.activity("fetch", &request).await?;
    let summary: Summary = ctx
        .activity("generate", &page)
        .providers(["primary-llm", "fallback-llm"])
        .start_to_close_timeout(Duration::from_secs(60))
        .await?;
    // A durable timer: survives restarts of workers and engines alike.
    ctx.sleep(Duration::from_secs(1)).await?;
    let stored: Stored = ctx.activity("store", &summary).await?;
    Ok(stored)
}

async fn fetch(_ctx: ActivityContext, request: Request) -> Result<Page, ActivityError> {
    Ok(Page {
        body: format!(
            "<h1>{}</h1><p>onceflow keeps one job per intent.</p>",
            request.url
        ),
        url: request.url,
    })
}

async fn primary_llm(_ctx: ActivityContext, _page: Page) -> Result<Summary, ActivityError> {
    Err(ActivityError::fatal("429 quota exhausted for this month"))
}

async fn fallback_llm(_ctx: ActivityContext, page: Page) -> Result<Summary, ActivityError> {
    Ok(Summary {
        text: format!("{} says: one job per intent", page.url),
        model: "fallback".into(),
    })
}

async fn store(ctx: ActivityContext, summary: Summary) -> Result<Stored, ActivityError> {
    // The storage key is the activity's idempotency key: a retried write overwrites itself.
    Ok(Stored {
        key: format!("summaries/{}", ctx.idempotency_key()),
        summary: summary.text,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = env::Env::from_process()?;
    let worker = Arc::new(
        Worker::builder(&env.url, &env.worker_token)
            .worker_id("summarize-example")
            .workflow("summarize", summarize)
            .provider("fetch", "fetch", fetch)
            .provider("generate", "primary-llm", primary_llm)
            .provider("generate", "fallback-llm", fallback_llm)
            .certify_with([Page {
                url: "example.org".into(),
                body: "<p>hello</p>".into(),
            }])
            .provider("store", "store", store)
            .build()?,
    );
    let serving = {
        let w = worker.clone();
        tokio::spawn(async move { w.run().await })
    };

    let client = Client::new(&env.url, &env.client_token)?;
    let body = JobRequestBody {
        workflow: Some("summarize".into()),
        activity: None,
        providers: None,
        input: Some(serde_json::to_value(Request {
            url: "onceflow.dev".into(),
        })?),
        task_queue: None,
        options: None,
    };
    let job_id = client
        .submit(&format!("summarize-{}", env::run_id()), &body)
        .await?
        .job
        .id;
    println!("submitted workflow job {job_id}");
    let job = client.wait(job_id, Duration::from_secs(60)).await?;
    ensure!(
        job.status == JobStatus::Succeeded,
        "the workflow should succeed: {:?} {:?}",
        job.status,
        job.error
    );
    let stored: Stored = serde_json::from_value(job.result.clone().unwrap_or_default())?;
    ensure!(
        stored.summary.contains("one job per intent"),
        "unexpected result {stored:?}"
    );
    let names: Vec<&str> = job.activities.iter().map(|a| a.name.as_str()).collect();
    ensure!(
        names == ["fetch", "generate", "store"],
        "the steps ran in order: {names:?}"
    );
    let generate = &job.activities[1];
    ensure!(
        generate.attempts.len() == 2 && generate.attempts[1].provider == "fallback-llm",
        "the primary failed and the certified fallback took over"
    );
    let events = client.events(job_id).await?;
    ensure!(
        events.iter().any(|e| e.kind == "timer_fired"),
        "the durable timer fired"
    );
    println!(
        "fetch → generate (primary failed, fallback won) → sleep 1s → store: {}\n",
        stored.key
    );
    print!("{}", client.timeline(job_id).await?);
    worker.shutdown_token().cancel();
    serving.await??;
    Ok(())
}
