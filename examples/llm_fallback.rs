//! A primary/fallback pair of model providers, and the seed's story end to end:
//!
//! 1. the primary model call stalls past the activity's start-to-close deadline: its
//!    attempt becomes `unknown` (not failed: the model may still answer);
//! 2. the user's "use fallback" click is refused (`attempt_in_flight`) while it might;
//! 3. an operator confirms with the provider and cancels the stuck attempt; the engine
//!    fails over to the *certified* fallback, which answers and wins;
//! 4. the stalled primary answers late: its result is `lost` (discarded, logged).
//!
//! Run against a server (see `examples/env.rs` for the variables):
//! `cargo run --example llm_fallback`. Exits non-zero, with the reason, unless
//! the story played out as told.

#[path = "env.rs"]
mod env;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure};
use onceflow_worker::model::{AttemptStatus, JobStatus};
use onceflow_worker::{ActivityContext, ActivityError, ActivityOptions, Client, SdkError, Worker};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// What the activity takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Prompt {
    topic: String,
}

/// What every provider of `generate` must return: its JSON Schema is the output contract.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Haiku {
    #[schemars(length(min = 1))]
    text: String,
    model: String,
}

/// The fallback model: answers at once.
async fn fallback(ctx: ActivityContext, prompt: Prompt) -> Result<Haiku, ActivityError> {
    // A real provider passes ctx.idempotency_key() to the model API.
    let _ = ctx.idempotency_key();
    Ok(Haiku {
        text: format!(
            "autumn {} / falls back, then answers / one job, one result",
            prompt.topic
        ),
        model: "fallback".into(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = env::Env::from_process()?;
    let run = env::run_id();

    // The primary model: its call hangs until the example releases it (to show its late
    // answer losing). A real handler would stop on ctx.cancelled(); this one, like a
    // model call already in flight, answers anyway.
    let release_primary = Arc::new(Notify::new());
    let release = release_primary.clone();
    let primary = move |_ctx: ActivityContext, prompt: Prompt| {
        let release = release.clone();
        async move {
            release.notified().await;
            Ok::<_, ActivityError>(Haiku {
                text: format!(
                    "late {} / the primary wakes up / someone else has won",
                    prompt.topic
                ),
                model: "primary".into(),
            })
        }
    };

    let worker = Arc::new(
        Worker::builder(&env.url, &env.worker_token)
            .worker_id("llm-example")
            .provider("generate", "primary-llm", primary)
            .provider("generate", "fallback-llm", fallback)
            // The fallback proves, at start-up, that it satisfies the contract.
            .certify_with([Prompt {
                topic: "certification".into(),
            }])
            .validate_with(|h: &Haiku| {
                if h.text.split('/').count() == 3 {
                    Ok(())
                } else {
                    Err("a haiku has three lines".into())
                }
            })
            .build()?,
    );
    let certified = worker.certify().await?;
    ensure!(
        certified.iter().all(|c| c.passed),
        "the fallback failed its certification: {certified:?}"
    );
    let serving = {
        let w = worker.clone();
        tokio::spawn(async move { w.run().await })
    };

    let client = Client::new(&env.url, &env.client_token)?;
    let operator = Client::new(&env.url, &env.operator_token)?;
    let options = ActivityOptions {
        start_to_close_timeout_s: Some(2),
        heartbeat_timeout_s: Some(1),
        ..ActivityOptions::default()
    };
    let submitted = client
        .submit_activity(
            &format!("haiku-{run}"),
            "generate",
            &["primary-llm", "fallback-llm"],
            &Prompt {
                topic: "leaves".into(),
            },
            options,
        )
        .await?;
    let job_id = submitted.job.id;
    println!("submitted job {job_id}");

    // 1. The primary stalls; past start-to-close its attempt is unknown.
    let primary_attempt = wait_for_attempt(&client, job_id, 0, AttemptStatus::Unknown).await?;
    println!("primary stalled past its deadline → attempt {primary_attempt} unknown (not failed)");

    // 2. The user clicks "use fallback": refused while the primary might still answer.
    match client.create_attempt(job_id, 0, "fallback-llm").await {
        Err(SdkError::Api { code, .. }) if code == "attempt_in_flight" => {
            println!("\"use fallback\" → refused: attempt_in_flight")
        }
        other => bail!("a new attempt while one is unknown must be refused, got {other:?}"),
    }

    // 3. The operator finds the stuck attempt and cancels it with a reason.
    let stuck = operator.stuck_attempts("unknown", 0).await?;
    ensure!(
        stuck.iter().any(|s| s.attempt.id == primary_attempt),
        "the operator must see the stuck attempt"
    );
    operator
        .cancel_attempt(primary_attempt, "provider status page: request dropped")
        .await?;
    println!("operator cancelled it → failover to the certified fallback");
    let job = client.wait(job_id, Duration::from_secs(30)).await?;
    ensure!(
        job.status == JobStatus::Succeeded,
        "the fallback should have completed the job: {:?}",
        job.status
    );
    ensure!(
        job.result.as_ref().and_then(|r| r["model"].as_str()) == Some("fallback"),
        "the fallback's answer should win"
    );
    println!("fallback answered first → won");

    // 4. The primary answers late and loses.
    release_primary.notify_one();
    wait_for_attempt(&client, job_id, 0, AttemptStatus::Lost).await?;
    let job = client.job(job_id).await?;
    ensure!(
        job.result.as_ref().and_then(|r| r["model"].as_str()) == Some("fallback"),
        "a late answer must never replace the winner"
    );
    println!("primary's late answer → lost (discarded, race_lost logged)\n");

    print!("{}", client.timeline(job_id).await?);
    worker.shutdown_token().cancel();
    serving.await??;
    let stats = worker.stats();
    ensure!(stats.won == 1 && stats.lost == 1, "worker saw {stats:?}");
    Ok(())
}

/// Waits until attempt `index` of activity 0 has `status`; returns its id.
async fn wait_for_attempt(
    client: &Client,
    job: uuid::Uuid,
    index: usize,
    status: AttemptStatus,
) -> anyhow::Result<uuid::Uuid> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let view = client.job(job).await?;
        if let Some(a) = view.activities.first().and_then(|a| a.attempts.get(index)) {
            if a.status == status {
                return Ok(a.id);
            }
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "attempt {index} never became {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
