//! `onceflow bench`: throughput and latency of the engine as a client and a worker see
//! them (over HTTP, with the SDK), next to the floor of the same SQL shape run bare.
//!
//! Every workload prints exactly one machine-readable line to stdout,
//! `RESULT workload=<w> store=<s> jobs=<n> seconds=<s> rate=<per s> [key=value …]`, and a
//! short human summary to stderr. Each run has a fresh run id, put into every idempotency
//! key, activity name and task queue, so runs on one database never collide and the
//! workers of one run (or one workload) never take another's tasks.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use onceflow_protocol::api::{
    HeartbeatRequest, HeartbeatResponse, JobRequestBody, PollRequest, PollResponse, ProviderPair,
};
use onceflow_protocol::workflow::Task;
use onceflow_worker::{
    ActivityContext, ActivityError, ActivityOptions, Client, JobStatus, SdkError, SecretToken,
    Worker,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::{ConnectOptions, Row};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::DatabaseArgs;
use crate::http::ServerConfig;
use crate::model::Role;

/// The provider name every bench activity is served by.
const PROVIDER: &str = "noop";
/// Jobs of the latency workload (or `--jobs` if smaller).
const LATENCY_JOBS: u64 = 200;
/// A run fails when the worker makes no progress for this long.
const STALL: Duration = Duration::from_secs(60);

/// What `onceflow bench` measures.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Submit over HTTP and run with one SDK worker, until every job succeeded.
    E2e,
    /// Submissions only (distinct keys), no worker.
    Submit,
    /// Every key submitted twice concurrently: one job per key.
    Dedup,
    /// One job at a time on an idle engine: submit→start and submit→succeeded.
    Latency,
    /// PostgreSQL only: the bare SQL of a job's life (insert, claim, CAS) on a scratch table.
    Floor,
    /// Heartbeats over HTTP: --concurrency attempts held, each renewed in a loop by a
    /// caller of its own, --jobs heartbeats in all (not part of `all`).
    Heartbeat,
    /// floor, submit, dedup, e2e, latency, then the e2e/floor ratio.
    All,
}

/// `onceflow bench`: measure the engine (in-process server, or a running one with --url).
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Benchmark the server at this URL instead of starting one in-process (needs
    /// --client-token and --worker-token; --database-url is then only used by floor and
    /// --history).
    #[arg(long)]
    url: Option<String>,
    /// With --url: a client token of that server.
    #[arg(long)]
    client_token: Option<SecretToken>,
    /// With --url: a worker token of that server (owner `*` or the client's owner).
    #[arg(long)]
    worker_token: Option<SecretToken>,
    /// Which workload to run.
    #[arg(long, value_enum, default_value_t = Workload::All)]
    workload: Workload,
    /// Jobs per workload.
    #[arg(long, default_value_t = 10_000)]
    jobs: u64,
    /// Concurrent producers (and the worker's concurrent attempts, and floor connections).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Pre-fill this many finished jobs (owner `bench_history`) before the workloads.
    #[arg(long, default_value_t = 0)]
    history: u64,
    /// Run e2e's SDK worker in a process of its own (this binary, re-run), as a user
    /// runs one, and report that process's peak memory as `worker_peak_rss_mb`.
    #[arg(long)]
    worker_process: bool,
}

/// `onceflow bench-worker`: the no-op SDK worker of `--worker-process`. It prints
/// `won=N` whenever its count of won results changes, stops when its standard input
/// closes, and then prints `peak_rss_mb=X`.
#[derive(Args, Debug)]
pub struct BenchWorkerArgs {
    /// The server.
    #[arg(long)]
    url: String,
    /// A worker token of that server.
    #[arg(long)]
    worker_token: SecretToken,
    /// The worker's name.
    #[arg(long)]
    worker_id: String,
    /// The task queue to poll.
    #[arg(long)]
    task_queue: String,
    /// The activity the no-op provider serves.
    #[arg(long)]
    activity: String,
    /// The most attempts at once.
    #[arg(long)]
    concurrency: usize,
}

/// The output of the no-op provider.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Noop {
    /// Always `true`.
    pub ok: bool,
}

/// The names a workload uses: its own activity, task queue and key prefix.
#[derive(Debug, Clone)]
struct Names {
    workload: &'static str,
    activity: String,
    queue: String,
    key_prefix: String,
}

/// The server in-process, when there is no --url.
struct LocalServer {
    shutdown: CancellationToken,
    handle: JoinHandle<std::io::Result<()>>,
}

impl LocalServer {
    async fn stop(self) -> Result<(), String> {
        self.shutdown.cancel();
        match tokio::time::timeout(Duration::from_secs(15), self.handle).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(format!("the in-process server failed: {e}")),
            Ok(Err(e)) => Err(format!("the in-process server task failed: {e}")),
            Err(_) => Err("the in-process server did not stop within 15 s".to_owned()),
        }
    }
}

struct Bench {
    url: String,
    client_token: String,
    worker_token: String,
    store: &'static str,
    database_url: Option<String>,
    run_id: String,
    jobs: u64,
    concurrency: usize,
    worker_process: bool,
    http: reqwest::Client,
}

type WorkerTask = JoinHandle<Result<(), SdkError>>;

/// Runs `onceflow bench`.
pub async fn run(args: BenchArgs) -> Result<(), String> {
    if args.jobs == 0 {
        return Err("--jobs must be at least 1".to_owned());
    }
    if args.concurrency == 0 {
        return Err("--concurrency must be at least 1".to_owned());
    }
    let run_id: String = Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(12)
        .collect();
    // The SDK's client (system roots plus ONCEFLOW_CA_CERT), so `--url https://…` works.
    let http = onceflow_worker::http_client_from_env().map_err(|e| e.to_string())?;

    let (bench, server) = match args.url.clone() {
        None => {
            let database_url = super::database_url(&args.database)?;
            let max_connections = (args.concurrency as u32).saturating_mul(2).max(20);
            let engine = super::connect(&args.database, max_connections).await?;
            engine
                .migrate()
                .await
                .map_err(|e| format!("migration failed: {e:?}"))?;
            let store = store_of(&database_url);
            if args.history > 0 {
                history(&database_url, store, &run_id, args.history).await?;
            }
            let client_token = engine
                .create_token("bench", Role::Client)
                .await
                .map_err(|e| e.to_string())?
                .token;
            let worker_token = engine
                .create_token("*", Role::Worker)
                .await
                .map_err(|e| e.to_string())?
                .token;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            let config = ServerConfig {
                bind: addr,
                ..ServerConfig::default()
            };
            let shutdown = CancellationToken::new();
            let handle = tokio::spawn(crate::http::serve_on(
                listener,
                engine,
                config,
                shutdown.clone(),
            ));
            let url = format!("http://{addr}");
            eprintln!("bench {run_id}: {store} store, in-process server at {url}");
            let bench = Bench {
                url,
                client_token,
                worker_token,
                store,
                database_url: Some(database_url),
                run_id,
                jobs: args.jobs,
                concurrency: args.concurrency,
                worker_process: args.worker_process,
                http,
            };
            (bench, Some(LocalServer { shutdown, handle }))
        }
        Some(url) => {
            let client_token = args
                .client_token
                .as_ref()
                .map(|t| t.expose().to_owned())
                .ok_or("--url needs --client-token")?;
            let worker_token = args
                .worker_token
                .as_ref()
                .map(|t| t.expose().to_owned())
                .ok_or("--url needs --worker-token")?;
            let database_url = super::database_url(&args.database).ok();
            let store = database_url.as_deref().map(store_of).unwrap_or("unknown");
            if args.history > 0 {
                let db = database_url
                    .as_deref()
                    .ok_or("--history needs --database-url (the server's database)")?;
                history(db, store, &run_id, args.history).await?;
            }
            let url = url.trim_end_matches('/').to_owned();
            eprintln!("bench {run_id}: server at {url} ({store} store)");
            let bench = Bench {
                url,
                client_token,
                worker_token,
                store,
                database_url,
                run_id,
                jobs: args.jobs,
                concurrency: args.concurrency,
                worker_process: args.worker_process,
                http,
            };
            (bench, None)
        }
    };
    if std::env::var_os("RUST_LOG").is_none() {
        eprintln!(
            "bench: logging at info (every attempt logs a line); RUST_LOG=warn measures without it"
        );
    }

    let outcome = bench.workloads(args.workload).await;
    let stopped = match server {
        Some(server) => server.stop().await,
        None => Ok(()),
    };
    outcome?;
    stopped
}

fn store_of(database_url: &str) -> &'static str {
    if database_url.starts_with("postgres://") || database_url.starts_with("postgresql://") {
        "postgres"
    } else if database_url.starts_with("sqlite:") {
        "sqlite"
    } else {
        "unknown"
    }
}

impl Bench {
    async fn workloads(&self, workload: Workload) -> Result<(), String> {
        let order: &[Workload] = match workload {
            Workload::All => &[
                Workload::Floor,
                Workload::Submit,
                Workload::Dedup,
                Workload::E2e,
                Workload::Latency,
            ],
            Workload::E2e => &[Workload::E2e],
            Workload::Submit => &[Workload::Submit],
            Workload::Dedup => &[Workload::Dedup],
            Workload::Latency => &[Workload::Latency],
            Workload::Floor => &[Workload::Floor],
            Workload::Heartbeat => &[Workload::Heartbeat],
        };
        let mut floor_rate = None;
        let mut e2e_rate = None;
        for w in order {
            match w {
                Workload::Floor => floor_rate = self.floor().await?,
                Workload::Submit => self.submit().await?,
                Workload::Dedup => self.dedup().await?,
                Workload::E2e => e2e_rate = Some(self.e2e().await?),
                Workload::Latency => self.latency().await?,
                Workload::Heartbeat => self.heartbeat().await?,
                Workload::All => {}
            }
        }
        if workload == Workload::All {
            if let (Some(e2e), Some(floor)) = (e2e_rate, floor_rate) {
                println!("RESULT workload=ratio e2e_over_floor={:.3}", e2e / floor);
                eprintln!(
                    "bench ratio: end to end runs at {:.1}% of the SQL floor",
                    100.0 * e2e / floor
                );
            }
        }
        Ok(())
    }

    fn names(&self, workload: &'static str) -> Names {
        Names {
            workload,
            activity: format!("bench_noop_{}_{workload}", self.run_id),
            queue: format!("bench_{}_{workload}", self.run_id),
            key_prefix: format!("bench-{}-{workload}-", self.run_id),
        }
    }

    fn client(&self) -> Result<Client, String> {
        Client::new(self.url.clone(), self.client_token.clone())
            .map_err(|e| format!("cannot build the client: {e}"))
    }

    /// Prints the RESULT line; returns the rate.
    fn result(&self, workload: &str, jobs: u64, elapsed: Duration, extra: &str) -> f64 {
        let seconds = elapsed.as_secs_f64();
        let rate = jobs as f64 / seconds.max(1e-9);
        println!(
            "RESULT workload={workload} store={} jobs={jobs} seconds={seconds:.3} rate={rate:.1} threads={}{extra}",
            self.store,
            runtime_threads()
        );
        rate
    }

    /// `submits` submissions by `concurrency` producers; submission `i` uses key
    /// `i / per_key`, so consecutive submissions of one key run at the same time on two
    /// producers. Returns (created, replayed).
    async fn produce(
        &self,
        names: &Names,
        submits: u64,
        per_key: u64,
    ) -> Result<(u64, u64), String> {
        let client = self.client()?;
        let next = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let created = Arc::new(AtomicU64::new(0));
        let replayed = Arc::new(AtomicU64::new(0));
        let mut producers = Vec::with_capacity(self.concurrency);
        for _ in 0..self.concurrency {
            let (client, names, next, stop, created, replayed) = (
                client.clone(),
                names.clone(),
                next.clone(),
                stop.clone(),
                created.clone(),
                replayed.clone(),
            );
            producers.push(tokio::spawn(async move {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= submits {
                        return Ok(());
                    }
                    let k = i / per_key;
                    let key = format!("{}{k}", names.key_prefix);
                    match client.submit(&key, &job_body(&names, k)).await {
                        Ok(answer) if answer.replayed => replayed.fetch_add(1, Ordering::Relaxed),
                        Ok(_) => created.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            return Err(format!("submitting `{key}` failed: {e}"));
                        }
                    };
                }
            }));
        }
        let mut first_error = None;
        for producer in producers {
            let outcome = match producer.await {
                Ok(outcome) => outcome,
                Err(e) => Err(format!("a producer task failed: {e}")),
            };
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok((
                created.load(Ordering::Relaxed),
                replayed.load(Ordering::Relaxed),
            )),
        }
    }

    /// Counts the jobs of `names.activity` (in `status`, if given) whose key is one of
    /// the first `keys` keys of the workload, paging through `GET /v1/jobs`. Returns
    /// (matching, listed).
    async fn count_jobs(
        &self,
        names: &Names,
        status: Option<&str>,
        keys: u64,
    ) -> Result<(u64, u64), String> {
        let mut matching = HashSet::new();
        let mut listed = 0u64;
        let mut after: Option<String> = None;
        loop {
            let mut query = vec![
                ("activity", names.activity.clone()),
                ("limit", "500".to_owned()),
            ];
            if let Some(status) = status {
                query.push(("status", status.to_owned()));
            }
            if let Some(after) = &after {
                query.push(("after", after.clone()));
            }
            let query =
                serde_urlencoded::to_string(&query).map_err(|e| format!("list query: {e}"))?;
            let url = format!("{}/v1/jobs?{query}", self.url);
            let response = self
                .http
                .get(&url)
                .bearer_auth(&self.client_token)
                .timeout(Duration::from_secs(60))
                .send()
                .await
                .map_err(|e| format!("cannot list jobs at {url}: {e}"))?;
            let code = response.status();
            let body: Value = response
                .json()
                .await
                .map_err(|e| format!("listing jobs answered {code} without JSON: {e}"))?;
            if !code.is_success() {
                return Err(format!("listing jobs answered {code}: {body}"));
            }
            let jobs = body["jobs"]
                .as_array()
                .ok_or_else(|| format!("listing jobs: no `jobs` in {body}"))?;
            for job in jobs {
                listed += 1;
                let key = job["idempotency_key"].as_str().unwrap_or_default();
                let ours = key
                    .strip_prefix(&names.key_prefix)
                    .and_then(|k| k.parse::<u64>().ok())
                    .is_some_and(|k| k < keys);
                if ours {
                    matching.insert(job["id"].as_str().unwrap_or(key).to_owned());
                }
            }
            match body["next"].as_str() {
                Some(next) if !jobs.is_empty() => after = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok((matching.len() as u64, listed))
    }

    async fn submit(&self) -> Result<(), String> {
        let names = self.names("submit");
        let n = self.jobs;
        let start = Instant::now();
        let (created, replayed) = self.produce(&names, n, 1).await?;
        let elapsed = start.elapsed();
        if created != n || replayed != 0 {
            return Err(format!(
                "submit: expected {n} new jobs, got {created} created and {replayed} replayed"
            ));
        }
        let rate = self.result("submit", n, elapsed, "");
        eprintln!(
            "bench submit: {n} submissions (distinct keys) by {} producers in {:.3} s: {rate:.1}/s",
            self.concurrency,
            elapsed.as_secs_f64()
        );
        Ok(())
    }

    async fn dedup(&self) -> Result<(), String> {
        let names = self.names("dedup");
        let keys = (self.jobs / 2).max(1);
        let submits = keys * 2;
        let batches_before = self.batch_totals().await;
        let start = Instant::now();
        let (created, replayed) = self.produce(&names, submits, 2).await?;
        let elapsed = start.elapsed();
        let batches = batch_report(&batches_before, &self.batch_totals().await);
        let (jobs, listed) = self.count_jobs(&names, None, keys).await?;
        if jobs != keys || listed != keys || created != keys || replayed != keys {
            return Err(format!(
                "dedup: {keys} keys submitted twice each should make {keys} jobs; found {jobs} of this run ({listed} listed), \
                 answers: {created} created, {replayed} replayed"
            ));
        }
        let rate = self.result(
            "dedup",
            submits,
            elapsed,
            &format!(" jobs_created={jobs}{batches}"),
        );
        eprintln!(
            "bench dedup: {submits} submissions of {keys} keys (each twice, concurrently) by {} producers in {:.3} s: \
             {rate:.1} submissions/s; {jobs} jobs exist ({created} created, {replayed} replayed)",
            self.concurrency,
            elapsed.as_secs_f64()
        );
        Ok(())
    }

    async fn e2e(&self) -> Result<f64, String> {
        let names = self.names("e2e");
        let mut worker = if self.worker_process {
            E2eWorker::Process(Box::new(WorkerProcess::spawn(self, &names)?))
        } else {
            let (worker, task) = self.start_worker(&names, self.concurrency, None)?;
            E2eWorker::InProcess(worker, task)
        };
        let measured = self.e2e_measure(&names, &mut worker).await;
        let described = worker.describe();
        let stopped = worker.stop().await;
        let (elapsed, verified, batches) = measured?;
        let worker_rss = stopped?;
        let n = self.jobs;
        // This process: the server (unless --url), the producers and, unless
        // --worker-process, the worker too.
        let mut extra = peak_rss_mb()
            .map(|mb| format!(" peak_rss_mb={mb:.1}"))
            .unwrap_or_default();
        if let Some(mb) = worker_rss {
            extra.push_str(&format!(" worker_peak_rss_mb={mb:.1}"));
        }
        // Mean calls per flush of each natural batcher during the run.
        extra.push_str(&batches);
        let rate = self.result("e2e", n, elapsed, &extra);
        eprintln!(
            "bench e2e: {n} jobs submitted over HTTP by {} producers and run by one SDK worker (max {} attempts) \
             in {:.3} s: {rate:.1} jobs/s; {verified} verified succeeded; worker {described}",
            self.concurrency,
            self.concurrency,
            elapsed.as_secs_f64(),
        );
        Ok(rate)
    }

    async fn e2e_measure(
        &self,
        names: &Names,
        worker: &mut E2eWorker,
    ) -> Result<(Duration, u64, String), String> {
        let n = self.jobs;
        // One job first, so that the worker has registered its contract and is polling.
        submit_warm_up(&self.client()?, names).await?;
        worker.wait_won(1).await?;
        let baseline = worker.won();
        let batches_before = self.batch_totals().await;
        let start = Instant::now();
        let (_, done) = tokio::try_join!(self.produce(names, n, 1), worker.wait_won(baseline + n))?;
        let elapsed = done.saturating_duration_since(start);
        let batches_after = self.batch_totals().await;
        let (succeeded, listed) = self.count_jobs(names, Some("succeeded"), n).await?;
        if succeeded != n {
            return Err(format!(
                "e2e: expected {n} succeeded jobs of this run, found {succeeded} ({listed} listed)"
            ));
        }
        Ok((
            elapsed,
            succeeded,
            batch_report(&batches_before, &batches_after),
        ))
    }

    /// Holds `--concurrency` attempts (claimed over HTTP, as a worker would) and renews
    /// their leases: one caller per attempt, each heartbeating in a loop, `--jobs`
    /// heartbeats in all, every one answered `200` without `cancel_requested`.
    async fn heartbeat(&self) -> Result<(), String> {
        let names = self.names("heartbeat");
        let held = self.concurrency;
        let (created, _) = self.produce(&names, held as u64, 1).await?;
        if created != held as u64 {
            return Err(format!(
                "heartbeat: expected {held} new jobs, {created} were created"
            ));
        }
        let mut tasks = Vec::with_capacity(held);
        let deadline = Instant::now() + STALL;
        while tasks.len() < held {
            if Instant::now() > deadline {
                return Err(format!(
                    "heartbeat: only {} of {held} attempts were handed out",
                    tasks.len()
                ));
            }
            let poll = PollRequest {
                worker_id: format!("bench-{}-heartbeat", self.run_id),
                task_queue: names.queue.clone(),
                workflows: Vec::new(),
                providers: vec![ProviderPair {
                    activity: names.activity.clone(),
                    provider: PROVIDER.to_owned(),
                }],
                max_tasks: (held - tasks.len()).min(100) as u32,
                wait_ms: 1_000,
                completions: Vec::new(),
            };
            let answer: PollResponse = self.worker_call("/v1/worker/poll", &poll).await?;
            tasks.extend(answer.tasks.into_iter().filter_map(|t| match t {
                Task::Activity(task) => Some(task),
                Task::Workflow(_) => None,
            }));
        }
        let batches_before = self.batch_totals().await;
        let next = Arc::new(AtomicU64::new(0));
        let n = self.jobs;
        let start = Instant::now();
        let callers = tasks.into_iter().map(|task| {
            let next = next.clone();
            async move {
                let path = format!("/v1/worker/attempts/{}/heartbeat", task.attempt_id);
                let body = HeartbeatRequest {
                    lease_token: task.lease_token,
                    details: None,
                };
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    let ack: HeartbeatResponse = self.worker_call(&path, &body).await?;
                    if ack.cancel_requested {
                        return Err(format!(
                            "heartbeat: attempt {} answered cancel_requested",
                            task.attempt_id
                        ));
                    }
                }
                Ok::<(), String>(())
            }
        });
        futures::future::try_join_all(callers).await?;
        let elapsed = start.elapsed();
        let batches = batch_report(&batches_before, &self.batch_totals().await);
        let rate = self.result(
            "heartbeat",
            n,
            elapsed,
            &format!(" attempts={held}{batches}"),
        );
        eprintln!(
            "bench heartbeat: {n} heartbeats over HTTP renewing {held} held attempts (one caller each) in {:.3} s: {rate:.1}/s",
            elapsed.as_secs_f64()
        );
        Ok(())
    }

    /// A worker endpoint called with the worker token; any answer but `200` fails the run.
    async fn worker_call<B: Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, String> {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.worker_token)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(format!("POST {path}: {status}: {text}"));
        }
        response
            .json::<T>()
            .await
            .map_err(|e| format!("POST {path}: unreadable answer: {e}"))
    }

    /// From the server's metrics: per natural batcher, the items and flushes so far.
    async fn batch_totals(&self) -> BatchTotals {
        let mut totals = std::collections::BTreeMap::new();
        let Ok(response) = self.http.get(format!("{}/metrics", self.url)).send().await else {
            return totals;
        };
        let Ok(text) = response.text().await else {
            return totals;
        };
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("onceflow_batch_items_") else {
                continue;
            };
            let (Some((series, value)), Some(kind)) =
                (rest.split_once(' '), rest.split('"').nth(1))
            else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let entry: &mut (f64, f64) = totals.entry(kind.to_owned()).or_default();
            if series.starts_with("sum{") {
                entry.0 = value;
            } else if series.starts_with("count{") {
                entry.1 = value;
            }
        }
        totals
    }

    /// One job, so that the worker has registered its contract and is polling.
    async fn warm_up(
        &self,
        client: &Client,
        names: &Names,
        worker: &Worker,
        task: &WorkerTask,
    ) -> Result<(), String> {
        submit_warm_up(client, names).await?;
        wait_won(worker, task, 1, Duration::from_millis(5)).await?;
        Ok(())
    }

    fn start_worker(
        &self,
        names: &Names,
        max_concurrent: usize,
        probe: Option<mpsc::UnboundedSender<(Uuid, Instant)>>,
    ) -> Result<(Arc<Worker>, WorkerTask), String> {
        let worker = Worker::builder(self.url.clone(), self.worker_token.clone())
            .worker_id(format!("bench-{}-{}", self.run_id, names.workload))
            .task_queue(names.queue.clone())
            .max_concurrent_attempts(max_concurrent)
            .poll_wait(Duration::from_secs(1))
            .shutdown_grace(Duration::from_secs(10))
            .provider(
                &names.activity,
                PROVIDER,
                move |ctx: ActivityContext, _input: Value| {
                    let probe = probe.clone();
                    async move {
                        if let Some(probe) = probe {
                            let _ = probe.send((ctx.job_id(), Instant::now()));
                        }
                        Ok::<_, ActivityError>(Noop { ok: true })
                    }
                },
            )
            .build()
            .map_err(|e| format!("cannot build the worker: {e}"))?;
        let worker = Arc::new(worker);
        let running = worker.clone();
        let task = tokio::spawn(async move { running.run().await });
        Ok((worker, task))
    }

    async fn latency(&self) -> Result<(), String> {
        let names = self.names("latency");
        let (probe, starts) = mpsc::unbounded_channel();
        let (worker, task) = self.start_worker(&names, 1, Some(probe))?;
        let measured = self.latency_measure(&names, &worker, &task, starts).await;
        let stopped = stop_worker(&worker, task).await;
        let (n, elapsed, mut start_ms, mut done_ms) = measured?;
        stopped?;
        start_ms.sort_by(f64::total_cmp);
        done_ms.sort_by(f64::total_cmp);
        let (p50s, p99s, p50d, p99d) = (
            percentile(&start_ms, 50.0),
            percentile(&start_ms, 99.0),
            percentile(&done_ms, 50.0),
            percentile(&done_ms, 99.0),
        );
        self.result(
            "latency",
            n,
            elapsed,
            &format!(" p50_start_ms={p50s:.3} p99_start_ms={p99s:.3} p50_done_ms={p50d:.3} p99_done_ms={p99d:.3}"),
        );
        eprintln!(
            "bench latency: {n} jobs one at a time, one worker: submit→started p50 {p50s:.3} ms p99 {p99s:.3} ms, \
             submit→succeeded p50 {p50d:.3} ms p99 {p99d:.3} ms"
        );
        Ok(())
    }

    async fn latency_measure(
        &self,
        names: &Names,
        worker: &Arc<Worker>,
        task: &WorkerTask,
        mut starts: mpsc::UnboundedReceiver<(Uuid, Instant)>,
    ) -> Result<(u64, Duration, Vec<f64>, Vec<f64>), String> {
        let n = self.jobs.min(LATENCY_JOBS);
        let client = self.client()?;
        self.warm_up(&client, names, worker, task).await?;
        while starts.try_recv().is_ok() {}
        let baseline = worker.stats().won;
        let mut start_ms = Vec::with_capacity(n as usize);
        let mut done_ms = Vec::with_capacity(n as usize);
        let begin = Instant::now();
        for i in 0..n {
            let key = format!("{}{i}", names.key_prefix);
            let t0 = Instant::now();
            let job_id = client
                .submit(&key, &job_body(names, i))
                .await
                .map_err(|e| format!("submitting `{key}` failed: {e}"))?
                .job
                .id;
            let started = loop {
                match tokio::time::timeout(Duration::from_secs(30), starts.recv()).await {
                    Ok(Some((id, at))) if id == job_id => break at,
                    Ok(Some(_)) => continue,
                    Ok(None) => {
                        return Err("latency: the worker's handler channel closed".to_owned())
                    }
                    Err(_) => {
                        return Err(format!(
                            "latency: job {job_id} did not start within 30 s; worker {:?}",
                            worker.stats()
                        ))
                    }
                }
            };
            // The worker counts a win once the engine answered its completion, i.e. once
            // the job is committed `succeeded`; watched every 50 µs off the runtime.
            let done = wait_won_precise(worker.clone(), baseline + i + 1).await?;
            let job = client
                .job(job_id)
                .await
                .map_err(|e| format!("reading job {job_id} failed: {e}"))?;
            if job.status != JobStatus::Succeeded {
                return Err(format!(
                    "latency: job {job_id} is {:?} after its attempt won",
                    job.status
                ));
            }
            start_ms.push(started.saturating_duration_since(t0).as_secs_f64() * 1000.0);
            done_ms.push(done.saturating_duration_since(t0).as_secs_f64() * 1000.0);
        }
        Ok((n, begin.elapsed(), start_ms, done_ms))
    }

    /// The SQL floor; `None` when skipped.
    async fn floor(&self) -> Result<Option<f64>, String> {
        let Some(database_url) = self.database_url.as_deref() else {
            println!(
                "RESULT workload=floor store={} skipped=no_database_url",
                self.store
            );
            return Ok(None);
        };
        if self.store != "postgres" {
            println!(
                "RESULT workload=floor store={} skipped=not_postgres",
                self.store
            );
            eprintln!("bench floor: skipped (PostgreSQL only)");
            return Ok(None);
        }
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(self.concurrency as u32)
            .acquire_timeout(Duration::from_secs(30))
            .connect(database_url)
            .await
            .map_err(|e| format!("floor: cannot connect to the database: {e}"))?;
        let table = format!("bench_floor_{}", self.run_id);
        let measured = self.floor_measure(&pool, &table).await;
        let dropped = sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
            .execute(&pool)
            .await;
        pool.close().await;
        let (elapsed, misses, cas_failures) = measured?;
        dropped.map_err(|e| format!("floor: cannot drop {table}: {e}"))?;
        let n = self.jobs;
        let rate = self.result("floor", n, elapsed, "");
        eprintln!(
            "bench floor: {n} bare job cycles (insert, claim with SKIP LOCKED, CAS; autocommit) on {} connections in {:.3} s: \
             {rate:.1}/s ({misses} empty claims retried, {cas_failures} CAS misses)",
            self.concurrency,
            elapsed.as_secs_f64()
        );
        Ok(Some(rate))
    }

    /// Returns (elapsed, empty claims, failed CAS).
    async fn floor_measure(
        &self,
        pool: &sqlx::PgPool,
        table: &str,
    ) -> Result<(Duration, u64, u64), String> {
        let create = [
            format!(
                "CREATE TABLE {table} (
                     owner_id TEXT NOT NULL, id UUID PRIMARY KEY, idempotency_key TEXT NOT NULL,
                     status TEXT NOT NULL, version BIGINT NOT NULL, lease_token UUID, result JSONB,
                     UNIQUE (owner_id, idempotency_key))"
            ),
            format!("CREATE INDEX {table}_scheduled ON {table} (id) WHERE status = 'scheduled'"),
        ];
        for statement in &create {
            sqlx::query(statement)
                .execute(pool)
                .await
                .map_err(|e| format!("floor: cannot create {table}: {e}"))?;
        }
        let insert = Arc::new(format!(
            "INSERT INTO {table} (owner_id, id, idempotency_key, status, version) VALUES ($1, $2, $3, 'scheduled', 1)
             ON CONFLICT (owner_id, idempotency_key) DO NOTHING"
        ));
        let claim = Arc::new(format!(
            "UPDATE {table} SET status = 'started', lease_token = gen_random_uuid()
             WHERE id = (SELECT id FROM {table} WHERE status = 'scheduled' LIMIT 1 FOR UPDATE SKIP LOCKED)
             RETURNING id, version"
        ));
        let cas = Arc::new(format!(
            "UPDATE {table} SET status = 'succeeded', result = $3, version = version + 1 WHERE id = $1 AND version = $2"
        ));
        // Every connection is open before the clock starts.
        let mut connections = Vec::with_capacity(self.concurrency);
        for _ in 0..self.concurrency {
            connections.push(
                pool.acquire()
                    .await
                    .map_err(|e| format!("floor: cannot open a connection: {e}"))?,
            );
        }
        let n = self.jobs;
        let next = Arc::new(AtomicU64::new(0));
        let misses = Arc::new(AtomicU64::new(0));
        let cas_failures = Arc::new(AtomicU64::new(0));
        let key_prefix = format!("floor-{}-", self.run_id);
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(self.concurrency);
        for mut connection in connections {
            let (insert, claim, cas, next, misses, cas_failures, key_prefix) = (
                insert.clone(),
                claim.clone(),
                cas.clone(),
                next.clone(),
                misses.clone(),
                cas_failures.clone(),
                key_prefix.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let result = json!({ "ok": true });
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<(), String>(());
                    }
                    sqlx::query(&insert)
                        .bind("bench")
                        .bind(Uuid::now_v7())
                        .bind(format!("{key_prefix}{i}"))
                        .execute(&mut *connection)
                        .await
                        .map_err(|e| format!("floor insert: {e}"))?;
                    let mut claimed = None;
                    for _ in 0..10 {
                        claimed = sqlx::query(&claim)
                            .fetch_optional(&mut *connection)
                            .await
                            .map_err(|e| format!("floor claim: {e}"))?;
                        if claimed.is_some() {
                            break;
                        }
                        misses.fetch_add(1, Ordering::Relaxed);
                        tokio::task::yield_now().await;
                    }
                    let Some(row) = claimed else { continue };
                    let id: Uuid = row.try_get("id").map_err(|e| format!("floor claim: {e}"))?;
                    let version: i64 = row
                        .try_get("version")
                        .map_err(|e| format!("floor claim: {e}"))?;
                    let done = sqlx::query(&cas)
                        .bind(id)
                        .bind(version)
                        .bind(&result)
                        .execute(&mut *connection)
                        .await
                        .map_err(|e| format!("floor CAS: {e}"))?;
                    if done.rows_affected() != 1 {
                        cas_failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        let mut first_error = None;
        for task in tasks {
            let outcome = match task.await {
                Ok(outcome) => outcome,
                Err(e) => Err(format!("a floor task failed: {e}")),
            };
            if let Err(e) = outcome {
                first_error.get_or_insert(e);
            }
        }
        let elapsed = start.elapsed();
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok((
            elapsed,
            misses.load(Ordering::Relaxed),
            cas_failures.load(Ordering::Relaxed),
        ))
    }
}

/// The SDK worker of e2e: in this process, or in a child process of its own.
enum E2eWorker {
    InProcess(Arc<Worker>, WorkerTask),
    Process(Box<WorkerProcess>),
}

impl E2eWorker {
    fn won(&self) -> u64 {
        match self {
            E2eWorker::InProcess(worker, _) => worker.stats().won,
            E2eWorker::Process(process) => process.won,
        }
    }

    /// Waits until the worker has won `target` results; returns when it saw it.
    async fn wait_won(&mut self, target: u64) -> Result<Instant, String> {
        match self {
            E2eWorker::InProcess(worker, task) => {
                wait_won(worker, task, target, Duration::from_millis(5)).await
            }
            E2eWorker::Process(process) => process.wait_won(target).await,
        }
    }

    fn describe(&self) -> String {
        match self {
            E2eWorker::InProcess(worker, _) => format!("{:?}", worker.stats()),
            E2eWorker::Process(process) => format!(
                "process {} (won {})",
                process.child.id().unwrap_or(0),
                process.won
            ),
        }
    }

    /// Stops the worker; a worker process answers its peak memory in MB.
    async fn stop(self) -> Result<Option<f64>, String> {
        match self {
            E2eWorker::InProcess(worker, task) => stop_worker(&worker, task).await.map(|()| None),
            E2eWorker::Process(process) => process.stop().await.map(Some),
        }
    }
}

/// `onceflow bench-worker` run as a child: its stdout reports progress, closing its
/// stdin stops it.
struct WorkerProcess {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    won: u64,
}

impl WorkerProcess {
    fn spawn(bench: &Bench, names: &Names) -> Result<WorkerProcess, String> {
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
        let mut child = tokio::process::Command::new(exe)
            .arg("bench-worker")
            .args(["--url", &bench.url, "--worker-token", &bench.worker_token])
            .args([
                "--worker-id",
                &format!("bench-{}-{}", bench.run_id, names.workload),
            ])
            .args(["--task-queue", &names.queue, "--activity", &names.activity])
            .args(["--concurrency", &bench.concurrency.to_string()])
            .args(["--threads", &runtime_threads().to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the worker process: {e}"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or("the worker process has no stdout")?;
        let lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        Ok(WorkerProcess {
            child,
            lines,
            won: 0,
        })
    }

    /// The next line of the child; an error when it ends or says nothing for [`STALL`].
    async fn next_line(&mut self) -> Result<String, String> {
        match tokio::time::timeout(STALL, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err(format!(
                "the worker process exited early (won {})",
                self.won
            )),
            Ok(Err(e)) => Err(format!("reading the worker process: {e}")),
            Err(_) => Err(format!(
                "no progress for {} s (the worker process won {})",
                STALL.as_secs(),
                self.won
            )),
        }
    }

    async fn wait_won(&mut self, target: u64) -> Result<Instant, String> {
        while self.won < target {
            let line = self.next_line().await?;
            if let Some(won) = line.strip_prefix("won=").and_then(|n| n.parse().ok()) {
                self.won = won;
            } else if let Some(error) = line.strip_prefix("error=") {
                return Err(format!("the worker process: {error}"));
            }
        }
        Ok(Instant::now())
    }

    async fn stop(mut self) -> Result<f64, String> {
        drop(self.child.stdin.take());
        loop {
            let line = self.next_line().await?;
            if let Some(mb) = line
                .strip_prefix("peak_rss_mb=")
                .and_then(|mb| mb.parse().ok())
            {
                let status = self
                    .child
                    .wait()
                    .await
                    .map_err(|e| format!("the worker process: {e}"))?;
                return if status.success() {
                    Ok(mb)
                } else {
                    Err(format!("the worker process exited with {status}"))
                };
            }
            if let Some(error) = line.strip_prefix("error=") {
                return Err(format!("the worker process: {error}"));
            }
        }
    }
}

/// Runs `onceflow bench-worker` (see [`BenchWorkerArgs`]).
pub async fn run_worker_process(args: BenchWorkerArgs) -> Result<(), String> {
    use std::io::Write;
    let worker = Worker::builder(args.url, args.worker_token.expose())
        .worker_id(args.worker_id)
        .task_queue(args.task_queue)
        .max_concurrent_attempts(args.concurrency.max(1))
        .poll_wait(Duration::from_secs(1))
        .shutdown_grace(Duration::from_secs(10))
        .provider(
            &args.activity,
            PROVIDER,
            |_ctx: ActivityContext, _input: Value| async move {
                Ok::<_, ActivityError>(Noop { ok: true })
            },
        )
        .build()
        .map_err(|e| format!("cannot build the worker: {e}"))?;
    let worker = Arc::new(worker);
    let task = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run().await })
    };
    // Standard input closing (the bench is done, or gone) is the signal to stop.
    let mut closed = tokio::spawn(async {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
    });
    let mut reported = 0;
    let mut out = std::io::stdout();
    loop {
        tokio::select! {
            _ = &mut closed => break,
            _ = tokio::time::sleep(Duration::from_millis(2)) => {}
        }
        let stats = worker.stats();
        if stats.panics > 0 || stats.contract_violations > 0 || stats.local_contract_violations > 0
        {
            let _ = writeln!(
                out,
                "error=the no-op provider did not succeed; worker {stats:?}"
            );
            break;
        }
        if task.is_finished() {
            let _ = writeln!(out, "error=the worker stopped early; worker {stats:?}");
            break;
        }
        if stats.won != reported {
            reported = stats.won;
            let _ = writeln!(out, "won={reported}");
            let _ = out.flush();
        }
    }
    let stopped = stop_worker(&worker, task).await;
    let _ = writeln!(out, "peak_rss_mb={:.1}", peak_rss_mb().unwrap_or(0.0));
    let _ = out.flush();
    stopped
}

/// Submits the warm-up job of a workload.
async fn submit_warm_up(client: &Client, names: &Names) -> Result<(), String> {
    let key = format!("{}warmup", names.key_prefix);
    client
        .submit(&key, &job_body(names, u64::MAX))
        .await
        .map_err(|e| format!("{}: the warm-up submission failed: {e}", names.workload))?;
    Ok(())
}

fn job_body(names: &Names, k: u64) -> JobRequestBody {
    JobRequestBody {
        workflow: None,
        activity: Some(names.activity.clone()),
        providers: Some(vec![PROVIDER.to_owned()]),
        input: Some(json!({ "n": k })),
        task_queue: Some(names.queue.clone()),
        options: None,
    }
}

/// Waits until the worker's won count reaches `target`, looking every `every`; fails
/// when the worker stops or makes no progress for [`STALL`]. Returns when it saw it.
async fn wait_won(
    worker: &Worker,
    task: &WorkerTask,
    target: u64,
    every: Duration,
) -> Result<Instant, String> {
    let mut last = worker.stats().won;
    let mut last_change = Instant::now();
    loop {
        let stats = worker.stats();
        if stats.won >= target {
            return Ok(Instant::now());
        }
        if task.is_finished() {
            return Err(format!(
                "the worker stopped early (won {} of {target}); worker {stats:?}",
                stats.won
            ));
        }
        if stats.panics > 0 || stats.contract_violations > 0 || stats.local_contract_violations > 0
        {
            return Err(format!(
                "the no-op provider did not succeed; worker {stats:?}"
            ));
        }
        if stats.won != last {
            last = stats.won;
            last_change = Instant::now();
        } else if last_change.elapsed() > STALL {
            return Err(format!(
                "no progress for {} s (won {} of {target}); worker {stats:?}",
                STALL.as_secs(),
                stats.won
            ));
        }
        tokio::time::sleep(every).await;
    }
}

/// [`wait_won`] for one latency sample: a blocking thread looks every 50 µs.
async fn wait_won_precise(worker: Arc<Worker>, target: u64) -> Result<Instant, String> {
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let stats = worker.stats();
            if stats.won >= target {
                return Ok(Instant::now());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "latency: the job did not succeed within 30 s; worker {stats:?}"
                ));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    })
    .await
    .map_err(|e| format!("latency: the watcher failed: {e}"))?
}

async fn stop_worker(worker: &Worker, task: WorkerTask) -> Result<(), String> {
    worker.shutdown_token().cancel();
    match tokio::time::timeout(Duration::from_secs(30), task).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(format!("the worker failed: {e}")),
        Ok(Err(e)) => Err(format!("the worker task failed: {e}")),
        Err(_) => Err("the worker did not stop within 30 s".to_owned()),
    }
}

/// The peak resident memory of this process in MB (`VmHWM`), where the system tells it.
/// The threads of the runtime the bench runs on (`--threads`); its worker process gets
/// as many.
fn runtime_threads() -> usize {
    tokio::runtime::Handle::try_current()
        .map(|h| h.metrics().num_workers())
        .unwrap_or(1)
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Pre-fills `rows` finished activity jobs (owner `bench_history`) with their activity,
/// winning attempt and five events, in bulk SQL, and prints the RESULT line.
async fn history(database_url: &str, store: &str, run_id: &str, rows: u64) -> Result<(), String> {
    let options = serde_json::to_string(&ActivityOptions::default())
        .map_err(|e| format!("history: options: {e}"))?;
    let run3: String = run_id.chars().take(3).collect();
    let key_prefix = format!("hist-{run_id}-");
    let rows_i64 = i64::try_from(rows).map_err(|_| "--history is too large".to_owned())?;
    let start = Instant::now();
    match store {
        "postgres" => {
            history_postgres(database_url, rows_i64, &run3, &key_prefix, &options).await?
        }
        "sqlite" => history_sqlite(database_url, rows_i64, &run3, &key_prefix, &options).await?,
        other => return Err(format!("--history: unknown store `{other}`")),
    }
    let elapsed = start.elapsed();
    println!(
        "RESULT workload=history rows={rows} seconds={:.3}",
        elapsed.as_secs_f64()
    );
    eprintln!(
        "bench history: {rows} finished jobs (with activity, winning attempt and events) of owner bench_history inserted in {:.3} s",
        elapsed.as_secs_f64()
    );
    Ok(())
}

async fn history_postgres(
    database_url: &str,
    rows: i64,
    run3: &str,
    key_prefix: &str,
    options: &str,
) -> Result<(), String> {
    // The bulk insert is slow on purpose: no slow-statement warning with the whole SQL.
    let connect = sqlx::postgres::PgConnectOptions::from_str(database_url)
        .map_err(|e| format!("history: {e}"))?
        .disable_statement_logging();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(connect)
        .await
        .map_err(|e| format!("history: cannot connect to the database: {e}"))?;
    // UUIDv7-shaped ids in the past (1 ms apart), so history sorts before the run's jobs;
    // the kind (job 001, activity 002, attempt 003) and the row number make them unique.
    let id = |kind: &str| {
        format!(
            "(lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7' || $2::text || '8{kind}' \
             || lpad(to_hex(i), 12, '0'))::uuid"
        )
    };
    let statement = format!(
        "WITH ids AS MATERIALIZED (
             SELECT i, at, {jid} AS jid, {aid} AS aid, {tid} AS tid
             FROM (SELECT i, now() - make_interval(secs => ($1::bigint - i + 1)::float8 / 1000.0) AS at
                   FROM generate_series(1::bigint, $1::bigint) AS i) s
         ), j AS (
             INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, status,
                               version, result, completed_by, created_at, updated_at, finished_at)
             SELECT 'bench_history', jid, $3::text || i, 'bench_history', 'activity', 'bench_history', 'bench_history',
                    jsonb_build_object('n', i), 'succeeded', 2, '{{\"ok\": true}}'::jsonb, tid, at, at, at
             FROM ids
         ), a AS (
             INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input, status,
                                     version, completed_by, result, created_at, updated_at, finished_at)
             SELECT 'bench_history', aid, jid, 0, 'bench_history', ARRAY['{PROVIDER}'], $4::text::jsonb, 'bench_history',
                    jsonb_build_object('n', i), 'succeeded', 1, tid, '{{\"ok\": true}}'::jsonb, at, at, at
             FROM ids
         ), e AS (
             -- The five events of a finished activity job, as the engine writes them.
             INSERT INTO job_events (owner_id, job_id, seq, at, type, attempt_id, actor, data)
             SELECT 'bench_history', jid, v.seq, at, v.type, CASE WHEN v.seq > 1 THEN tid END,
                    CASE WHEN v.seq <= 2 THEN 'client:bench_history' WHEN v.seq = 5 THEN 'engine' ELSE 'worker:bench_history' END,
                    CASE v.seq
                        WHEN 1 THEN jsonb_build_object('kind', 'activity', 'idempotency_key', $3::text || i)
                        WHEN 2 THEN jsonb_build_object('seq', 0, 'number', 1, 'reason', 'first', 'provider', '{PROVIDER}')
                        WHEN 3 THEN jsonb_build_object('number', 1, 'provider', '{PROVIDER}', 'lease_expires_at', at + interval '30 seconds')
                        WHEN 4 THEN jsonb_build_object('number', 1, 'provider', '{PROVIDER}')
                        ELSE jsonb_build_object('completed_by', tid)
                    END
             FROM ids CROSS JOIN (VALUES (1, 'job_created'), (2, 'attempt_scheduled'), (3, 'attempt_started'),
                                         (4, 'attempt_succeeded'), (5, 'job_succeeded')) AS v(seq, type)
         )
         INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
                               available_at, worker_id, lease_token, lease_expires_at, read_version, heartbeat_at,
                               started_at, finished_at, completion_outcome, created_at)
         SELECT 'bench_history', tid, aid, jid, 1, 'bench_history', 'bench_history', '{PROVIDER}', 'succeeded', at,
                'bench_history', gen_random_uuid(), at + interval '30 seconds', 0, at, at, at, 'won', at
         FROM ids",
        jid = id("001"),
        aid = id("002"),
        tid = id("003"),
    );
    sqlx::query(&statement)
        .bind(rows)
        .bind(run3)
        .bind(key_prefix)
        .bind(options)
        .execute(&pool)
        .await
        .map_err(|e| format!("history: the bulk insert failed: {e}"))?;
    // What autovacuum would soon do after a bulk insert: the planner sees the tables as
    // they now are, and the rows' visibility is settled, so the measured run does not set
    // a million rows' hint bits as it goes.
    sqlx::raw_sql("VACUUM (ANALYZE) jobs, activities, attempts, job_events")
        .execute(&pool)
        .await
        .map_err(|e| format!("history: VACUUM failed: {e}"))?;
    // And what the checkpointer would soon do: write the pre-filled pages back before the
    // run, not during it. Needs a role allowed to CHECKPOINT; without one the run pays.
    if let Err(e) = sqlx::raw_sql("CHECKPOINT").execute(&pool).await {
        tracing::warn!(error = %e, "history: no CHECKPOINT after the pre-fill; its write-back may overlap the run");
    }
    pool.close().await;
    Ok(())
}

async fn history_sqlite(
    database_url: &str,
    rows: i64,
    run3: &str,
    key_prefix: &str,
    options: &str,
) -> Result<(), String> {
    let connect = sqlx::sqlite::SqliteConnectOptions::from_str(database_url)
        .map_err(|e| format!("history: {e}"))?
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(30))
        .disable_statement_logging();
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(connect)
        .await
        .map_err(|e| format!("history: cannot open the database: {e}"))?;
    let base_us = chrono::Utc::now().timestamp_micros() - (rows + 1) * 1000;
    // ?1 rows, ?2 base time (µs), ?3 run tag (3 hex digits); the key prefix and the
    // options are our own text, written in as SQL literals.
    let key_prefix = key_prefix.replace('\'', "''");
    let options = options.replace('\'', "''");
    let at = "(?2 + s.i * 1000)";
    let id = |kind: &str| {
        format!("printf('%08x-%04x-7%s-8{kind}-%012x', ({at} / 1000) / 65536, ({at} / 1000) % 65536, ?3, s.i)")
    };
    let series = "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)";
    let statements = [
        format!(
            "INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, status,
                               version, result, completed_by, created_at, updated_at, finished_at)
             {series}
             SELECT 'bench_history', {jid}, '{key_prefix}' || s.i, 'bench_history', 'activity', 'bench_history', 'bench_history',
                    '{{\"n\":' || s.i || '}}', 'succeeded', 2, '{{\"ok\":true}}', {tid}, {at}, {at}, {at}
             FROM s",
            jid = id("001"),
            tid = id("003"),
        ),
        format!(
            "INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input, status,
                                     version, completed_by, result, created_at, updated_at, finished_at)
             {series}
             SELECT 'bench_history', {aid}, {jid}, 0, 'bench_history', '[\"{PROVIDER}\"]', '{options}', 'bench_history',
                    '{{\"n\":' || s.i || '}}', 'succeeded', 1, {tid}, '{{\"ok\":true}}', {at}, {at}, {at}
             FROM s",
            jid = id("001"),
            aid = id("002"),
            tid = id("003"),
        ),
        format!(
            "INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
                                   available_at, worker_id, lease_token, lease_expires_at, read_version, heartbeat_at,
                                   started_at, finished_at, completion_outcome, created_at)
             {series}
             SELECT 'bench_history', {tid}, {aid}, {jid}, 1, 'bench_history', 'bench_history', '{PROVIDER}', 'succeeded',
                    {at}, 'bench_history', {tid}, {at} + 30000000, 0, {at}, {at}, {at}, 'won', {at}
             FROM s",
            jid = id("001"),
            aid = id("002"),
            tid = id("003"),
        ),
        // The five events of a finished activity job, as the engine writes them.
        format!(
            "INSERT INTO job_events (owner_id, job_id, seq, at, type, attempt_id, actor, data)
             {series}, v(seq, type) AS (VALUES (1, 'job_created'), (2, 'attempt_scheduled'), (3, 'attempt_started'),
                                              (4, 'attempt_succeeded'), (5, 'job_succeeded'))
             SELECT 'bench_history', {jid}, v.seq, {at}, v.type, CASE WHEN v.seq > 1 THEN {tid} END,
                    CASE WHEN v.seq <= 2 THEN 'client:bench_history' WHEN v.seq = 5 THEN 'engine' ELSE 'worker:bench_history' END,
                    CASE v.seq
                        WHEN 1 THEN '{{\"kind\":\"activity\",\"idempotency_key\":\"{key_prefix}' || s.i || '\"}}'
                        WHEN 2 THEN '{{\"seq\":0,\"number\":1,\"reason\":\"first\",\"provider\":\"{PROVIDER}\"}}'
                        WHEN 3 THEN '{{\"number\":1,\"provider\":\"{PROVIDER}\"}}'
                        WHEN 4 THEN '{{\"number\":1,\"provider\":\"{PROVIDER}\"}}'
                        ELSE '{{\"completed_by\":\"' || {tid} || '\"}}'
                    END
             FROM s CROSS JOIN v",
            jid = id("001"),
            tid = id("003"),
        ),
    ];
    let mut tx = pool.begin().await.map_err(|e| format!("history: {e}"))?;
    for statement in &statements {
        sqlx::query(statement)
            .bind(rows)
            .bind(base_us)
            .bind(run3)
            .execute(&mut *tx)
            .await
            .map_err(|e| format!("history: the bulk insert failed: {e}"))?;
    }
    tx.commit()
        .await
        .map_err(|e| format!("history: commit failed: {e}"))?;
    pool.close().await;
    Ok(())
}

/// Per natural batcher (by kind): the items and flushes counted so far.
type BatchTotals = std::collections::BTreeMap<String, (f64, f64)>;

/// ` batch_<kind>=<items per flush> flushes_<kind>=<flushes>` for each batcher that
/// flushed between `before` and `after`.
fn batch_report(before: &BatchTotals, after: &BatchTotals) -> String {
    let mut report = String::new();
    for (kind, (sum, count)) in after {
        let (sum0, count0) = before.get(kind).copied().unwrap_or_default();
        let flushes = count - count0;
        if flushes > 0.0 {
            report.push_str(&format!(
                " batch_{kind}={:.1} flushes_{kind}={flushes}",
                (sum - sum0) / flushes
            ));
        }
    }
    report
}
