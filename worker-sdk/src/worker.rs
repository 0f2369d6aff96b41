//! [`Worker`]: long-polls the engine for attempts of its registered providers, runs them
//! with heartbeats, and reports how they ended.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceflow_protocol::api::{
    CertificationRequest, CompleteRequest, ContractRequest, ContractResponse, PollRequest,
    PollResponse, ProviderPair, WorkerError,
};
use onceflow_protocol::model::{ActivityTask, CompletionOutcome};
use reqwest::Method;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::context::{ActivityContext, StopReason};
use crate::endpoints::{Endpoints, Repeat};
use crate::error::{ActivityError, SdkError};
use crate::http::CaCert;
use crate::provider::{cases_to_json, typed_check, Certify, LocalContract, Registration};
use crate::report::{Reporter, StopOnDrop};
use crate::runs::{Answer, Runs};
use crate::secret::SecretToken;
use crate::transport::Transport;
use crate::workflow::{erase, WorkflowContext, WorkflowError, WorkflowFn};
use onceflow_protocol::workflow::{
    CompleteWorkflowTaskRequest, CompleteWorkflowTaskResponse, Task, WorkflowCommand,
    WorkflowHistoryRequest, WorkflowTask,
};

/// Before a poll, the poll loop yields to the runtime at most this many times while
/// attempts that are finishing give their slots back.
const YIELD_ROUNDS: usize = 8;

/// Builds a [`Worker`]: where the engine is, which providers it runs, and how. Its
/// `Debug` shows no token.
pub struct WorkerBuilder {
    urls: Vec<String>,
    token: SecretToken,
    task_queue: String,
    worker_id: String,
    max_concurrent: usize,
    max_cached_workflows: usize,
    poll_wait: Duration,
    shutdown_grace: Duration,
    registrations: Vec<Registration>,
    workflows: HashMap<String, WorkflowFn>,
    ca_cert: Option<PathBuf>,
    error: Option<SdkError>,
}

impl WorkerBuilder {
    /// Registers a workflow: `async fn(WorkflowContext, In) -> Result<Out, WorkflowError>`.
    /// The worker replays it against each job's history (see [`WorkflowContext`]); its
    /// activities run on whichever workers registered their providers.
    pub fn workflow<F, Fut, I, O>(mut self, name: &str, workflow: F) -> Self
    where
        F: Fn(WorkflowContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + 'static,
        I: DeserializeOwned + 'static,
        O: Serialize + 'static,
    {
        if self
            .workflows
            .insert(name.to_owned(), erase(workflow))
            .is_some()
        {
            self.error = Some(SdkError::Config(format!(
                "workflow `{name}` registered twice"
            )));
        }
        self
    }

    /// The engine's URLs, tried in order, instead of the one given to
    /// [`Worker::builder`] (each may also be a comma-separated list). A poll, heartbeat or
    /// completion that cannot connect to one, finds it stopping, or is answered
    /// `502`/`503`/`504` moves on to the next at once (see [`Endpoints`]; all of them are
    /// safe to repeat: reports are fenced by the lease token and a repeated one answers
    /// as the first did); when every URL failed, the worker backs off as with one URL.
    /// No URL at all makes [`WorkerBuilder::build`] fail with [`SdkError::Config`].
    pub fn urls<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.urls = urls.into_iter().map(Into::into).collect();
        self
    }

    /// The task queue to poll (default `default`).
    pub fn task_queue(mut self, queue: impl Into<String>) -> Self {
        self.task_queue = queue.into();
        self
    }

    /// The name recorded on the attempts this worker takes (default: host-pid based).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = id.into();
        self
    }

    /// Over `https://`, trust the CA certificates of this PEM file besides the system's
    /// roots. Without it the worker reads the file named by `ONCEFLOW_CA_CERT`, if set.
    /// [`WorkerBuilder::build`] fails with [`SdkError::Config`] naming the file (or the
    /// variable) when it cannot be read or holds no certificate.
    pub fn ca_cert(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_cert = Some(path.into());
        self
    }

    /// At most this many attempts run at once (default 8). The worker asks for no more
    /// tasks than it has free slots: back-pressure, never an overcommitted lease.
    pub fn max_concurrent_attempts(mut self, n: usize) -> Self {
        self.max_concurrent = n.max(1);
        self
    }

    /// Sticky execution: keep the replayed state of up to this many workflow runs between
    /// their tasks (default 1,000; the least recently used are dropped first). The engine
    /// then sends a kept workflow's next task to this worker with only what arrived
    /// since, so a task costs the same at step 10,000 as at step 10. A task whose run was
    /// dropped, or that reaches a worker that restarted, is replayed from its whole
    /// history as usual. `0` keeps none: every task is a full replay.
    pub fn max_cached_workflows(mut self, n: usize) -> Self {
        self.max_cached_workflows = n;
        self
    }

    /// How long one long-poll waits for work (default 5 s, at most 60 s). A shutdown
    /// waits for the poll in flight, so that tasks it brings back are run, not stranded.
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait.min(Duration::from_secs(60));
        self
    }

    /// On shutdown, how long running attempts may take to finish (default 30 s). Past
    /// it the worker stops heartbeating and exits: those attempts become `unknown` on
    /// the engine rather than being reported as something they are not.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Registers `handler` as `provider` of `activity`. Its output type's JSON Schema is
    /// the activity's output contract, registered with the engine at start-up; every
    /// output is checked against it here and on the engine.
    pub fn provider<F, Fut, I, O>(mut self, activity: &str, provider: &str, handler: F) -> Self
    where
        F: Fn(ActivityContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ActivityError>> + Send + 'static,
        I: DeserializeOwned + Send + 'static,
        O: Serialize + JsonSchema + Send + 'static,
    {
        self.registrations
            .push(Registration::new(activity, provider, handler));
        self
    }

    /// Certification cases for the provider registered last: at start-up the worker runs
    /// it on each input, checks each output against the contract (and the check of
    /// [`WorkerBuilder::validate_with`]), and reports the run to the engine. Failover to
    /// a provider requires its latest certification to have passed; a failed one is
    /// logged and blocks failover to that provider, never the worker.
    pub fn certify_with<I: Serialize>(mut self, cases: impl IntoIterator<Item = I>) -> Self {
        match (cases_to_json(cases), self.registrations.last_mut()) {
            (Ok(cases), Some(last)) => {
                last.certify.get_or_insert_with(Certify::default).cases = cases
            }
            (Err(e), _) => self.error = Some(e),
            (_, None) => {
                self.error = Some(SdkError::Config("certify_with before any provider".into()))
            }
        }
        self
    }

    /// A business rule that the outputs of the provider registered last must satisfy
    /// during certification, beyond the contract (e.g. "the summary is not empty").
    pub fn validate_with<O, V>(mut self, check: V) -> Self
    where
        O: DeserializeOwned,
        V: Fn(&O) -> Result<(), String> + Send + Sync + 'static,
    {
        match self.registrations.last_mut() {
            Some(last) => {
                last.certify.get_or_insert_with(Certify::default).check = Some(typed_check(check))
            }
            None => self.error = Some(SdkError::Config("validate_with before any provider".into())),
        }
        self
    }

    /// The worker, ready to [`Worker::run`].
    pub fn build(self) -> Result<Worker, SdkError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.registrations.is_empty() && self.workflows.is_empty() {
            return Err(SdkError::Config(
                "register at least one provider or workflow".into(),
            ));
        }
        let mut contracts: HashMap<String, (Value, Arc<LocalContract>)> = HashMap::new();
        let mut providers = HashMap::new();
        for r in &self.registrations {
            match contracts.get(&r.activity) {
                Some((schema, _)) if *schema != r.output_schema => {
                    return Err(SdkError::Config(format!(
                        "providers of `{}` must share one output type (one contract per activity)",
                        r.activity
                    )))
                }
                Some(_) => {}
                None => {
                    let local = Arc::new(LocalContract::compile(&r.output_schema)?);
                    contracts.insert(r.activity.clone(), (r.output_schema.clone(), local));
                }
            }
            if providers
                .insert((r.activity.clone(), r.provider.clone()), r.clone())
                .is_some()
            {
                return Err(SdkError::Config(format!(
                    "`{}` of `{}` registered twice",
                    r.provider, r.activity
                )));
            }
        }
        Ok(Worker {
            inner: Arc::new(Inner {
                transport: Transport::new(
                    Endpoints::new(&self.urls)?,
                    self.token.expose(),
                    self.ca_cert
                        .map(CaCert::Explicit)
                        .or_else(CaCert::from_env)
                        .as_ref(),
                )?,
                task_queue: self.task_queue,
                worker_id: self.worker_id,
                max_concurrent: self.max_concurrent,
                runs: Runs::new(if self.workflows.is_empty() {
                    0
                } else {
                    self.max_cached_workflows
                }),
                poll_wait: self.poll_wait,
                shutdown_grace: self.shutdown_grace,
                registrations: self.registrations,
                workflows: self.workflows,
                providers,
                contracts,
                stats: Stats::default(),
            }),
            shutdown: CancellationToken::new(),
        })
    }
}

/// A worker: the providers of one process, serving one task queue.
///
/// Guarantees it keeps for its handlers: an attempt runs here only while this worker
/// holds its lease; the lease is renewed by heartbeats while the handler runs; a handler
/// learns through its context when its attempt was cancelled or its lease lost; every
/// outcome is reported with the attempt's lease token, and the engine decides by
/// compare-and-swap whether a result won. A panicking handler is reported as a
/// non-retryable error. If the worker dies, its attempts become `unknown` on the engine,
/// never silently retried.
///
/// Its `Debug` shows where it polls and what it serves, never its token.
pub struct Worker {
    inner: Arc<Inner>,
    shutdown: CancellationToken,
}

/// The (activity, provider) pairs of some registrations, for `Debug`.
fn provider_pairs<'a>(registrations: impl Iterator<Item = &'a Registration>) -> Vec<String> {
    registrations
        .map(|r| format!("{}@{}", r.activity, r.provider))
        .collect()
}

/// The names of some workflows, sorted, for `Debug`.
fn workflow_names(workflows: &HashMap<String, WorkflowFn>) -> Vec<&str> {
    let mut names: Vec<&str> = workflows.keys().map(String::as_str).collect();
    names.sort_unstable();
    names
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("urls", &self.urls)
            .field("token", &self.token)
            .field("task_queue", &self.task_queue)
            .field("worker_id", &self.worker_id)
            .field("max_concurrent", &self.max_concurrent)
            .field("poll_wait", &self.poll_wait)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("providers", &provider_pairs(self.registrations.iter()))
            .field("workflows", &workflow_names(&self.workflows))
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.inner;
        f.debug_struct("Worker")
            .field("transport", &inner.transport)
            .field("task_queue", &inner.task_queue)
            .field("worker_id", &inner.worker_id)
            .field("max_concurrent", &inner.max_concurrent)
            .field("poll_wait", &inner.poll_wait)
            .field("shutdown_grace", &inner.shutdown_grace)
            .field("providers", &provider_pairs(inner.registrations.iter()))
            .field("workflows", &workflow_names(&inner.workflows))
            .field("stopping", &self.shutdown.is_cancelled())
            .finish_non_exhaustive()
    }
}

struct Inner {
    transport: Transport,
    task_queue: String,
    worker_id: String,
    max_concurrent: usize,
    runs: Runs,
    poll_wait: Duration,
    shutdown_grace: Duration,
    registrations: Vec<Registration>,
    workflows: HashMap<String, WorkflowFn>,
    providers: HashMap<(String, String), Registration>,
    contracts: HashMap<String, (Value, Arc<LocalContract>)>,
    stats: Stats,
}

/// Counters of what a worker did, for logs and metrics.
#[derive(Debug, Default)]
struct Stats {
    started: AtomicU64,
    won: AtomicU64,
    lost: AtomicU64,
    recorded: AtomicU64,
    contract_violations: AtomicU64,
    invalid_results: AtomicU64,
    local_contract_violations: AtomicU64,
    lease_lost: AtomicU64,
    panics: AtomicU64,
    workflow_tasks: AtomicU64,
    workflows_returned: AtomicU64,
}

/// A snapshot of a worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Attempts handed to this worker.
    pub started: u64,
    /// Results that took the activity's slot.
    pub won: u64,
    /// Results that arrived after another attempt won (or the job closed).
    pub lost: u64,
    /// Errors reported (the retry policy decided what next).
    pub recorded: u64,
    /// Results the engine refused as violating the output contract (422).
    pub contract_violations: u64,
    /// Results or errors the engine could not store as sent (422 `invalid_result`: they
    /// held U+0000); their attempts are `invalid`.
    pub invalid_results: u64,
    /// Results this worker found violating the contract before sending them.
    pub local_contract_violations: u64,
    /// Completions refused for the lease token (409 `lease_lost`).
    pub lease_lost: u64,
    /// Handlers that panicked.
    pub panics: u64,
    /// Workflow tasks whose commands the engine applied (answered `applied`, not
    /// `stale`).
    pub workflow_tasks: u64,
    /// Of those, the tasks that carried the workflow's return (its result or its error):
    /// each is one workflow job run to its end by this worker.
    pub workflows_returned: u64,
}

/// The outcome of certifying one provider.
#[derive(Debug, Clone)]
pub struct CertificationReport {
    /// The activity.
    pub activity: String,
    /// The provider.
    pub provider: String,
    /// The contract it was certified against.
    pub contract_hash: String,
    /// Whether every case passed.
    pub passed: bool,
    /// Each case: its input, and what went wrong if anything.
    pub cases: Vec<Value>,
}

impl Worker {
    /// A builder for a worker talking to the engine at `url` with a `worker` token. `url`
    /// may name several of the engine's `serve` processes, separated by commas (as
    /// `ONCEFLOW_URL` may hold): see [`WorkerBuilder::urls`].
    pub fn builder(url: impl Into<String>, token: impl Into<String>) -> WorkerBuilder {
        WorkerBuilder {
            urls: vec![url.into()],
            token: SecretToken::new(token),
            task_queue: "default".to_owned(),
            worker_id: format!("worker-{}", std::process::id()),
            max_concurrent: 8,
            max_cached_workflows: 1000,
            poll_wait: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(30),
            registrations: Vec::new(),
            workflows: HashMap::new(),
            ca_cert: None,
            error: None,
        }
    }

    /// Cancel it to shut the worker down gracefully: stop polling, let running attempts
    /// finish within the grace period, then stop.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// What the worker has done so far.
    pub fn stats(&self) -> WorkerStats {
        let s = &self.inner.stats;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerStats {
            started: get(&s.started),
            won: get(&s.won),
            lost: get(&s.lost),
            recorded: get(&s.recorded),
            contract_violations: get(&s.contract_violations),
            invalid_results: get(&s.invalid_results),
            local_contract_violations: get(&s.local_contract_violations),
            lease_lost: get(&s.lease_lost),
            panics: get(&s.panics),
            workflow_tasks: get(&s.workflow_tasks),
            workflows_returned: get(&s.workflows_returned),
        }
    }

    /// Runs until Ctrl-C or SIGTERM, then shuts down gracefully.
    pub async fn run_until_signal(&self) -> Result<(), SdkError> {
        let token = self.shutdown.clone();
        tokio::spawn(async move {
            #[cfg(unix)]
            {
                if let Ok(mut term) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                {
                    tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} }
                } else {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
            token.cancel();
        });
        self.run().await
    }

    /// Registers the output contracts, certifies the providers that have cases, then
    /// serves attempts until [`Worker::shutdown_token`] is cancelled. Reconnects with
    /// backoff while the engine is unreachable.
    pub async fn run(&self) -> Result<(), SdkError> {
        let hashes = self.register_contracts().await?;
        if self.shutdown.is_cancelled() {
            return Ok(());
        }
        for report in self.certify_with_hashes(&hashes).await? {
            if report.passed {
                tracing::info!(activity = %report.activity, provider = %report.provider, contract_hash = %report.contract_hash, "provider certified");
            } else {
                let cases = Value::Array(report.cases.clone());
                tracing::error!(activity = %report.activity, provider = %report.provider, contract_hash = %report.contract_hash,
                    cases = %cases,
                    "provider FAILED certification: the engine will not fail over to it; it still serves attempts scheduled for it");
            }
        }
        self.serve().await;
        Ok(())
    }

    /// Registers every activity's output contract; returns the hash of each.
    async fn register_contracts(&self) -> Result<HashMap<String, String>, SdkError> {
        let mut hashes = HashMap::new();
        for (activity, (schema, _)) in &self.inner.contracts {
            let body = ContractRequest {
                activity: activity.clone(),
                output_schema: schema.clone(),
            };
            let answer: ContractResponse = self
                .with_reconnect(|| {
                    self.inner.transport.call(
                        Repeat::Safe,
                        Method::POST,
                        "/v1/worker/contracts",
                        &[],
                        Some(&body),
                        Duration::from_secs(30),
                    )
                })
                .await?
                .body;
            hashes.insert(activity.clone(), answer.contract_hash);
        }
        Ok(hashes)
    }

    /// Runs the certification cases of every provider that has some, and reports each
    /// run to the engine.
    pub async fn certify(&self) -> Result<Vec<CertificationReport>, SdkError> {
        let hashes = self.register_contracts().await?;
        self.certify_with_hashes(&hashes).await
    }

    async fn certify_with_hashes(
        &self,
        hashes: &HashMap<String, String>,
    ) -> Result<Vec<CertificationReport>, SdkError> {
        let mut reports = Vec::new();
        for r in &self.inner.registrations {
            let Some(certify) = &r.certify else { continue };
            let contract_hash = hashes.get(&r.activity).cloned().unwrap_or_default();
            let local = &self.inner.contracts[&r.activity].1;
            let mut cases = Vec::new();
            let mut passed = !certify.cases.is_empty();
            for (i, input) in certify.cases.iter().enumerate() {
                let task = certification_task(r, i, input.clone());
                let ctx = ActivityContext::new(task, None);
                let outcome = tokio::spawn(r.handler.call(ctx, input.clone())).await;
                let failure = match outcome {
                    Err(e) => Some(format!("the handler panicked: {}", panic_message(e))),
                    Ok(Err(e)) => Some(format!("the handler failed: {}", e.message)),
                    Ok(Ok(output)) => {
                        let violations = local.violations(&output);
                        if !violations.is_empty() {
                            Some(format!(
                                "the output violates the contract: {}",
                                violations.join("; ")
                            ))
                        } else if let Some(check) = &certify.check {
                            check(&output)
                                .err()
                                .map(|e| format!("the output fails the business check: {e}"))
                        } else {
                            None
                        }
                    }
                };
                passed &= failure.is_none();
                cases.push(json!({ "case": i, "input": input, "passed": failure.is_none(), "failure": failure }));
            }
            let body = CertificationRequest {
                activity: r.activity.clone(),
                provider: r.provider.clone(),
                contract_hash: contract_hash.clone(),
                passed,
                report: Some(json!({ "worker_id": self.inner.worker_id, "cases": cases })),
            };
            self.with_reconnect(|| {
                self.inner.transport.call::<_, Value>(
                    Repeat::Safe,
                    Method::POST,
                    "/v1/worker/certifications",
                    &[],
                    Some(&body),
                    Duration::from_secs(30),
                )
            })
            .await?;
            reports.push(CertificationReport {
                activity: r.activity.clone(),
                provider: r.provider.clone(),
                contract_hash,
                passed,
                cases,
            });
        }
        Ok(reports)
    }

    /// Retries a call with backoff while the engine is unreachable, until shutdown.
    async fn with_reconnect<T, F, Fut>(&self, mut call: F) -> Result<T, SdkError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError>>,
    {
        let mut backoff = Duration::from_millis(100);
        loop {
            match call().await {
                Err(e) if e.is_transient() && !self.shutdown.is_cancelled() => {
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "engine unreachable; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.shutdown.cancelled() => return Err(e),
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
                other => return other,
            }
        }
    }

    /// The poll loop: back-pressure by free slots, then graceful shutdown.
    async fn serve(&self) {
        let slots = Arc::new(Semaphore::new(self.inner.max_concurrent));
        let running = TaskTracker::new();
        let reporter = Reporter::start(self.inner.transport.clone());
        let _stop_reporter = StopOnDrop(reporter.clone());
        // Cancelled when the shutdown grace runs out: attempts still running are abandoned
        // without a word (no more heartbeats), so they become `unknown` on the engine.
        let abandon = CancellationToken::new();
        let pairs: Vec<ProviderPair> = self
            .inner
            .providers
            .keys()
            .map(|(activity, provider)| ProviderPair {
                activity: activity.clone(),
                provider: provider.clone(),
            })
            .collect();
        let mut backoff = Duration::from_millis(100);
        while !self.shutdown.is_cancelled() {
            // Completions of attempts that finish from now on ride with the next poll.
            reporter.poll_waiting();
            let first = tokio::select! {
                permit = slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
                _ = self.shutdown.cancelled() => break,
            };
            // Let attempts that are finishing right now give their slots back (and queue
            // their completions) first, so that this poll carries and asks for more: the
            // runtime runs what is ready while this task yields, for as long as that frees
            // more slots (a few rounds at most; an idle worker polls at once).
            let mut permits = vec![first];
            for _ in 0..YIELD_ROUNDS {
                tokio::task::yield_now().await;
                let before = permits.len();
                while permits.len() < 100 {
                    match slots.clone().try_acquire_owned() {
                        Ok(p) => permits.push(p),
                        Err(_) => break,
                    }
                }
                if permits.len() == before {
                    break;
                }
            }
            let request = PollRequest {
                worker_id: self.inner.worker_id.clone(),
                task_queue: self.inner.task_queue.clone(),
                workflows: self.inner.workflows.keys().cloned().collect(),
                providers: pairs.clone(),
                max_tasks: permits.len() as u32,
                wait_ms: self.inner.poll_wait.as_millis() as u64,
                completions: Vec::new(),
            };
            let carried = reporter.take_for_poll();
            let request = PollRequest {
                completions: carried.iter().map(|p| p.completion().clone()).collect(),
                ..request
            };
            if !carried.is_empty() {
                reporter.carrying_poll_sent();
            }
            // An in-flight poll is allowed to finish even during shutdown: tasks it brings
            // back are already leased to this worker and are run within the grace period.
            let polled = self
                .inner
                .transport
                .call::<_, PollResponse>(
                    Repeat::Safe,
                    Method::POST,
                    "/v1/worker/poll",
                    &[],
                    Some(&request),
                    self.inner.poll_wait + Duration::from_secs(30),
                )
                .await;
            match polled {
                Ok(answer) => {
                    backoff = Duration::from_millis(100);
                    reporter.poll_answered(carried, answer.body.completions);
                    for task in answer.body.tasks {
                        let Some(permit) = permits.pop() else {
                            tracing::error!("the engine sent more tasks than asked for; the extra one will be handed out again or become unknown");
                            continue;
                        };
                        let inner = self.inner.clone();
                        let abandon = abandon.clone();
                        let reporter = reporter.clone();
                        running.spawn(async move {
                            match task {
                                // The slot is given back once the outcome is queued.
                                Task::Activity(task) => {
                                    run_attempt(inner, task, &reporter, permit, abandon).await
                                }
                                Task::Workflow(task) => {
                                    run_workflow_task(inner, task, abandon).await;
                                    drop(permit);
                                }
                            }
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "poll failed; reconnecting");
                    Reporter::poll_failed(carried, &e);
                    reporter.poll_not_waiting();
                    drop(permits);
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.shutdown.cancelled() => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
        // No more polls: completions from now on are sent at once.
        reporter.poll_not_waiting();
        running.close();
        tracing::info!(
            running = running.len(),
            grace_s = self.inner.shutdown_grace.as_secs(),
            "worker stopping: no more polls"
        );
        if tokio::time::timeout(self.inner.shutdown_grace, running.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                running = running.len(),
                "shutdown grace over: abandoning running attempts; they will become unknown"
            );
            abandon.cancel();
            running.wait().await;
        }
    }
}

fn certification_task(r: &Registration, case: usize, input: Value) -> ActivityTask {
    ActivityTask {
        kind: "activity".to_owned(),
        attempt_id: uuid::Uuid::nil(),
        lease_token: uuid::Uuid::nil(),
        read_version: 0,
        job_id: uuid::Uuid::nil(),
        owner: String::new(),
        activity: r.activity.clone(),
        provider: r.provider.clone(),
        input,
        attempt_number: 0,
        idempotency_key: format!("certify:{}:{}:{case}", r.activity, r.provider),
        heartbeat_timeout_ms: None,
        start_to_close_timeout_ms: None,
    }
}

fn panic_message(error: tokio::task::JoinError) -> String {
    match error.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned()),
        Err(e) => e.to_string(),
    }
}

/// Runs one attempt: the handler, its heartbeats, and the report of how it ended.
async fn run_attempt(
    inner: Arc<Inner>,
    task: ActivityTask,
    reporter: &Reporter,
    slot: OwnedSemaphorePermit,
    abandon: CancellationToken,
) {
    inner.stats.started.fetch_add(1, Ordering::Relaxed);
    let key = (task.activity.clone(), task.provider.clone());
    let Some(registration) = inner.providers.get(&key).cloned() else {
        tracing::error!(attempt_id = %task.attempt_id, activity = %task.activity, provider = %task.provider, "a task for a provider this worker does not run");
        return;
    };
    let ctx = ActivityContext::new(task.clone(), Some(inner.transport.clone()));
    let span = tracing::info_span!("attempt", job_id = %task.job_id, attempt_id = %task.attempt_id, owner = %task.owner,
        activity = %task.activity, provider = %task.provider, number = task.attempt_number);

    let finished = CancellationToken::new();
    let heartbeats = tokio::spawn(heartbeat_loop(
        ctx.clone(),
        finished.clone(),
        abandon.clone(),
    ));
    let mut handler = tokio::spawn(
        registration
            .handler
            .call(ctx.clone(), task.input.clone())
            .instrument(span.clone()),
    );
    let outcome = tokio::select! {
        outcome = &mut handler => outcome,
        _ = abandon.cancelled() => {
            handler.abort();
            heartbeats.abort();
            tracing::warn!(parent: &span, "attempt abandoned at shutdown: it becomes unknown on the engine");
            return;
        }
    };
    finished.cancel();
    let _ = heartbeats.await;

    let body = match outcome {
        Ok(Ok(output)) => {
            let violations = inner
                .contracts
                .get(&task.activity)
                .map(|(_, c)| c.violations(&output))
                .unwrap_or_default();
            if !violations.is_empty() {
                inner
                    .stats
                    .local_contract_violations
                    .fetch_add(1, Ordering::Relaxed);
                tracing::error!(parent: &span, violations = %violations.join("; "),
                    "the handler's output violates its own contract; sending it so the engine records the attempt invalid");
            }
            CompleteRequest {
                lease_token: task.lease_token,
                read_version: Some(task.read_version),
                result: Some(output),
                error: None,
            }
        }
        Ok(Err(e)) => CompleteRequest {
            lease_token: task.lease_token,
            read_version: Some(task.read_version),
            result: None,
            error: Some(WorkerError {
                message: e.message,
                retryable: e.retryable,
            }),
        },
        Err(join_error) => {
            inner.stats.panics.fetch_add(1, Ordering::Relaxed);
            let message = format!("the handler panicked: {}", panic_message(join_error));
            tracing::error!(parent: &span, %message, "handler panic reported as a non-retryable error");
            CompleteRequest {
                lease_token: task.lease_token,
                read_version: Some(task.read_version),
                result: None,
                error: Some(WorkerError {
                    message,
                    retryable: false,
                }),
            }
        }
    };
    if ctx.stop_reason() == Some(StopReason::LeaseLost) {
        tracing::warn!(parent: &span, "the lease was lost while the handler ran; sending its outcome anyway, the engine decides");
    }
    report(&inner, reporter, &task, &body, slot, &abandon, &span).await;
}

/// Sends the completion (with others that finish meanwhile), retrying while the engine
/// is unreachable.
#[allow(clippy::too_many_arguments)]
async fn report(
    inner: &Inner,
    reporter: &Reporter,
    task: &ActivityTask,
    body: &CompleteRequest,
    slot: OwnedSemaphorePermit,
    abandon: &CancellationToken,
    span: &tracing::Span,
) {
    let mut backoff = Duration::from_millis(100);
    // Queued before the slot is given back, so the poll that slot starts can carry it.
    let mut answered = reporter.queue(task.attempt_id, body, false);
    drop(slot);
    loop {
        let answer = answered.await.unwrap_or_else(|_| {
            Err(SdkError::Transport(
                "the worker's reporter has stopped".into(),
            ))
        });
        match answer {
            Ok(outcome) => {
                let counter = match outcome {
                    CompletionOutcome::Won => &inner.stats.won,
                    CompletionOutcome::Lost => &inner.stats.lost,
                    CompletionOutcome::Recorded
                    | CompletionOutcome::ContractViolation
                    | CompletionOutcome::InvalidResult => &inner.stats.recorded,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                if outcome == CompletionOutcome::Lost {
                    tracing::warn!(parent: span, "race_lost: another attempt's result won; this one was discarded");
                } else if outcome == CompletionOutcome::Won {
                    // The happy path of every attempt: debug, so logs at `info` stay readable
                    // at thousands of attempts a second.
                    tracing::debug!(parent: span, %outcome, "attempt reported");
                } else {
                    tracing::info!(parent: span, %outcome, "attempt reported");
                }
                return;
            }
            Err(SdkError::Api { code, message, .. }) if code == "contract_violation" => {
                inner
                    .stats
                    .contract_violations
                    .fetch_add(1, Ordering::Relaxed);
                tracing::error!(parent: span, %message, "the engine refused the result: contract violation; the attempt is invalid");
                return;
            }
            Err(SdkError::Api { code, message, .. }) if code == "invalid_result" => {
                inner.stats.invalid_results.fetch_add(1, Ordering::Relaxed);
                tracing::error!(parent: span, %message, "the engine cannot store this result as sent (it holds U+0000); the attempt is invalid");
                return;
            }
            Err(SdkError::Api { code, .. }) if code == "lease_lost" => {
                inner.stats.lease_lost.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(parent: span, "the engine refused this attempt's lease token; outcome dropped");
                return;
            }
            Err(SdkError::Api { code, .. }) if code == "not_found" => {
                // Its job is gone (the engine's retention deletes finished jobs whose
                // attempts are all over), or the token does not serve its owner.
                tracing::warn!(parent: span, "the engine no longer knows this attempt; outcome dropped");
                return;
            }
            Err(e) if e.is_transient() && !abandon.is_cancelled() => {
                tracing::warn!(parent: span, error = %e, "could not report the outcome; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = abandon.cancelled() => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                // A retry frees no slot, so no poll is owed to it: it goes at once.
                answered = reporter.queue(task.attempt_id, body, true);
            }
            Err(e) => {
                tracing::error!(parent: span, error = %e, "the outcome could not be reported; the attempt will become unknown");
                return;
            }
        }
    }
}

/// How long a worker keeps trying to complete a workflow task while the engine is
/// unreachable: the engine's lease on a workflow task (30 s by default). Past it the task
/// is handed out again, so trying on would only hold a slot.
const WORKFLOW_TASK_PATIENCE: Duration = Duration::from_secs(30);

/// Runs a workflow task (continuing the job's kept run, or replaying its whole history)
/// and sends the commands; retried while the engine is unreachable, within the task's
/// lease.
async fn run_workflow_task(inner: Arc<Inner>, task: WorkflowTask, abandon: CancellationToken) {
    let Some(workflow) = inner.workflows.get(&task.workflow).cloned() else {
        tracing::error!(job_id = %task.job_id, workflow = %task.workflow, "a workflow task for a workflow this worker does not run");
        return;
    };
    let (job_id, lease_token, read_version) = (task.job_id, task.lease_token, task.read_version);
    let since = task.since_arrival;
    let mut answer = inner.runs.advance(workflow.clone(), task).await;
    if matches!(answer, Answer::NeedsHistory) {
        // Sticky task, but the run is not kept here (dropped, or this worker restarted).
        tracing::debug!(%job_id, ?since, "workflow run not kept here: fetching its whole history");
        let path = format!("/v1/worker/workflow-tasks/{job_id}/history");
        let full = inner
            .transport
            .call::<_, WorkflowTask>(
                Repeat::Safe,
                Method::POST,
                &path,
                &[],
                Some(&WorkflowHistoryRequest { lease_token }),
                Duration::from_secs(30),
            )
            .await;
        match full {
            Ok(full) => answer = inner.runs.advance(workflow, full.body).await,
            Err(e) => {
                // Harmless: the task is handed out again when its lease expires.
                tracing::warn!(%job_id, error = %e, "workflow history not read; the task is left to its lease");
                return;
            }
        }
    }
    let Answer::Decided {
        commands,
        sticky_horizon,
    } = answer
    else {
        tracing::warn!(%job_id, "workflow task not replayed; it is left to its lease");
        return;
    };
    let body = CompleteWorkflowTaskRequest {
        lease_token,
        read_version,
        commands,
        sticky_horizon,
    };
    let path = format!("/v1/worker/workflow-tasks/{job_id}/complete");
    let give_up = tokio::time::Instant::now() + WORKFLOW_TASK_PATIENCE;
    let mut backoff = Duration::from_millis(100);
    loop {
        match inner
            .transport
            .call::<_, CompleteWorkflowTaskResponse>(
                Repeat::Safe,
                Method::POST,
                &path,
                &[],
                Some(&body),
                Duration::from_secs(30),
            )
            .await
        {
            Ok(answer) => {
                tracing::debug!(%job_id, commands = body.commands.len(), outcome = %answer.body.outcome, "workflow task completed");
                if answer.body.outcome == "applied" {
                    inner.stats.workflow_tasks.fetch_add(1, Ordering::Relaxed);
                    let returned = body.commands.iter().any(|c| {
                        matches!(
                            c,
                            WorkflowCommand::CompleteJob { .. } | WorkflowCommand::FailJob { .. }
                        )
                    });
                    if returned {
                        inner
                            .stats
                            .workflows_returned
                            .fetch_add(1, Ordering::Relaxed);
                    }
                } else if sticky_horizon.is_some() {
                    inner.runs.forget(job_id);
                }
                return;
            }
            Err(e)
                if e.is_transient()
                    && !abandon.is_cancelled()
                    && tokio::time::Instant::now() + backoff < give_up =>
            {
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = abandon.cancelled() => {
                        inner.runs.forget(job_id);
                        return;
                    }
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            Err(e) => {
                // Harmless: the task is handed out again when its lease expires. Whether
                // it applied is unknown, so the kept run may not match the history.
                inner.runs.forget(job_id);
                tracing::warn!(%job_id, error = %e, "workflow task not applied; it is left to its lease");
                return;
            }
        }
    }
}

/// Renews the lease at a third of the heartbeat timeout while the handler runs.
async fn heartbeat_loop(
    ctx: ActivityContext,
    finished: CancellationToken,
    abandon: CancellationToken,
) {
    let task = ctx.task();
    let timeout_ms = task
        .heartbeat_timeout_ms
        .or(task.start_to_close_timeout_ms)
        .unwrap_or(30_000);
    let every = Duration::from_millis((timeout_ms / 3).max(50));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = finished.cancelled() => return,
            _ = abandon.cancelled() => return,
        }
        match ctx.send_heartbeat(None).await {
            Ok(Some(StopReason::LeaseLost)) => {
                tracing::warn!(attempt_id = %task.attempt_id, job_id = %task.job_id, "lease lost: the handler is told to stop");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(attempt_id = %task.attempt_id, error = %e, "heartbeat failed; will retry")
            }
        }
    }
}
