//! The seed's story on the engine library, end to end, against PostgreSQL:
//!
//! 1. a user double-clicks "generate": two concurrent submissions, one job;
//! 2. the primary provider stalls past its heartbeat timeout: its attempt is `unknown`,
//!    not failed, and a retry is refused while it might still be working;
//! 3. an operator cancels it out-of-band; the engine fails over to the certified fallback;
//! 4. the fallback returns first and wins; the primary's late answer loses by CAS.
//!
//! Run: `ONCEFLOW_DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch cargo run --example double_click`
//! (the database must exist; the example applies migrations). Exits non-zero, with the
//! reason, if the story does not play out as told.

use std::time::Duration;

use anyhow::{bail, ensure, Context};
use onceflow_engine::model::{ActivityOptions, CompletionOutcome, Scope};
use onceflow_engine::{ClaimRequest, Completion, CompletionBody, Engine, EngineError, JobRequest};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("ONCEFLOW_DATABASE_URL")
        .context("set ONCEFLOW_DATABASE_URL to a database (postgres://… or sqlite://PATH)")?;
    let engine = Engine::connect(&url, 8).await?;
    engine.migrate().await?;
    let owner = "example-user";
    let key = format!("generate-{}", uuid_like());

    // The fallback is certified for the activity's output contract, so failover may use it.
    let schema =
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}});
    let hash = engine.register_contract(owner, "generate", &schema).await?;
    engine
        .record_certification(
            owner,
            "generate",
            "fallback-llm",
            &hash,
            true,
            json!({"cases": 1}),
        )
        .await?;

    // 1. Double-click: two concurrent submissions with one idempotency key.
    let options = ActivityOptions {
        heartbeat_timeout_s: Some(1),
        ..ActivityOptions::default()
    };
    let request = JobRequest::activity(
        "generate",
        &["primary-llm", "fallback-llm"],
        json!({"prompt": "a haiku"}),
    )
    .with_options(options);
    let (first, second) = tokio::join!(
        engine.submit(owner, &key, &request),
        engine.submit(owner, &key, &request)
    );
    let (first, second) = (first?, second?);
    ensure!(
        first.job.id == second.job.id,
        "a double-click made two jobs"
    );
    ensure!(
        first.replayed != second.replayed,
        "exactly one click must create the job"
    );
    let job_id = first.job.id;
    println!("double-click → one job {job_id}");

    // 2. The primary takes the attempt and stalls: no heartbeat.
    let primary = claim(&engine, "primary-llm").await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        engine.reap().await?;
        let job = engine.job(&Scope::AllOwners, job_id).await?;
        if job.activities[0].attempts[0].status.as_str() == "unknown" {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the stalled attempt never became unknown"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("primary stalled → attempt unknown (not failed)");
    match engine
        .create_attempt(&Scope::Owner(owner.into()), job_id, 0, "fallback-llm")
        .await
    {
        Err(EngineError::AttemptInFlight { .. }) => {
            println!("user clicks \"use fallback\" → refused: attempt_in_flight")
        }
        other => bail!("a retry while unknown must be refused, got {other:?}"),
    }

    // 3. An operator confirms with the provider and cancels the stuck attempt.
    engine
        .cancel_attempt("ops", primary.attempt_id, "provider confirmed no request")
        .await?;
    let fallback = claim(&engine, "fallback-llm").await?;
    println!(
        "operator cancels → failover to fallback-llm (attempt {})",
        fallback.attempt_number
    );

    // 4. Reverse-order finish: the fallback answers first, the primary later.
    let won = complete(&engine, &fallback, "from the fallback").await?;
    let lost = complete(&engine, &primary, "from the primary, late").await?;
    ensure!(
        won == CompletionOutcome::Won,
        "the first result back must win"
    );
    ensure!(lost == CompletionOutcome::Lost, "the late result must lose");
    let job = engine.job(&Scope::AllOwners, job_id).await?;
    ensure!(
        job.result == Some(json!({"text": "from the fallback"})),
        "the job must hold the winner's result"
    );
    println!("fallback returns first → won; primary's late answer → lost (discarded)\n");

    println!("timeline of job {job_id}:");
    for event in engine.job_events(&Scope::AllOwners, job_id).await? {
        println!(
            "  {:>2} {:<24} {:<22} {}",
            event.seq, event.kind, event.actor, event.data
        );
    }
    Ok(())
}

async fn claim(
    engine: &Engine,
    provider: &str,
) -> anyhow::Result<onceflow_engine::model::ActivityTask> {
    let request = ClaimRequest {
        worker_id: format!("{provider}-worker"),
        task_queue: "default".into(),
        providers: vec![("generate".into(), provider.into())],
        max_tasks: 1,
    };
    let mut tasks = engine.claim(&Scope::AllOwners, &request).await?;
    tasks
        .pop()
        .with_context(|| format!("no task for {provider}"))
}

async fn complete(
    engine: &Engine,
    task: &onceflow_engine::model::ActivityTask,
    text: &str,
) -> anyhow::Result<CompletionOutcome> {
    let completion = Completion {
        lease_token: task.lease_token,
        body: CompletionBody::Result(json!({ "text": text })),
    };
    Ok(engine
        .complete(&Scope::AllOwners, task.attempt_id, &completion)
        .await?)
}

fn uuid_like() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}
