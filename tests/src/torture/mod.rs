//! The torture run (`scripts/torture`): a seeded, randomized workload with faults against
//! real `onceflow serve` processes, its history recorded and then checked against the
//! promises (docs/guarantees.md, "Proof under faults").
//!
//! - **Servers:** `--engines` processes on one PostgreSQL (a private cluster the run
//!   starts, so it can be restarted), or one on SQLite.
//! - **Actors:** clients, workers and an operator (see `actors`), over a fault-injecting
//!   proxy in front of each server.
//! - **Faults**, on a schedule drawn from the seed before the run: `kill -9` of a server
//!   (started again on its port), SIGSTOP/SIGCONT of a server (a pause), a restart of
//!   PostgreSQL; and, all along, responses dropped or delayed by the proxies.
//! - **The drain:** faults stop, workers answer at once, until every job is finished or
//!   waits on an `unknown` attempt.
//! - **The check:** see `checker`. A failing run prints the seed, each broken rule and the
//!   excerpt of history that shows it.

pub mod actors;
pub mod checker;
pub mod db;
pub mod history;
pub mod proxy;
pub mod rng;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cluster::PrivateCluster;
use crate::server::{Api, ServerProcess, Tokens};
use actors::World;
use db::Db;
use history::History;
use proxy::Proxy;
use rng::Rng;

const HEARTBEAT_MS: u64 = actors::HEARTBEAT_S * 1000;

/// Which store the servers run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Postgres,
    Sqlite,
}

/// A guard switched off on purpose, to show the run catches its absence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// The unique index that allows one live attempt per activity is dropped.
    LiveIndex,
    /// The lease token is not compared on completion: needs servers built with the
    /// engine's test-only feature `mutants` (`ONCEFLOW_TEST_BINARY` names that binary).
    Fencing,
    /// The CAS guards of an activity job's commit are taken out (PostgreSQL; the same
    /// build as `Fencing`).
    Cas,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    pub seconds: u64,
    pub store: Store,
    pub engines: usize,
    pub mutant: Option<Mutant>,
    /// Where the history is written (`history.jsonl`, `faults.jsonl`).
    pub out_dir: PathBuf,
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct Report {
    pub requests: usize,
    pub jobs: usize,
    pub kills: usize,
    pub pauses: usize,
    pub db_restarts: usize,
    pub dropped: u64,
    pub delayed: u64,
    pub violations: Vec<checker::Violation>,
    /// When the first broken rule was seen (ms since the run began), if one was.
    pub first_violation_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill(usize, u64),
    Pause(usize, u64),
    RestartDatabase,
}

/// The faults of a run, drawn from the seed before it starts: `(at ms, fault)`.
fn schedule(settings: &Settings, engines: usize) -> Vec<(u64, Fault)> {
    let mut rng = Rng::new(settings.seed, 1);
    let mut at = 2_000;
    let mut faults = Vec::new();
    let end = settings.seconds * 1000;
    while at < end {
        let engine = rng.below(engines as u64) as usize;
        let fault = match rng.below(if settings.store == Store::Postgres {
            3
        } else {
            2
        }) {
            0 => Fault::Kill(engine, 300 + rng.below(1_700)),
            1 => Fault::Pause(engine, 300 + rng.below(2_700)),
            _ => Fault::RestartDatabase,
        };
        faults.push((at, fault));
        at += 2_000 + rng.below(5_000);
    }
    faults
}

/// Runs the workload with faults, drains, checks, and reports.
pub async fn run(settings: Settings) -> Report {
    std::fs::create_dir_all(&settings.out_dir).expect("create the output directory");
    let cluster = match settings.store {
        Store::Postgres => {
            let cluster = tokio::task::spawn_blocking(|| {
                PrivateCluster::start(&["max_connections = 300"], &[])
            })
            .await
            .expect("start the private cluster");
            cluster.create_database("torture");
            Some(Arc::new(cluster))
        }
        Store::Sqlite => None,
    };
    let url = match &cluster {
        Some(cluster) => cluster.url("torture"),
        None => format!(
            "sqlite://{}?mode=rwc",
            settings.out_dir.join("torture.db").display()
        ),
    };
    let engine = onceflow_engine::Engine::connect(&url, 4)
        .await
        .expect("connect");
    engine.migrate().await.expect("migrate");
    let tokens = Tokens::mint(&engine).await;
    drop(engine);
    let db = Db::connect(&url).await;
    if settings.mutant == Some(Mutant::LiveIndex) {
        db.execute("DROP INDEX attempts_one_live_per_activity")
            .await
            .expect("drop the index");
    }
    let engines = if settings.store == Store::Sqlite {
        1
    } else {
        settings.engines.max(1)
    };
    let mut servers = Vec::new();
    let switched = match settings.mutant {
        Some(Mutant::Fencing) => Some("fencing"),
        Some(Mutant::Cas) => Some("cas"),
        _ => None,
    };
    if let Some(guard) = switched {
        // SAFETY: set before any server process is started, while nothing else reads it.
        unsafe { std::env::set_var("ONCEFLOW_MUTANT", guard) };
    }
    for _ in 0..engines {
        servers.push(Some(ServerProcess::start(&url, &[]).await));
    }
    let ports: Vec<u16> = servers.iter().flatten().map(ServerProcess::port).collect();
    let mut proxies = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        proxies.push(Proxy::start(*port, Rng::new(settings.seed, 100 + i as u64)).await);
    }
    // The activity's output contract, and the fallback provider certified for it.
    let direct = Api::new(format!("http://127.0.0.1:{}", ports[0]));
    let schema = json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "integer"}}});
    let contract = direct
        .post(
            "/v1/worker/contracts",
            &tokens.worker,
            &json!({"activity": actors::ACTIVITY, "output_schema": schema}),
        )
        .await;
    let hash = contract.body["contract_hash"]
        .as_str()
        .expect("a contract hash")
        .to_owned();
    let certified = direct.post("/v1/worker/certifications", &tokens.worker, &json!({"activity": actors::ACTIVITY, "provider": "p2", "contract_hash": hash, "passed": true, "report": {}})).await;
    assert!(
        certified.status.is_success(),
        "certify p2: {:?}",
        certified.body
    );

    let history = History::new();
    let world = World {
        history: history.clone(),
        urls: proxies
            .iter()
            .map(|p| format!("http://127.0.0.1:{}", p.port))
            .collect(),
        client_token: tokens.client.clone(),
        worker_token: tokens.worker.clone(),
        operator_token: tokens.operator.clone(),
        jobs: Arc::default(),
        keys: Arc::default(),
        draining: Arc::new(AtomicBool::new(false)),
        stopped: Arc::new(AtomicBool::new(false)),
        tags: Arc::new(AtomicU64::new(1)),
    };
    let samples = Arc::new(Mutex::new(Vec::new()));
    let mut actors = tokio::task::JoinSet::new();
    for i in 0..4 {
        actors.spawn(actors::client(
            world.clone(),
            i,
            Rng::new(settings.seed, 10 + i),
        ));
    }
    for i in 0..3 {
        actors.spawn(actors::worker(
            world.clone(),
            i,
            Rng::new(settings.seed, 20 + i),
        ));
    }
    actors.spawn(actors::operator(world.clone(), Rng::new(settings.seed, 30)));
    actors.spawn(actors::sampler(world.clone(), db.clone(), samples.clone()));

    // The faults, on their schedule.
    let mut report = Report::default();
    let started = Instant::now();
    for (at, fault) in schedule(&settings, engines) {
        let due = Duration::from_millis(at).saturating_sub(started.elapsed());
        tokio::time::sleep(due).await;
        let from = history.now_ms();
        match fault {
            Fault::Kill(i, down_ms) => {
                if let Some(server) = servers[i].take() {
                    server.signal(libc::SIGKILL);
                    drop(server);
                    tokio::time::sleep(Duration::from_millis(down_ms)).await;
                    servers[i] = Some(ServerProcess::start_at(&url, ports[i], &[]).await);
                    history.fault(format!("kill -9 of server {i}"), from);
                    report.kills += 1;
                }
            }
            Fault::Pause(i, ms) => {
                if let Some(server) = &servers[i] {
                    server.signal(libc::SIGSTOP);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    server.signal(libc::SIGCONT);
                    history.fault(format!("pause of server {i}"), from);
                    report.pauses += 1;
                }
            }
            Fault::RestartDatabase => {
                if let Some(cluster) = cluster.clone() {
                    tokio::task::spawn_blocking(move || cluster.restart_fast())
                        .await
                        .expect("restart PostgreSQL");
                    history.fault("database restart".to_owned(), from);
                    report.db_restarts += 1;
                }
            }
        }
    }
    let workload_end = Duration::from_secs(settings.seconds).saturating_sub(started.elapsed());
    tokio::time::sleep(workload_end).await;

    // The drain: no more faults, prompt workers, until every job is finished or waits on
    // an `unknown` attempt.
    world.draining.store(true, Ordering::Relaxed);
    proxies.iter().for_each(Proxy::calm);
    let deadline = Instant::now() + Duration::from_secs(90);
    // Answers in flight (a stalled worker's late one) land within a few seconds; the end
    // state must then hold twice in a row.
    tokio::time::sleep(Duration::from_millis(HEARTBEAT_MS + 5_000)).await;
    let mut held = 0;
    loop {
        if let Ok(snapshot) = db.snapshot().await {
            let open: Vec<&db::JobRow> = snapshot
                .jobs
                .iter()
                .filter(|j| {
                    !matches!(j.status.as_str(), "succeeded" | "failed" | "cancelled")
                        && !snapshot
                            .attempts
                            .iter()
                            .any(|a| a.job_id == j.id && a.status == "unknown")
                })
                .collect();
            held = if open.is_empty() { held + 1 } else { 0 };
            if held >= 2 || Instant::now() > deadline {
                break;
            }
            // A manual-failover activity waits for a person's choice: the drain makes it
            // (the primary again), as an operator would.
            for job in open {
                let waiting = snapshot
                    .activities
                    .iter()
                    .any(|a| a.job_id == job.id && a.status == "waiting");
                if waiting {
                    let path = format!("/v1/jobs/{}/activities/0/attempts", job.id);
                    let _ = direct
                        .post(&path, &tokens.client, &json!({"provider": "p1"}))
                        .await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    world.stopped.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(15), async {
        while actors.join_next().await.is_some() {}
    })
    .await;
    actors.abort_all();

    let snapshot = db.snapshot().await.expect("read the database at the end");
    let records = history.records();
    let faults = history.faults();
    let live_samples = samples.lock().map(|s| s.clone()).unwrap_or_default();
    let violations = checker::check(&checker::Observed {
        records: &records,
        faults: &faults,
        live_samples: &live_samples,
        db: &snapshot,
    });
    report.first_violation_ms = live_samples.iter().map(|(at, _, _)| *at).min().or_else(|| {
        violations
            .iter()
            .filter_map(|v| v.about)
            .filter_map(|id| {
                checker::excerpt(&records, &snapshot, id)
                    .last()
                    .map(|r| r.end_ms)
            })
            .min()
    });
    write_lines(&settings.out_dir.join("history.jsonl"), &records);
    write_lines(&settings.out_dir.join("faults.jsonl"), &faults);
    let mut by_rule: std::collections::BTreeMap<&str, usize> = Default::default();
    for v in &violations {
        *by_rule.entry(v.rule).or_default() += 1;
    }
    for (rule, n) in &by_rule {
        eprintln!("torture: rule `{rule}` broken {n} time(s)");
    }
    for (i, violation) in violations.iter().enumerate().take(5) {
        eprintln!(
            "torture: seed {} broke `{}`: {}",
            settings.seed, violation.rule, violation.message
        );
        if let Some(about) = violation.about {
            for r in checker::excerpt(&records, &snapshot, about).iter().take(40) {
                eprintln!("    {}", serde_json::to_string(r).unwrap_or_default());
            }
        }
        if i == 4 && violations.len() > 5 {
            eprintln!("torture: … and {} more", violations.len() - 5);
        }
    }
    report.requests = records.len();
    report.jobs = snapshot.jobs.len();
    report.dropped = proxies
        .iter()
        .map(|p| p.dropped.load(Ordering::Relaxed))
        .sum();
    report.delayed = proxies
        .iter()
        .map(|p| p.delayed.load(Ordering::Relaxed))
        .sum();
    report.violations = violations;
    drop(servers);
    report
}

fn write_lines<T: serde::Serialize>(path: &std::path::Path, items: &[T]) {
    let text: String = items
        .iter()
        .filter_map(|i| serde_json::to_string(i).ok())
        .map(|l| l + "\n")
        .collect();
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("torture: cannot write {}: {e}", path.display());
    }
}
