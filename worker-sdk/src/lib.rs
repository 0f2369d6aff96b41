//! # onceflow worker SDK
//!
//! Turn a plain async function into a **provider** of an **activity**, with every
//! guarantee of onceflow kept for you:
//!
//! ```no_run
//! use onceflow_worker::{ActivityContext, ActivityError, Worker};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, Serialize)]
//! struct Prompt { text: String }
//!
//! #[derive(Serialize, Deserialize, JsonSchema)]
//! struct Completion { text: String }
//!
//! async fn primary(ctx: ActivityContext, prompt: Prompt) -> Result<Completion, ActivityError> {
//!     // Pass ctx.idempotency_key() to the model API: the same for every attempt.
//!     Ok(Completion { text: format!("echo: {}", prompt.text) })
//! }
//!
//! # async fn run() -> Result<(), onceflow_worker::SdkError> {
//! let worker = Worker::builder("http://127.0.0.1:7380", "of_…worker token…")
//!     .task_queue("default")
//!     .provider("generate", "primary-llm", primary)
//!     .provider("generate", "fallback-llm", primary)
//!     .certify_with([Prompt { text: "hello".into() }])
//!     .build()?;
//! worker.run_until_signal().await
//! # }
//! ```
//!
//! ## What the worker guarantees
//! - **Leases and heartbeats.** An attempt runs here only under its lease. While the
//!   handler runs, the worker heartbeats at a third of the activity's heartbeat timeout,
//!   so a slow handler keeps its lease; [`ActivityContext::heartbeat`] adds progress.
//! - **Cancellation reaches the handler.** When an operator cancels the attempt, its job
//!   is cancelled, or another attempt already won, the next heartbeat answers
//!   `cancel_requested` and [`ActivityContext::cancelled`] resolves. If the engine
//!   refuses the lease token (`lease_lost`), the handler is told the same way; its result
//!   is still sent and the engine decides, by compare-and-swap, whether it won.
//! - **One identity downstream.** [`ActivityContext::idempotency_key`] is stable for the
//!   activity across all attempts and providers: give it to the model, payment or
//!   storage API so that a retried or failed-over call is deduplicated there too.
//! - **Contracts.** The output type's JSON Schema (via `schemars`) is the activity's
//!   output contract, registered at start-up. Outputs are checked here (logged) and on
//!   the engine (an invalid result is never committed; the attempt is `invalid`).
//! - **Certification.** [`WorkerBuilder::certify_with`] runs the provider on sample
//!   inputs at start-up and reports the run. The engine fails over only to providers
//!   whose latest certification passed; a failed one is logged and never stops the
//!   worker.
//! - **Errors.** Return [`ActivityError::retryable`] to retry the same provider with
//!   backoff, [`ActivityError::fatal`] to move on to the next provider. A panic is caught
//!   and reported as a fatal error.
//! - **Back-pressure and reconnects.** At most
//!   [`WorkerBuilder::max_concurrent_attempts`] attempts run at once and the worker asks
//!   for no more than it has room for; an unreachable engine is retried with backoff.
//! - **Graceful shutdown.** On shutdown the worker stops polling and lets running
//!   attempts finish within [`WorkerBuilder::shutdown_grace`]; past it, it stops
//!   heartbeating and exits, so those attempts become `unknown` (never reported as
//!   something they are not). A worker killed outright leaves the same `unknown` state.
//!
//! [`Client`] submits jobs and reads them.
//!
//! ## Several engine processes
//! Both take one URL or several (comma-separated, or a list: [`WorkerBuilder::urls`],
//! [`Client::with_urls`]), one per `serve` process of the same database. A request that
//! cannot connect to one, or that is safe to repeat and finds it stopping (SIGTERM) or
//! answering `502`/`503`/`504`, moves on to the next at once; see [`Endpoints`] for the
//! rule and which requests are safe to repeat. So restarting the engine's processes one
//! at a time fails no request.
//!
//! ## TLS
//! Both speak `https://` (rustls, no OpenSSL). They trust the system's root certificates
//! plus the CA certificates of the PEM file named by `ONCEFLOW_CA_CERT` (or given with
//! [`WorkerBuilder::ca_cert`] / [`Client::with_ca_cert`]); see [`http_client`].

#![warn(missing_docs)]

mod client;
mod context;
mod endpoints;
mod error;
mod http;
mod provider;
mod report;
mod runs;
mod secret;
mod transport;
mod worker;
mod workflow;

pub use client::{Client, SignalSent, Submitted};
pub use context::{ActivityContext, StopReason};
pub use endpoints::{Endpoints, Repeat};
pub use error::{ActivityError, SdkError};
pub use http::{http_client, http_client_from_env, with_causes, CA_CERT_ENV};
pub use onceflow_protocol::model::{ActivityOptions, Failover, JobStatus, JobView, RetryPolicy};
pub use onceflow_protocol::{api, model};
pub use provider::output_contract;
pub use secret::SecretToken;
pub use worker::{CertificationReport, Worker, WorkerBuilder, WorkerStats};
pub use workflow::{
    ActivityCall, ActivityFailed, ActivityFuture, ChildWorkflowCall, ChildWorkflowFuture,
    SignalWait, SignalWaitWithTimeout, Sleep, WorkflowContext, WorkflowError,
};

/// `docs/workflows.md`, whose Rust blocks are compiled as doctests (`cargo test --doc -p
/// onceflow-worker`): the page a newcomer writes a workflow from builds as written.
#[cfg(doctest)]
#[doc = include_str!("../../docs/workflows.md")]
pub mod workflows_page {}
