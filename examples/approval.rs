//! An expense that waits for a person: the workflow waits for an `approve` signal, with a
//! timeout that escalates to a manager, and once approved pays through a provider.
//!
//! 1. expense A: the approver double-clicks "Approve": two concurrent signals under one
//!    idempotency key, one signal recorded, one approval, one payment;
//! 2. expense B: nobody approves within its timeout: the workflow escalates (an activity),
//!    then waits for the manager's approval, which pays it;
//! 3. the bank saw exactly one payment per expense, each under the activity's
//!    idempotency key.
//!
//! Run against a server (see `examples/env.rs` for the variables):
//! `cargo run --example approval`. Exits non-zero, with the reason, unless the story
//! played out as told.

#[path = "env.rs"]
mod env;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
struct Expense {
    id: String,
    amount_cents: u64,
    /// How long the approver has before the expense goes to a manager.
    approve_within_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Approval {
    by: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Escalated {
    to: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PayRequest {
    expense: String,
    amount_cents: u64,
    approved_by: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
struct Payment {
    payment_id: String,
    amount_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Outcome {
    approved_by: String,
    escalated: bool,
    payment: Payment,
}

/// The workflow: wait for an approval (escalating after a timeout), then pay.
async fn expense(ctx: WorkflowContext, expense: Expense) -> Result<Outcome, WorkflowError> {
    let within = Duration::from_millis(expense.approve_within_ms);
    let (approval, escalated) = match ctx
        .wait_signal_timeout::<Approval>("approve", within)
        .await?
    {
        Some(approval) => (approval, false),
        None => {
            // The durable timer fired first: hand it to a manager and wait for them.
            let _: Escalated = ctx.activity("escalate", &expense).await?;
            (ctx.wait_signal::<Approval>("approve").await?, true)
        }
    };
    let payment: Payment = ctx
        .activity(
            "pay",
            PayRequest {
                expense: expense.id.clone(),
                amount_cents: expense.amount_cents,
                approved_by: approval.by.clone(),
            },
        )
        .providers(["bank"])
        .await?;
    Ok(Outcome {
        approved_by: approval.by,
        escalated,
        payment,
    })
}

/// A bank that deduplicates by idempotency key, as real payment APIs do.
#[derive(Default)]
struct Bank {
    payments: Mutex<HashMap<String, Payment>>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = env::Env::from_process()?;
    let run = env::run_id();
    let bank = Arc::new(Bank::default());
    let escalations = Arc::new(Mutex::new(Vec::<String>::new()));
    let (b, e) = (bank.clone(), escalations.clone());
    let worker = Arc::new(
        Worker::builder(&env.url, &env.worker_token)
            .worker_id("approval-example")
            .workflow("expense", expense)
            .provider(
                "escalate",
                "escalate",
                move |_ctx: ActivityContext, expense: Expense| {
                    let e = e.clone();
                    async move {
                        if let Ok(mut log) = e.lock() {
                            log.push(expense.id);
                        }
                        Ok::<_, ActivityError>(Escalated {
                            to: "manager".into(),
                        })
                    }
                },
            )
            .provider(
                "pay",
                "bank",
                move |ctx: ActivityContext, pay: PayRequest| {
                    let bank = b.clone();
                    async move {
                        let mut payments = bank.payments.lock().map_err(|_| {
                            ActivityError::retryable("the bank's ledger is poisoned")
                        })?;
                        let payment = payments
                            .entry(ctx.idempotency_key().to_owned())
                            .or_insert_with(|| Payment {
                                payment_id: format!("pay-{}", pay.expense),
                                amount_cents: pay.amount_cents,
                            })
                            .clone();
                        Ok::<_, ActivityError>(payment)
                    }
                },
            )
            .build()?,
    );
    let serving = {
        let w = worker.clone();
        tokio::spawn(async move { w.run().await })
    };
    let client = Client::new(&env.url, &env.client_token)?;
    let submit = |id: &str, approve_within_ms: u64| JobRequestBody {
        workflow: Some("expense".into()),
        activity: None,
        providers: None,
        input: serde_json::to_value(Expense {
            id: id.into(),
            amount_cents: 4_200,
            approve_within_ms,
        })
        .ok(),
        task_queue: None,
        options: None,
    };

    // 1. Expense A: the approver double-clicks.
    let a = client
        .submit(&format!("expense-a-{run}"), &submit("a", 120_000))
        .await?
        .job
        .id;
    let ann = Approval { by: "ann".into() };
    let (first, second) = tokio::join!(
        client.signal(a, "approve", &ann, "approve-button-a"),
        client.signal(a, "approve", &ann, "approve-button-a"),
    );
    let (first, second) = (first?, second?);
    ensure!(
        first.signal.signal_id == second.signal.signal_id && first.replayed != second.replayed,
        "a double-click records one signal: {first:?} {second:?}"
    );
    println!(
        "expense A: approve clicked twice, signal #{} recorded once",
        first.signal.seq
    );

    // 2. Expense B: nobody approves within 1 s; it is escalated, then the manager approves.
    let b = client
        .submit(&format!("expense-b-{run}"), &submit("b", 1_000))
        .await?
        .job
        .id;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let job = client.job(b).await?;
        if job
            .activities
            .iter()
            .any(|a| a.name == "escalate" && a.status.as_str() == "succeeded")
        {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "expense B was not escalated: {:?}",
            job.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("expense B: no approval within 1 s, escalated to a manager");
    client
        .signal(
            b,
            "approve",
            &Approval {
                by: "manager".into(),
            },
            "manager-b",
        )
        .await?;

    let job_a = client.wait(a, Duration::from_secs(60)).await?;
    let job_b = client.wait(b, Duration::from_secs(60)).await?;
    for job in [&job_a, &job_b] {
        ensure!(
            job.status == JobStatus::Succeeded,
            "expense {} should be paid: {:?} {:?}",
            job.id,
            job.status,
            job.error
        );
    }
    let outcome_a: Outcome = serde_json::from_value(job_a.result.clone().unwrap_or_default())?;
    let outcome_b: Outcome = serde_json::from_value(job_b.result.clone().unwrap_or_default())?;
    ensure!(
        outcome_a.approved_by == "ann" && !outcome_a.escalated,
        "A approved by ann, not escalated: {outcome_a:?}"
    );
    ensure!(
        outcome_b.approved_by == "manager" && outcome_b.escalated,
        "B escalated, then approved by the manager: {outcome_b:?}"
    );
    ensure!(
        job_a.signals.as_ref().map(Vec::len) == Some(1),
        "A holds one signal: {:?}",
        job_a.signals
    );
    let escalated = escalations
        .lock()
        .map(|log| log.clone())
        .unwrap_or_default();
    ensure!(
        escalated == ["b"],
        "only B was escalated, once: {escalated:?}"
    );
    let payments = bank.payments.lock().map(|p| p.len()).unwrap_or_default();
    ensure!(payments == 2, "one payment per expense: {payments}");
    println!(
        "A paid {} (approved by {}), B paid {} (escalated, approved by {}): one payment each",
        outcome_a.payment.payment_id,
        outcome_a.approved_by,
        outcome_b.payment.payment_id,
        outcome_b.approved_by
    );
    println!();
    print!("{}", client.timeline(a).await?);
    worker.shutdown_token().cancel();
    serving.await??;
    Ok(())
}
