#![warn(missing_docs)]
//! # onceflow engine
//!
//! A durable workflow engine whose first promise is **one job per intent**. This crate is
//! the engine: the domain ([`Engine`]), the storage trait ([`store::Store`]) with its
//! PostgreSQL implementation, and the `onceflow` binary.
//!
//! The guarantees, each enforced in the database and proved by a named test (see
//! `docs/guarantees.md`):
//! 1. one job per (owner, idempotency key): [`Engine::submit`];
//! 2. at most one live attempt per activity: [`Engine::create_attempt`];
//! 3. a timeout is `unknown`, not failed: [`Engine::reap`];
//! 4. exactly one winner, by compare-and-swap: [`Engine::complete`];
//! 5. fencing by lease token: [`Engine::heartbeat`], [`Engine::complete`];
//! 6. failover only to certified providers: [`Engine::register_contract`],
//!    [`Engine::record_certification`];
//! 7. every state change is one transaction with its event;
//! 8. owners are isolated: another owner's ids are not found.

pub mod background;
pub mod cli;
pub mod domain;
pub mod error;
pub mod http;
pub mod metrics;
pub mod model;
mod mutants;
pub mod request;
pub mod store;
pub mod telemetry;
pub mod text;

pub use domain::{
    tick_key, ClaimRequest, Completion, CompletionBody, CronSpec, Engine, HeartbeatAck,
    JobListQuery, JobPage, ReapReport, SchedulePut, ScheduleReport, ScheduleRequestBody,
    SignalSubmission, StuckAttemptsQuery, Submission, WorkflowTaskOutcome,
};
pub use error::{EngineError, StoreError};
pub use request::{JobRequest, JobTarget, SignalRequest};
pub use store::ConnectSettings;
