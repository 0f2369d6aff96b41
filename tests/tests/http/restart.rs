//! A database that restarts under load: two `onceflow serve` processes and a worker
//! process on a private PostgreSQL cluster, clients submitting with idempotency keys and
//! retrying as real clients do, and the server restarted (`pg_ctl restart -m fast`), then
//! stopped and started again, mid-run. Every process recovers by itself, `/readyz` says
//! 503 while the database is away, nothing acknowledged is lost, no job is duplicated and
//! no activity has two winners. The outage each client saw is printed (`--nocapture`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onceflow_engine::model::Role;
use onceflow_engine::Engine;
use onceflow_tests::cluster::PrivateCluster;
use onceflow_tests::server::{spawn_child_test, ServerProcess};
use onceflow_tests::wait_for;
use onceflow_worker::{ActivityContext, ActivityError, Worker};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// Clients submitting at once.
pub(super) const CLIENTS: usize = 4;

#[derive(Debug, Deserialize)]
struct Work {
    key: String,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Done {
    key: String,
}

/// One client's unanswered stretch: from the first request that failed to the first
/// success after it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outage {
    from: Instant,
    to: Instant,
}

/// What the clients saw, shared.
#[derive(Default)]
pub(super) struct Ledger {
    /// Each acknowledged key, with the job id it was acknowledged with.
    pub(super) acked: HashMap<String, String>,
    /// Answers a client must never get (a 500, a 4xx, a different job for a key).
    pub(super) wrong: Vec<String>,
    /// Requests that failed (503, connection error, timeout), by kind.
    pub(super) failures: HashMap<String, usize>,
    /// Each failed request: when it was sent, what it was and how it failed.
    pub(super) failed: Vec<(Instant, String)>,
    /// Per client, its outages.
    pub(super) outages: Vec<Vec<Outage>>,
    /// Per client, each request from its first sending to its answer (retries included).
    pub(super) waits: Vec<Vec<Outage>>,
}

/// How a request ended, for a client that retries.
enum Answer {
    /// 200 or 201, with the body.
    Done(Value),
    /// Worth trying again: 503, a connection error, a timeout.
    Retry(String),
    /// Never right: a 500, a 4xx.
    Wrong(String),
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    match request.send().await {
        Ok(r) if r.status() == 201 || r.status() == 200 => match r.json::<Value>().await {
            Ok(body) => Answer::Done(body),
            Err(e) => Answer::Retry(format!("body lost: {e}")),
        },
        Ok(r) if r.status() == 503 => {
            let code = r
                .json::<Value>()
                .await
                .map(|b| b["error"]["code"].as_str().unwrap_or("?").to_owned())
                .unwrap_or_else(|_| "?".to_owned());
            Answer::Retry(format!("503 {code}"))
        }
        Ok(r) => {
            let status = r.status();
            Answer::Wrong(format!("{status} {}", r.text().await.unwrap_or_default()))
        }
        Err(e) if e.is_timeout() => Answer::Retry("timeout".to_owned()),
        Err(e) if e.is_connect() => Answer::Retry("connect".to_owned()),
        Err(_) => Answer::Retry("transport".to_owned()),
    }
}

/// One client's calls: each sent until answered, its failures, outages and waits recorded.
struct Caller {
    n: usize,
    urls: [String; 2],
    ledger: Arc<Mutex<Ledger>>,
    down_since: Option<Instant>,
}

impl Caller {
    /// Sends the request `build` makes for a server until it is answered, alternating
    /// servers; its body, or `None` for an answer no client may get.
    async fn call(
        &mut self,
        what: String,
        build: &(dyn Fn(&str) -> reqwest::RequestBuilder + Sync),
    ) -> Option<Value> {
        let first_sent = Instant::now();
        for tries in 0usize.. {
            let sent = Instant::now();
            let answer = send(build(&self.urls[(self.n + tries) % 2])).await;
            {
                let mut ledger = self.ledger.lock().expect("ledger");
                match answer {
                    Answer::Done(body) => {
                        if let Some(since) = self.down_since.take() {
                            ledger.outages[self.n].push(Outage {
                                from: since,
                                to: Instant::now(),
                            });
                        }
                        ledger.waits[self.n].push(Outage {
                            from: first_sent,
                            to: Instant::now(),
                        });
                        return Some(body);
                    }
                    Answer::Wrong(text) => {
                        ledger.wrong.push(format!("{what}: {text}"));
                        return None;
                    }
                    Answer::Retry(kind) => {
                        self.down_since.get_or_insert(sent);
                        *ledger.failures.entry(kind).or_default() += 1;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

/// A client: submits new keys one after another, alternating servers, and reads each job
/// once it is acknowledged, as a client waiting for its result would. On a 503 or a
/// connection error it sends the same request again (the same key, to the other server)
/// until it is answered, as a real client behind a load balancer would.
pub(super) async fn client(
    n: usize,
    urls: [String; 2],
    token: String,
    stop: CancellationToken,
    ledger: Arc<Mutex<Ledger>>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(45))
        .build()
        .expect("HTTP client");
    let mut me = Caller {
        n,
        urls,
        ledger: ledger.clone(),
        down_since: None,
    };
    let mut i = 0usize;
    while !stop.is_cancelled() {
        let key = format!("c{n}-{i}");
        let body = json!({"activity": "work", "providers": ["cpu"], "input": {"key": key},
                          "options": {"heartbeat_timeout_s": 2}});
        let submit = |url: &str| {
            http.post(format!("{url}/v1/jobs"))
                .bearer_auth(&token)
                .header("Idempotency-Key", &key)
                .json(&body)
        };
        let Some(job) = me.call(format!("submit {key}"), &submit).await else {
            i += 1;
            continue;
        };
        let id = job["id"].as_str().unwrap_or_default().to_owned();
        {
            let mut ledger = ledger.lock().expect("ledger");
            match ledger.acked.get(&key) {
                Some(first) if *first != id => {
                    let wrong = format!("{key}: job {id}, acknowledged before as {first}");
                    ledger.wrong.push(wrong);
                }
                _ => {
                    ledger.acked.insert(key.clone(), id.clone());
                }
            }
        }
        let read = |url: &str| http.get(format!("{url}/v1/jobs/{id}")).bearer_auth(&token);
        if let Some(view) = me.call(format!("read {key}"), &read).await {
            if view["id"] != json!(id) {
                let wrong = format!("{key}: read job {id} as {view}");
                ledger.lock().expect("ledger").wrong.push(wrong);
            }
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each `/readyz` answer: server, when sent, when answered, status (0: no answer).
type ReadyzLog = Arc<Mutex<Vec<(usize, Instant, Instant, u16)>>>;

/// Polls `/readyz` of each server until `stop`, recording (server, when sent, when
/// answered, status; 0 for no answer).
async fn watch_readyz(urls: [String; 2], stop: CancellationToken, seen: ReadyzLog) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("HTTP client");
    let watchers = (0..2).map(|s| {
        let (http, url, stop, seen) = (http.clone(), urls[s].clone(), stop.clone(), seen.clone());
        async move {
            while !stop.is_cancelled() {
                let sent = Instant::now();
                let status = match http.get(format!("{url}/readyz")).send().await {
                    Ok(r) => r.status().as_u16(),
                    Err(_) => 0,
                };
                seen.lock()
                    .expect("readyz log")
                    .push((s, sent, Instant::now(), status));
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    });
    futures::future::join_all(watchers).await;
}

/// The first answer of `/readyz` at `url` (no answer: 0).
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

/// The answers of both servers' `/readyz`, asked at once.
pub(super) async fn both_readyz(urls: &[String; 2]) -> (u16, u16) {
    tokio::join!(readyz(&urls[0]), readyz(&urls[1]))
}

/// How many jobs have succeeded; `None` while the database does not answer.
pub(super) async fn succeeded(check: &PgPool) -> Option<i64> {
    sqlx::query_scalar("SELECT count(*) FROM jobs WHERE status = 'succeeded'")
        .fetch_one(check)
        .await
        .ok()
}

pub(super) async fn wait_for_succeeded(check: &PgPool, at_least: i64, what: &str) {
    wait_for(what, Duration::from_secs(30), || async {
        succeeded(check).await.unwrap_or(0) >= at_least
    })
    .await;
}

/// The database's clock now, once it answers.
pub(super) async fn database_now(check: &PgPool) -> chrono::DateTime<chrono::Utc> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(now) = sqlx::query_scalar("SELECT now()").fetch_one(check).await {
            return now;
        }
        assert!(Instant::now() < deadline, "the database does not answer");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long after `back` (database clock) the first job succeeded: when the workers were
/// winning again.
pub(super) async fn first_win_after(
    check: &PgPool,
    back: chrono::DateTime<chrono::Utc>,
) -> Duration {
    let first: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT min(finished_at) FROM jobs WHERE finished_at > $1")
            .bind(back)
            .fetch_one(check)
            .await
            .expect("read the first win");
    first
        .and_then(|f| (f - back).to_std().ok())
        .unwrap_or_default()
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

/// The longest of `spans` that overlaps `from`..`to`.
fn longest(spans: &[Outage], from: Instant, to: Instant) -> Duration {
    spans
        .iter()
        .filter(|o| o.to >= from && o.from <= to)
        .map(|o| o.to - o.from)
        .max()
        .unwrap_or_default()
}

/// Prints what the clients saw while the database was away, from `from` to `to`: per
/// client, of the spans that overlap that stretch, its longest outage
/// (first failed request to the first success after it) and its longest wait for an
/// answer (a request's first sending to its answer, retries included); then the max and
/// median over clients. Returns the longest wait.
pub(super) fn report_outages(phase: &str, ledger: &Ledger, from: Instant, to: Instant) -> Duration {
    let mut outages = Vec::new();
    let mut waits = Vec::new();
    for n in 0..CLIENTS {
        outages.push(longest(&ledger.outages[n], from, to));
        waits.push(longest(&ledger.waits[n], from, to));
        eprintln!(
            "{phase}: client {n}: longest outage {:?}, longest wait for an answer {:?}",
            outages[n], waits[n]
        );
    }
    let max_wait = waits.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{phase}: outage seen by clients: max {:?}, median {:?}; longest wait for an answer: max {max_wait:?}, median {:?} (over {CLIENTS} clients)",
        outages.iter().max().copied().unwrap_or_default(),
        median(outages),
        median(waits),
    );
    max_wait
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_restart_loses_no_acknowledged_job_and_duplicates_none() {
    onceflow_tests::time_limit_of(onceflow_tests::LONG_TEST_TIME_LIMIT, async {
        let started = Instant::now();
        let cluster = PrivateCluster::with_database("onceflow").await;
        let url = cluster.url("onceflow");
        let (client_token, worker_token) = {
            let engine = Engine::connect(&url, 2).await.expect("connect");
            engine.migrate().await.expect("migrate");
            let client = engine
                .create_token("alice", Role::Client)
                .await
                .expect("token");
            let worker = engine.create_token("*", Role::Worker).await.expect("token");
            (client.token, worker.token)
        };
        let check = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(2))
            .connect(&url)
            .await
            .expect("the test's own connections");

        let mut servers = [
            ServerProcess::start(&url, &[]).await,
            ServerProcess::start(&url, &[]).await,
        ];
        let urls = [servers[0].api.url.clone(), servers[1].api.url.clone()];
        // A real worker process, with one SDK worker on each server.
        let worker = KillOnDrop(spawn_child_test(
            "http::restart::restart_child_worker",
            &urls.join(","),
            &worker_token,
        ));

        let stop_clients = CancellationToken::new();
        let ledger = Arc::new(Mutex::new(Ledger {
            outages: vec![Vec::new(); CLIENTS],
            waits: vec![Vec::new(); CLIENTS],
            ..Ledger::default()
        }));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|n| {
                tokio::spawn(client(
                    n,
                    urls.clone(),
                    client_token.clone(),
                    stop_clients.clone(),
                    ledger.clone(),
                ))
            })
            .collect();
        let readyz_seen: ReadyzLog = Arc::default();
        let stop_watching = CancellationToken::new();
        let watcher = tokio::spawn(watch_readyz(
            urls.clone(),
            stop_watching.clone(),
            readyz_seen.clone(),
        ));

        // Some jobs done before the restart.
        wait_for_succeeded(&check, 30, "30 jobs to succeed before the restart").await;

        // Phase 1: `pg_ctl restart -m fast` in the middle of the run.
        let restart_from = Instant::now();
        let restarter = cluster.clone();
        tokio::task::spawn_blocking(move || restarter.restart_fast())
            .await
            .expect("restart -m fast");
        let restarted_at = Instant::now();
        // At once, as many reads as each server has pooled connections: every connection
        // the restart closed must be replaced before it is handed out, none may fail a read.
        let some_job = ledger
            .lock()
            .expect("ledger")
            .acked
            .values()
            .next()
            .cloned()
            .expect("jobs were acknowledged before the restart");
        let burst = urls.iter().flat_map(|url| {
            let (url, token, id) = (url.clone(), client_token.clone(), some_job.clone());
            (0..20).map(move |_| {
                let request = reqwest::Client::new()
                    .get(format!("{url}/v1/jobs/{id}"))
                    .bearer_auth(&token)
                    .timeout(Duration::from_secs(30));
                async move {
                    match send(request).await {
                        Answer::Done(_) => None,
                        Answer::Retry(kind) | Answer::Wrong(kind) => Some(kind),
                    }
                }
            })
        });
        let burst_failed: Vec<String> = futures::future::join_all(burst)
            .await
            .into_iter()
            .flatten()
            .collect();
        let back_after_restart = database_now(&check).await;
        let before = succeeded(&check).await;
        wait_for(
            "both servers ready after the restart",
            Duration::from_secs(20),
            || async { both_readyz(&urls).await == (200, 200) },
        )
        .await;
        let done_at_restart = match before {
            Some(n) => n,
            None => succeeded(&check).await.unwrap_or(0),
        };
        wait_for_succeeded(
            &check,
            done_at_restart + 30,
            "30 more jobs to succeed after the restart",
        )
        .await;
        eprintln!("restart -m fast took {:?}", restarted_at - restart_from);

        // Phase 2: stopped long enough for every server to see it, then started again.
        let stop_from = Instant::now();
        let stopper = cluster.clone();
        tokio::task::spawn_blocking(move || stopper.stop_fast())
            .await
            .expect("stop -m fast");
        let stopped_at = Instant::now();
        wait_for(
            "both servers to answer /readyz 503 while the database is down",
            Duration::from_secs(20),
            || async { both_readyz(&urls).await == (503, 503) },
        )
        .await;
        let starting_at = Instant::now();
        let starter = cluster.clone();
        tokio::task::spawn_blocking(move || starter.start_again())
            .await
            .expect("start again");
        let started_again_at = Instant::now();
        let back_after_start = database_now(&check).await;
        wait_for(
            "both servers ready after the start",
            Duration::from_secs(20),
            || async { both_readyz(&urls).await == (200, 200) },
        )
        .await;
        let done_at_start = succeeded(&check).await.unwrap_or(0);
        wait_for_succeeded(
            &check,
            done_at_start + 30,
            "30 more jobs to succeed after the start",
        )
        .await;

        stop_clients.cancel();
        for c in clients {
            tokio::time::timeout(Duration::from_secs(60), c)
                .await
                .expect("every client's last key is acknowledged")
                .expect("the client task ran");
        }
        stop_watching.cancel();
        watcher.await.expect("the readyz watcher ran");

        let ledger = std::mem::take(&mut *ledger.lock().expect("ledger"));
        let acked = ledger.acked.clone();
        eprintln!(
            "{} keys acknowledged; failed requests by kind: {:?}",
            acked.len(),
            ledger.failures
        );
        assert!(
            ledger.wrong.is_empty(),
            "answers no client may get: {:?}",
            ledger.wrong
        );

        // Requests fail only while the database is away: once it is back, no request is
        // handed a connection the server closed.
        let failed_once_back: Vec<&String> = ledger
            .failed
            .iter()
            .filter(|(sent, _)| {
                (*sent >= restarted_at && *sent < stop_from) || *sent >= started_again_at
            })
            .map(|(_, what)| what)
            .collect();
        assert!(
            failed_once_back.is_empty() && burst_failed.is_empty(),
            "requests sent once the database was back failed: {failed_once_back:?}, {burst_failed:?}"
        );

        // Every acknowledged key's job succeeds, without anyone's help.
        wait_for(
            "every acknowledged job to succeed",
            Duration::from_secs(30),
            || async {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM jobs WHERE status = 'succeeded' AND idempotency_key = ANY($1)",
                )
                .bind(acked.keys().cloned().collect::<Vec<_>>())
                .fetch_one(&check)
                .await
                .map(|n| n == acked.len() as i64)
                .unwrap_or(false)
            },
        )
        .await;

        // Nothing acknowledged is lost: each key's one job is the one acknowledged.
        let jobs: Vec<(String, String)> = sqlx::query_as("SELECT idempotency_key, id::text FROM jobs")
            .fetch_all(&check)
            .await
            .expect("read the jobs");
        let mut per_key: HashMap<String, Vec<String>> = HashMap::new();
        for (key, id) in jobs {
            per_key.entry(key).or_default().push(id);
        }
        for (key, id) in &acked {
            assert_eq!(
                per_key.get(key),
                Some(&vec![id.clone()]),
                "key {key}: acknowledged as job {id}"
            );
        }
        // No job without an acknowledged key (every client retried its key until it was).
        assert_eq!(per_key.len(), acked.len(), "jobs nobody was told about");
        // No attempt ran twice, no activity has two winners, nothing is left live.
        let stats: (i64, i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM attempts),
                    (SELECT count(*) FROM (SELECT 1 FROM attempts WHERE status = 'succeeded'
                                           GROUP BY owner_id, activity_id HAVING count(*) > 1) t),
                    (SELECT count(*) FROM attempts WHERE status IN ('scheduled', 'started', 'unknown')),
                    (SELECT count(*) FROM attempts WHERE status = 'succeeded')",
        )
        .fetch_one(&check)
        .await
        .expect("read the attempts");
        let (attempts, two_winners, live, won) = stats;
        assert_eq!(two_winners, 0, "activities with two winning attempts");
        assert_eq!(live, 0, "attempts left scheduled, started or unknown");
        assert_eq!(won, acked.len() as i64, "one winning attempt per job");
        assert_eq!(
            attempts,
            acked.len() as i64,
            "one attempt per job: none ran twice"
        );

        // `/readyz` never said 200 while the database was down, nor took long to answer.
        let seen = readyz_seen.lock().expect("readyz log").clone();
        for s in 0..2 {
            let during_stop: Vec<u16> = seen
                .iter()
                .filter(|(server, sent, answered, _)| {
                    *server == s && *sent >= stopped_at && *answered <= starting_at
                })
                .map(|(_, _, _, status)| *status)
                .collect();
            // (That both answered 503 then, the wait above saw.)
            assert!(
                !during_stop.contains(&200),
                "server {s} /readyz while the database was stopped: {during_stop:?}"
            );
            let slowest = seen
                .iter()
                .filter(|(server, ..)| *server == s)
                .map(|(_, sent, answered, _)| *answered - *sent)
                .max()
                .unwrap_or_default();
            // It pings with a 2 s limit: never a hang, whatever state the pool is in.
            assert!(
                slowest < Duration::from_secs(8),
                "server {s} /readyz took {slowest:?}"
            );
            let during_restart = seen
                .iter()
                .filter(|(server, sent, _, status)| {
                    *server == s && *sent >= restart_from && *sent <= restarted_at && *status == 503
                })
                .count();
            eprintln!(
                "server {s}: /readyz answered 503 {during_restart} time(s) during restart -m fast"
            );
        }

        // The LISTEN relay of each engine is back.
        wait_for(
            "both engines to LISTEN again",
            Duration::from_secs(10),
            || async {
                sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND state = 'idle'",
            )
            .fetch_one(&check)
            .await
            .map(|n| n >= 2)
            .unwrap_or(false)
            },
        )
        .await;
        for server in &mut servers {
            assert!(server.is_running(), "a server process exited");
        }
        let mut worker = worker;
        assert!(
            matches!(worker.0.try_wait(), Ok(None)),
            "the worker process exited"
        );

        eprintln!(
            "restart -m fast: database away {:?}",
            restarted_at - restart_from
        );
        let restart_max = report_outages("restart -m fast", &ledger, restart_from, restarted_at);
        eprintln!(
            "restart -m fast: first job won {:?} after the database was back",
            first_win_after(&check, back_after_restart).await
        );
        eprintln!(
            "stop, then start: database away {:?} (stopped in {:?}, started in {:?})",
            started_again_at - stop_from,
            stopped_at - stop_from,
            started_again_at - starting_at
        );
        let stop_max = report_outages("stop/start", &ledger, stop_from, started_again_at);
        eprintln!(
            "stop/start: first job won {:?} after the database was back",
            first_win_after(&check, back_after_start).await
        );
        assert!(
            restart_max < Duration::from_secs(15),
            "clients waited {restart_max:?} for a restart"
        );
        assert!(
            stop_max < (started_again_at - stop_from) + Duration::from_secs(15),
            "clients waited {stop_max:?} for a database away {:?}",
            started_again_at - stop_from
        );
        eprintln!("whole test: {:?}", started.elapsed());
        drop(cluster);
    })
    .await;
}

/// Kills the child process when dropped (a failing test leaves no worker behind).
pub(super) struct KillOnDrop(pub(super) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The worker process of `a_database_restart_loses_no_acknowledged_job_and_duplicates_none`:
/// an SDK worker on each server of `ONCEFLOW_CHILD_URL` (comma-separated), serving `cpu`
/// of `work` in 30 ms, until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by a_database_restart_loses_no_acknowledged_job_and_duplicates_none"]
async fn restart_child_worker() {
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
        let workers: Vec<Worker> = urls
            .split(',')
            .enumerate()
            .map(|(i, url)| {
                Worker::builder(url, token.clone())
                    .worker_id(format!("restart-worker-{i}"))
                    .max_concurrent_attempts(8)
                    .poll_wait(Duration::from_secs(1))
                    .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move {
                        tokio::time::sleep(Duration::from_millis(30)).await;
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
