//! Rolling restarts under load: three `onceflow serve` processes on one database, a
//! worker process and clients (the SDK) each given all three URLs, and a bench-sized load
//! (thousands of keyed submissions, each read back). Each server in turn, twice round,
//! is stopped with SIGTERM, waited for, started again on its port and waited for until
//! `/readyz` says 200, then the next. No SDK call fails (a request moves on to the next URL by itself),
//! every acknowledged key has exactly one job, every job succeeds with exactly one
//! attempt, none is left live, no activity has two winners. The clients' latency in
//! steady state and during the restarts is printed (`--nocapture`); nothing is timed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onceflow_engine::model::Role;
use onceflow_tests::server::{spawn_child_test, ServerProcess};
use onceflow_tests::{wait_for, Backend, TestDb};
use onceflow_worker::{ActivityContext, ActivityError, ActivityOptions, Client, SdkError, Worker};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;
use tokio_util::sync::CancellationToken;

/// `onceflow serve` processes.
const SERVERS: usize = 3;
/// Clients submitting at once, each with all the URLs (in a rotated order).
const CLIENTS: usize = 8;
/// At least this many keys are submitted in all.
const JOBS: usize = 2000;
/// Rounds of restarts: each restarts every server once, in turn.
const ROUNDS: usize = 2;
/// Keys acknowledged before the steady state is measured (connections made, caches warm).
const WARM_UP: usize = 200;
/// Keys acknowledged in steady state before the first restart.
const STEADY: usize = 800;
/// Keys acknowledged after the last restart before the load stops.
const AFTER: usize = 300;
/// Each server's pool: three of them share the test cluster with other tests.
const POOL: &str = "10";

#[derive(Debug, Serialize, Deserialize)]
struct Work {
    key: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Done {
    key: String,
}

/// One SDK call that was answered: when it was sent, how long it took (its moves to
/// another URL included), what it was, and whether it moved on to another URL.
#[derive(Debug, Clone, Copy)]
struct Call {
    sent: Instant,
    took: Duration,
    submit: bool,
    moved: bool,
}

/// What the clients saw, shared.
#[derive(Default)]
struct Ledger {
    /// Each acknowledged key, with the job id it was acknowledged with.
    acked: HashMap<String, uuid::Uuid>,
    /// Answers a client must never get (a 4xx, a different job for a key).
    wrong: Vec<String>,
    /// SDK calls that failed (the client then sent the same request again): when, what.
    failed: Vec<(Instant, String)>,
    /// Every answered call.
    calls: Vec<Call>,
}

/// A client: takes the next key, submits it (sending it again after an SDK error that
/// may pass, as a real client would, recording the error), reads the job back once, and
/// so on until `stop`.
async fn client(
    client: Client,
    next_key: Arc<AtomicUsize>,
    stop: CancellationToken,
    ledger: Arc<Mutex<Ledger>>,
) {
    let options = ActivityOptions {
        heartbeat_timeout_s: Some(30),
        ..ActivityOptions::default()
    };
    while !stop.is_cancelled() {
        let key = format!("k{}", next_key.fetch_add(1, Ordering::Relaxed));
        let work = Work { key: key.clone() };
        let submitted = call(&client, &ledger, true, &format!("submit {key}"), || {
            client.submit_activity(&key, "work", &["cpu"], &work, options.clone())
        })
        .await;
        let Some(submitted) = submitted else { continue };
        let id = submitted.job.id;
        {
            let mut ledger = ledger.lock().expect("ledger");
            match ledger.acked.get(&key) {
                Some(first) if *first != id => {
                    let wrong = format!("{key}: job {id}, acknowledged before as {first}");
                    ledger.wrong.push(wrong);
                }
                _ => {
                    ledger.acked.insert(key.clone(), id);
                }
            }
        }
        if let Some(job) = call(&client, &ledger, false, &format!("read {key}"), || {
            client.job(id)
        })
        .await
        {
            if job.id != id || job.idempotency_key != key {
                let wrong = format!(
                    "{key}: read job {id} as {} ({})",
                    job.id, job.idempotency_key
                );
                ledger.lock().expect("ledger").wrong.push(wrong);
            }
        }
    }
}

/// Sends the request `send` makes until it is answered: an error that may pass is
/// recorded and the same request sent again 50 ms later; any other is wrong. The
/// answer, recorded with how long it took from the first sending.
async fn call<T, F, Fut>(
    client: &Client,
    ledger: &Mutex<Ledger>,
    submit: bool,
    what: &str,
    send: F,
) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, SdkError>>,
{
    let sent = Instant::now();
    // This client's calls are one at a time: what it moved on meanwhile, this call did.
    let failovers = client.endpoints().failovers();
    loop {
        let answer = send().await;
        let failed = match answer {
            Ok(answer) => {
                ledger.lock().expect("ledger").calls.push(Call {
                    sent,
                    took: sent.elapsed(),
                    submit,
                    moved: client.endpoints().failovers() > failovers,
                });
                return Some(answer);
            }
            Err(e) if e.is_transient() => (Instant::now(), format!("{what}: {e}")),
            Err(e) => {
                ledger
                    .lock()
                    .expect("ledger")
                    .wrong
                    .push(format!("{what}: {e}"));
                return None;
            }
        };
        ledger.lock().expect("ledger").failed.push(failed);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `/readyz` status of `url` (0: no answer).
async fn readyz(url: &str) -> u16 {
    match reqwest::Client::new()
        .get(format!("{url}/readyz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
    {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

fn acked(ledger: &Mutex<Ledger>) -> usize {
    ledger.lock().expect("ledger").acked.len()
}

async fn wait_for_acked(ledger: &Arc<Mutex<Ledger>>, at_least: usize, what: &str) {
    wait_for(what, Duration::from_secs(300), || async {
        acked(ledger) >= at_least
    })
    .await;
}

/// The `q` quantile of sorted `values`.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Prints the latency of the calls of one kind sent in `from..to`.
fn report_latency(phase: &str, calls: &[Call], submit: bool, from: Instant, to: Instant) {
    let mut took: Vec<Duration> = calls
        .iter()
        .filter(|c| c.submit == submit && c.sent >= from && c.sent < to)
        .map(|c| c.took)
        .collect();
    took.sort();
    let span = (to - from).as_secs_f64();
    eprintln!(
        "{phase}: {} {} in {:.1} s ({:.0}/s): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        took.len(),
        if submit { "submissions" } else { "reads" },
        span,
        took.len() as f64 / span.max(0.001),
        quantile(&took, 0.5).as_secs_f64() * 1e3,
        quantile(&took, 0.99).as_secs_f64() * 1e3,
        took.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_of_every_server_fails_no_request_and_loses_no_job() {
    onceflow_tests::time_limit_of(onceflow_tests::LONG_TEST_TIME_LIMIT, async {
        let started = Instant::now();
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        let client_token = engine
            .create_token("alice", Role::Client)
            .await
            .expect("token")
            .token;
        let worker_token = engine
            .create_token("*", Role::Worker)
            .await
            .expect("token")
            .token;
        let args = ["--max-connections", POOL];
        let mut servers = Vec::new();
        for _ in 0..SERVERS {
            servers.push(ServerProcess::start(&db.url(), &args).await);
        }
        let urls: Vec<String> = servers.iter().map(|s| s.api.url.clone()).collect();
        // The same list, starting at server `n` (so that the load is spread).
        let rotated = |n: usize| -> Vec<String> {
            (0..SERVERS)
                .map(|i| urls[(n + i) % SERVERS].clone())
                .collect()
        };
        let worker = KillOnDrop(spawn_child_test(
            "http::rolling_restart::rolling_restart_child_worker",
            &urls.join(","),
            &worker_token,
        ));

        let ledger: Arc<Mutex<Ledger>> = Arc::default();
        let next_key = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let sdk_clients: Vec<Client> = (0..CLIENTS)
            .map(|n| Client::with_urls(rotated(n), &client_token).expect("a client"))
            .collect();
        let running: Vec<_> = sdk_clients
            .iter()
            .map(|c| {
                tokio::spawn(client(
                    c.clone(),
                    next_key.clone(),
                    stop.clone(),
                    ledger.clone(),
                ))
            })
            .collect();

        wait_for_acked(&ledger, WARM_UP, "the warm-up keys").await;
        let steady_from = Instant::now();
        wait_for_acked(&ledger, WARM_UP + STEADY, "the steady-state keys").await;

        // Each server in turn: SIGTERM, its exit, a new start on its port, /readyz 200.
        let rolling_from = Instant::now();
        let mut restarts = Vec::new();
        for server in (0..ROUNDS).flat_map(|_| 0..SERVERS) {
            let server = &mut servers[server];
            let port = server.port();
            let term_at = Instant::now();
            server.signal(libc::SIGTERM);
            let exit_deadline = Instant::now() + Duration::from_secs(60);
            while server.is_running() {
                assert!(
                    Instant::now() < exit_deadline,
                    "server on {port} did not exit after SIGTERM"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let exited_at = Instant::now();
            assert!(server.wait().success(), "a clean exit after SIGTERM");
            *server = ServerProcess::start_at(&db.url(), port, &args).await;
            let url = server.api.url.clone();
            wait_for(
                "the restarted server to be ready",
                Duration::from_secs(30),
                || {
                    let url = url.clone();
                    async move { readyz(&url).await == 200 }
                },
            )
            .await;
            restarts.push((port, exited_at - term_at, exited_at.elapsed()));
        }
        let rolling_to = Instant::now();
        let acked_after_rolling = acked(&ledger);
        wait_for_acked(
            &ledger,
            (acked_after_rolling + AFTER).max(JOBS),
            "the keys after the restarts",
        )
        .await;
        let after_to = Instant::now();
        stop.cancel();
        for c in running {
            tokio::time::timeout(Duration::from_secs(60), c)
                .await
                .expect("every client's last key is answered")
                .expect("the client task ran");
        }

        let ledger = std::mem::take(&mut *ledger.lock().expect("ledger"));
        let acked = ledger.acked.clone();
        let failovers: Vec<u64> = sdk_clients
            .iter()
            .map(|c| c.endpoints().failovers())
            .collect();
        eprintln!(
            "{} keys acknowledged by {CLIENTS} clients; requests that moved on to another URL, per client: {failovers:?}",
            acked.len()
        );
        for (port, drained, back) in &restarts {
            eprintln!(
                "server on {port}: exited {:.0} ms after SIGTERM, ready {:.0} ms after it exited",
                drained.as_secs_f64() * 1e3,
                back.as_secs_f64() * 1e3
            );
        }
        for submit in [true, false] {
            let all = &ledger.calls;
            report_latency("steady", all, submit, steady_from, rolling_from);
            report_latency("restarts", all, submit, rolling_from, rolling_to);
            report_latency("after", all, submit, rolling_to, after_to);
            let moved: Vec<Call> = all.iter().filter(|c| c.moved).copied().collect();
            report_latency(
                "moved on to another URL",
                &moved,
                submit,
                steady_from,
                after_to,
            );
        }
        assert!(
            ledger.wrong.is_empty(),
            "answers no client may get: {:?}",
            ledger.wrong
        );
        // The SDK moved every request on by itself: no call failed, so no client had to
        // send anything again.
        let failed: Vec<&String> = ledger.failed.iter().map(|(_, what)| what).collect();
        assert!(failed.is_empty(), "SDK calls that failed: {failed:?}");

        // Every acknowledged key's job succeeds, without anyone's help.
        let keys: Vec<String> = acked.keys().cloned().collect();
        let check = PgPoolOptions::new()
            .max_connections(1)
            .connect(&db.url())
            .await
            .expect("the test's own connection");
        wait_for(
            "every acknowledged job to succeed",
            Duration::from_secs(120),
            || async {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM jobs WHERE status = 'succeeded' AND idempotency_key = ANY($1)",
                )
                .bind(&keys)
                .fetch_one(&check)
                .await
                .map(|n| n == keys.len() as i64)
                .unwrap_or(false)
            },
        )
        .await;

        // Nothing acknowledged is lost: each key's one job is the one acknowledged.
        let jobs: Vec<(String, uuid::Uuid)> = sqlx::query_as("SELECT idempotency_key, id FROM jobs")
            .fetch_all(&check)
            .await
            .expect("read the jobs");
        let mut per_key: HashMap<String, Vec<uuid::Uuid>> = HashMap::new();
        for (key, id) in jobs {
            per_key.entry(key).or_default().push(id);
        }
        for (key, id) in &acked {
            assert_eq!(
                per_key.get(key),
                Some(&vec![*id]),
                "key {key}: acknowledged as job {id}"
            );
        }
        assert_eq!(per_key.len(), acked.len(), "jobs nobody was told about");
        // Every attempt ended, and ended once: one succeeded attempt per job, none other.
        let (attempts, not_succeeded, two_winners): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM attempts),
                    (SELECT count(*) FROM attempts WHERE status <> 'succeeded'),
                    (SELECT count(*) FROM (SELECT 1 FROM attempts WHERE status = 'succeeded'
                                           GROUP BY owner_id, activity_id HAVING count(*) > 1) t)",
        )
        .fetch_one(&check)
        .await
        .expect("read the attempts");
        assert_eq!(two_winners, 0, "activities with two winning attempts");
        assert_eq!(
            not_succeeded, 0,
            "attempts that did not succeed (left live, or unknown)"
        );
        assert_eq!(
            attempts,
            acked.len() as i64,
            "one attempt per job: none ran twice"
        );

        for server in &mut servers {
            assert!(server.is_running(), "a restarted server exited");
        }
        let mut worker = worker;
        assert!(
            matches!(worker.0.try_wait(), Ok(None)),
            "the worker process exited"
        );
        eprintln!("whole test: {:?}", started.elapsed());
    })
    .await;
}

/// Kills the child process when dropped (a failing test leaves no worker behind).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The worker process of `a_rolling_restart_of_every_server_fails_no_request_and_loses_no_job`:
/// two SDK workers, each with every URL of `ONCEFLOW_CHILD_URL` (comma-separated; the
/// second starts at the second URL), serving `cpu` of `work` in 5 ms, until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_rolling_restart_of_every_server_fails_no_request_and_loses_no_job"]
async fn rolling_restart_child_worker() {
    onceflow_tests::time_limit_of(onceflow_tests::LONG_TEST_TIME_LIMIT, async {
        let (Ok(urls), Ok(token)) = (
            std::env::var("ONCEFLOW_CHILD_URL"),
            std::env::var("ONCEFLOW_CHILD_TOKEN"),
        ) else {
            return;
        };
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .with_ansi(false)
            .with_writer(std::io::stderr)
            .try_init();
        let list: Vec<&str> = urls.split(',').collect();
        let workers: Vec<Worker> = (0..2)
            .map(|w| {
                let order: Vec<&str> = (0..list.len())
                    .map(|i| list[(w + i) % list.len()])
                    .collect();
                Worker::builder(list[0], token.clone())
                    .urls(order)
                    .worker_id(format!("rolling-worker-{w}"))
                    .max_concurrent_attempts(32)
                    .poll_wait(Duration::from_secs(1))
                    .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        Ok::<_, ActivityError>(Done { key: w.key })
                    })
                    .build()
                    .expect("build the worker")
            })
            .collect();
        let runs = workers.iter().map(|w| w.run());
        for outcome in futures::future::join_all(runs).await {
            outcome.expect("the worker ran until killed");
        }
    })
    .await;
}
