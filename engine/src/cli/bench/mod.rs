//! `onceflow bench`: throughput and latency of the engine as a client and a worker see
//! them (over HTTP, with the SDK), next to the floor of the same SQL shape run bare.
//!
//! Every workload prints exactly one machine-readable line to stdout,
//! `RESULT workload=<w> store=<s> jobs=<n> seconds=<s> rate=<per s> [key=value …]`, and a
//! short human summary to stderr. Each run has a fresh run id, put into every idempotency
//! key, activity name and task queue, so runs on one database never collide and the
//! workers of one run (or one workload) never take another's tasks.
//!
//! One file per workload (`submit`, `dedup`, `e2e`, `workflow`, `latency`, `heartbeat`,
//! `floor`), the
//! `--history` pre-fill (`history`, whose statements live beside the migrations), and
//! what they share: the producers (`produce`), the in-process SDK worker (`worker`), the
//! worker in a process of its own (`worker_process`) and the batchers' metrics
//! (`batches`).

mod batches;
mod dedup;
mod e2e;
mod engines;
mod floor;
mod heartbeat;
pub mod history;
mod latency;
mod produce;
mod retention;
mod submit;
mod task_cost;
mod worker;
mod worker_process;
mod workflow;

use std::time::Duration;

use clap::{Args, ValueEnum};
use onceflow_protocol::api::JobRequestBody;
use onceflow_worker::{Client, SdkError, SecretToken};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::DatabaseArgs;
use crate::http::ServerConfig;
use crate::model::Role;

pub use worker_process::run_worker_process;

/// The provider name every bench activity is served by.
const PROVIDER: &str = "noop";

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
    /// Workflow jobs submitted over HTTP (as e2e's), each three no-op activities and a
    /// zero-length durable timer, run by e2e's kind of SDK worker until every job
    /// succeeded with its result: workflows/s and activity steps/s (not part of `all`:
    /// a workflow's five tasks make it the slowest workload by far).
    Workflow,
    /// The cost of one workflow task as a workflow's history grows: at each of --steps
    /// (10, 1,000 and 10,000 by default), with the SDK's kept runs and, up to 1,000
    /// steps, with every task a full replay (not part of `all`).
    TaskCost,
    /// One job at a time on an idle engine: submit→start and submit→succeeded.
    Latency,
    /// PostgreSQL only: the bare SQL of a job's life (insert, claim, CAS) on a scratch table.
    Floor,
    /// Heartbeats over HTTP: --concurrency attempts held, each renewed in a loop by a
    /// caller of its own, --jobs heartbeats in all (not part of `all`).
    Heartbeat,
    /// PostgreSQL only: e2e, then the oldest half of the --history jobs pruned as the
    /// store's retention pass prunes them, on the --events-layout (not part of `all`).
    Retention,
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
    /// task-cost: the history lengths (steps) at which a workflow task's cost is measured.
    #[arg(long, value_delimiter = ',', default_values_t = [10u64, 1_000, 10_000])]
    steps: Vec<u64>,
    /// Run e2e's SDK worker in a process of its own (this binary, re-run), as a user
    /// runs one, and report that process's peak memory as `worker_peak_rss_mb`.
    #[arg(long)]
    worker_process: bool,
    /// Run N engines as processes of their own (`onceflow serve`, this binary re-run, on
    /// free loopback ports, all on --database-url) instead of one server in-process;
    /// the producers and the e2e workers are spread across them, and the database
    /// connections (the in-process server's pool) are split between them. Not with --url.
    #[arg(long, conflicts_with = "url", value_parser = clap::value_parser!(u16).range(1..=64))]
    engines: Option<u16>,
    /// How job_events is laid out (PostgreSQL): as the migrations make it, or partitioned
    /// by job id (time) by the bench before --history is seeded, for comparing retention
    /// and the write path on both. `partitioned` needs a fresh database. Not with --url.
    #[arg(long, value_enum, default_value_t = retention::EventsLayout::Plain)]
    events_layout: retention::EventsLayout,
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
    /// Also run the bench's workflow under this name (three steps of `--activity` and a
    /// zero-length timer); `won=N` then counts the workflows run to their end instead
    /// of the activity results won.
    #[arg(long)]
    workflow: Option<String>,
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
    /// The workflow of the workload's jobs (`workflow`); `None`: activity jobs.
    workflow: Option<String>,
    activity: String,
    queue: String,
    key_prefix: String,
}

/// The servers the bench started: one in-process, or `--engines` processes.
enum LocalServer {
    InProcess {
        shutdown: CancellationToken,
        handle: JoinHandle<std::io::Result<()>>,
    },
    Processes(engines::EngineProcesses),
}

impl LocalServer {
    async fn stop(self) -> Result<(), String> {
        let (shutdown, handle) = match self {
            LocalServer::InProcess { shutdown, handle } => (shutdown, handle),
            LocalServer::Processes(processes) => return processes.stop().await,
        };
        shutdown.cancel();
        match tokio::time::timeout(Duration::from_secs(15), handle).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(format!("the in-process server failed: {e}")),
            Ok(Err(e)) => Err(format!("the in-process server task failed: {e}")),
            Err(_) => Err("the in-process server did not stop within 15 s".to_owned()),
        }
    }
}

struct Bench {
    /// The first (or only) server: the workloads that need one server use it.
    url: String,
    /// Every server, `url` first; producers and e2e workers are spread across them.
    urls: Vec<String>,
    client_token: String,
    worker_token: String,
    store: &'static str,
    database_url: Option<String>,
    run_id: String,
    jobs: u64,
    concurrency: usize,
    worker_process: bool,
    /// `--engines`, when given.
    engines: Option<u16>,
    events_layout: retention::EventsLayout,
    /// `--steps`.
    steps: Vec<u64>,
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
            retention::apply_layout(&database_url, args.events_layout, args.history).await?;
            if args.history > 0 {
                history::prefill(&database_url, &run_id, args.history).await?;
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
            let (urls, server) = match args.engines {
                None => {
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
                    (vec![url], LocalServer::InProcess { shutdown, handle })
                }
                Some(count) => {
                    drop(engine);
                    let count = usize::from(count);
                    // The in-process server's pool, split: the database sees as many
                    // connections whatever the number of engines.
                    let per_engine = (max_connections / count as u32)
                        .max(crate::store::postgres::MIN_POOL_CONNECTIONS);
                    let processes =
                        engines::EngineProcesses::start(&args.database, count, per_engine, &http)
                            .await?;
                    eprintln!(
                        "bench {run_id}: {store} store, {count} engine processes ({per_engine} connections each) at {}",
                        processes.urls.join(" ")
                    );
                    (processes.urls.clone(), LocalServer::Processes(processes))
                }
            };
            let bench = Bench {
                url: urls[0].clone(),
                urls,
                client_token,
                worker_token,
                store,
                database_url: Some(database_url),
                run_id,
                jobs: args.jobs,
                concurrency: args.concurrency,
                worker_process: args.worker_process,
                engines: args.engines,
                events_layout: args.events_layout,
                steps: args.steps.clone(),
                http,
            };
            (bench, Some(server))
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
            if args.events_layout != retention::EventsLayout::Plain {
                return Err(
                    "--events-layout partitioned needs the bench's own server (not --url)"
                        .to_owned(),
                );
            }
            let database_url = super::database_url(&args.database).ok();
            let store = database_url.as_deref().map(store_of).unwrap_or("unknown");
            if args.history > 0 {
                let db = database_url
                    .as_deref()
                    .ok_or("--history needs --database-url (the server's database)")?;
                history::prefill(db, &run_id, args.history).await?;
            }
            let url = url.trim_end_matches('/').to_owned();
            eprintln!("bench {run_id}: server at {url} ({store} store)");
            let bench = Bench {
                url: url.clone(),
                urls: vec![url],
                client_token,
                worker_token,
                store,
                database_url,
                run_id,
                jobs: args.jobs,
                concurrency: args.concurrency,
                worker_process: args.worker_process,
                engines: args.engines,
                events_layout: args.events_layout,
                steps: args.steps.clone(),
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
            Workload::Workflow => &[Workload::Workflow],
            Workload::TaskCost => &[Workload::TaskCost],
            Workload::Submit => &[Workload::Submit],
            Workload::Dedup => &[Workload::Dedup],
            Workload::Latency => &[Workload::Latency],
            Workload::Floor => &[Workload::Floor],
            Workload::Heartbeat => &[Workload::Heartbeat],
            Workload::Retention => &[Workload::Retention],
        };
        let mut floor_rate = None;
        let mut e2e_rate = None;
        for w in order {
            match w {
                Workload::Floor => floor_rate = self.floor().await?,
                Workload::Submit => self.submit().await?,
                Workload::Dedup => self.dedup().await?,
                Workload::E2e => e2e_rate = Some(self.e2e().await?),
                Workload::Workflow => self.workflow().await?,
                Workload::TaskCost => self.task_cost(&self.steps).await?,
                Workload::Latency => self.latency().await?,
                Workload::Heartbeat => self.heartbeat().await?,
                Workload::Retention => self.retention().await?,
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
            workflow: (workload == "workflow").then(|| format!("bench_flow_{}", self.run_id)),
            activity: format!("bench_noop_{}_{workload}", self.run_id),
            queue: format!("bench_{}_{workload}", self.run_id),
            key_prefix: format!("bench-{}-{workload}-", self.run_id),
        }
    }

    fn client(&self) -> Result<Client, String> {
        Client::new(self.url.clone(), self.client_token.clone())
            .map_err(|e| format!("cannot build the client: {e}"))
    }

    /// One client per server, in the order of `urls`.
    fn clients(&self) -> Result<Vec<Client>, String> {
        self.urls
            .iter()
            .map(|url| {
                Client::new(url.clone(), self.client_token.clone())
                    .map_err(|e| format!("cannot build the client: {e}"))
            })
            .collect()
    }

    /// Prints the RESULT line; returns the rate.
    fn result(&self, workload: &str, jobs: u64, elapsed: Duration, extra: &str) -> f64 {
        let seconds = elapsed.as_secs_f64();
        let rate = jobs as f64 / seconds.max(1e-9);
        let engines = self
            .engines
            .map(|n| format!(" engines={n}"))
            .unwrap_or_default();
        println!(
            "RESULT workload={workload} store={} jobs={jobs} seconds={seconds:.3} rate={rate:.1} threads={}{engines}{extra}",
            self.store,
            runtime_threads()
        );
        rate
    }
}

fn job_body(names: &Names, k: u64) -> JobRequestBody {
    if let Some(workflow) = &names.workflow {
        return JobRequestBody {
            workflow: Some(workflow.clone()),
            activity: None,
            providers: None,
            input: Some(json!({ "n": k })),
            task_queue: Some(names.queue.clone()),
            options: None,
        };
    }
    JobRequestBody {
        workflow: None,
        activity: Some(names.activity.clone()),
        providers: Some(vec![PROVIDER.to_owned()]),
        input: Some(json!({ "n": k })),
        task_queue: Some(names.queue.clone()),
        options: None,
    }
}

/// The threads of the runtime the bench runs on (`--threads`); its worker process gets
/// as many.
fn runtime_threads() -> usize {
    tokio::runtime::Handle::try_current()
        .map(|h| h.metrics().num_workers())
        .unwrap_or(1)
}

/// The peak resident memory of this process in MB (`VmHWM`), where the system tells it.
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
