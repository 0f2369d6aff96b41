//! An idempotent charge: a double-click and a retried request produce one job, and a
//! retry after a lost response produces one charge, because the payment provider receives
//! the same idempotency key on every attempt.
//!
//! 1. the user double-clicks "pay": two concurrent submissions, one job;
//! 2. the client times out and resubmits: the same job, replayed;
//! 3. attempt 1 charges the card, but the bank's response is lost: a retryable error;
//! 4. attempt 2 calls the bank with the same idempotency key: the bank returns the charge
//!    it already made; the job succeeds with it. One charge in all.
//!
//! Run against a server (see `examples/env.rs` for the variables):
//! `cargo run --example payments`. Exits non-zero, with the reason, unless the
//! story played out as told.

#[path = "env.rs"]
mod env;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::ensure;
use onceflow_worker::model::JobStatus;
use onceflow_worker::{
    ActivityContext, ActivityError, ActivityOptions, Client, RetryPolicy, Worker,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChargeRequest {
    customer: String,
    amount_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
struct Receipt {
    charge_id: String,
    amount_cents: u64,
}

/// A stand-in for a payment API that deduplicates by idempotency key, as real ones do.
#[derive(Default)]
struct Bank {
    charges: Mutex<HashMap<String, Receipt>>,
    calls: Mutex<Vec<String>>,
}

impl Bank {
    fn charge(&self, idempotency_key: &str, request: &ChargeRequest) -> Receipt {
        self.calls
            .lock()
            .expect("bank lock")
            .push(idempotency_key.to_owned());
        let mut charges = self.charges.lock().expect("bank lock");
        let next = charges.len() + 1;
        charges
            .entry(idempotency_key.to_owned())
            .or_insert_with(|| Receipt {
                charge_id: format!("ch_{next}"),
                amount_cents: request.amount_cents,
            })
            .clone()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = env::Env::from_process()?;
    let run = env::run_id();
    let bank = Arc::new(Bank::default());

    let teller = bank.clone();
    let charge = move |ctx: ActivityContext, request: ChargeRequest| {
        let bank = teller.clone();
        async move {
            // One identity through every layer: the bank sees the activity's key.
            let receipt = bank.charge(ctx.idempotency_key(), &request);
            if ctx.attempt() == 1 {
                // The bank charged the card, but its response never reached us.
                return Err(ActivityError::retryable(
                    "connection reset while reading the bank's response",
                ));
            }
            Ok(receipt)
        }
    };
    let worker = Arc::new(
        Worker::builder(&env.url, &env.worker_token)
            .worker_id("payments-example")
            .provider("charge", "bank", charge)
            .build()?,
    );
    let serving = {
        let w = worker.clone();
        tokio::spawn(async move { w.run().await })
    };

    let client = Client::new(&env.url, &env.client_token)?;
    let key = format!("order-{run}:pay");
    let request = ChargeRequest {
        customer: "cus_42".into(),
        amount_cents: 4200,
    };
    let options = ActivityOptions {
        retry: RetryPolicy {
            max_attempts_per_provider: 3,
            initial_backoff_ms: 100,
            ..RetryPolicy::default()
        },
        ..ActivityOptions::default()
    };

    // 1. The double-click.
    let (a, b) = tokio::join!(
        client.submit_activity(&key, "charge", &["bank"], &request, options.clone()),
        client.submit_activity(&key, "charge", &["bank"], &request, options.clone()),
    );
    let (a, b) = (a?, b?);
    ensure!(
        a.job.id == b.job.id && a.replayed != b.replayed,
        "a double-click must make one job"
    );
    let job_id = a.job.id;
    println!("double-click → one job {job_id}");

    // 2. The retried request.
    let retried = client
        .submit_activity(&key, "charge", &["bank"], &request, options)
        .await?;
    ensure!(
        retried.job.id == job_id && retried.replayed,
        "a retried request must replay the same job"
    );
    println!("retried request → the same job, replayed");

    // 3 and 4. The worker's first attempt loses the bank's response; the retry is deduplicated by the bank.
    let job = client.wait(job_id, Duration::from_secs(30)).await?;
    ensure!(
        job.status == JobStatus::Succeeded,
        "the charge should succeed: {:?}",
        job.status
    );
    let receipt: Receipt = serde_json::from_value(job.result.clone().unwrap_or_default())?;
    let charges = bank.charges.lock().expect("bank lock").clone();
    let calls = bank.calls.lock().expect("bank lock").clone();
    ensure!(
        charges.len() == 1,
        "exactly one charge, found {}",
        charges.len()
    );
    ensure!(
        calls.len() == 2 && calls[0] == calls[1],
        "two calls with one idempotency key: {calls:?}"
    );
    ensure!(
        calls[0] == format!("{job_id}:0"),
        "the bank received the activity's stable key"
    );
    ensure!(
        charges.values().next() == Some(&receipt),
        "the job's result is the one charge"
    );
    println!("attempt 1 charged, response lost → retry with the same key → bank returned {} → one charge\n", receipt.charge_id);

    print!("{}", client.timeline(job_id).await?);
    worker.shutdown_token().cancel();
    serving.await??;
    Ok(())
}
