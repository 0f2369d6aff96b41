//! The run's actors, each on its own seeded stream: clients that double-submit, reuse
//! keys, cancel, resume and race manual attempts; workers that answer at once, late,
//! twice, with a wrong token, with errors or off-contract results, or die mid-attempt;
//! an operator that cancels `unknown` attempts; and a sampler that watches the database
//! for a second live attempt of an activity.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use uuid::Uuid;

use super::db::Db;
use super::history::{Answer, History, Op};
use super::rng::Rng;

/// The activity every job runs; its providers.
pub const ACTIVITY: &str = "torture";
pub const PROVIDERS: [&str; 2] = ["p1", "p2"];
/// The attempts' heartbeat timeout: a worker that stalls past it leaves its attempt
/// `unknown`.
pub const HEARTBEAT_S: u64 = 1;

/// What the actors share.
#[derive(Clone)]
pub struct World {
    pub history: History,
    /// The servers' proxied base URLs.
    pub urls: Vec<String>,
    pub client_token: String,
    pub worker_token: String,
    pub operator_token: String,
    /// Jobs acknowledged so far: `(job id, failover manual)`.
    pub jobs: Arc<Mutex<Vec<(Uuid, bool)>>>,
    /// Keys submitted so far and the input first sent under each.
    pub keys: Arc<Mutex<Vec<(String, Value)>>>,
    /// Set once the workload ends: workers answer at once, clients stop.
    pub draining: Arc<AtomicBool>,
    /// Set to stop every actor.
    pub stopped: Arc<AtomicBool>,
    /// Distinct payload tags.
    pub tags: Arc<AtomicU64>,
}

impl World {
    fn tag(&self) -> u64 {
        self.tags.fetch_add(1, Ordering::Relaxed)
    }
}

/// One HTTP call on a fresh connection (so that the proxy decides each request's fate),
/// recorded in the history: `(status, body)`, `None` without an answer.
async fn call(
    world: &World,
    rng: &mut Rng,
    token: &str,
    path: &str,
    key: Option<&str>,
    body: &Value,
) -> (Option<u16>, Value) {
    let url = &world.urls[rng.below(world.urls.len() as u64) as usize];
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build();
    let Ok(http) = http else {
        return (None, Value::Null);
    };
    let mut request = http
        .post(format!("{url}{path}"))
        .bearer_auth(token)
        .json(body);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.json::<Value>().await.unwrap_or(Value::Null);
            (Some(status), body)
        }
        Err(_) => (None, Value::Null),
    }
}

async fn get(world: &World, rng: &mut Rng, token: &str, path: &str) -> Option<Value> {
    let url = &world.urls[rng.below(world.urls.len() as u64) as usize];
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    let response = http
        .get(format!("{url}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .ok()?;
    response.status().is_success().then_some(())?;
    response.json::<Value>().await.ok()
}

fn detail(status: Option<u16>, body: &Value, field: &str) -> Answer {
    let detail = body["error"]["code"]
        .as_str()
        .or_else(|| body[field].as_str())
        .map(str::to_owned);
    Answer { status, detail }
}

#[derive(Clone, Copy, Debug)]
enum ClientMove {
    Submit,
    DoubleSubmit,
    ReuseKey,
    CancelJob,
    ManualAttempts,
    Resume,
}

/// A client: a seeded stream of moves until the workload ends.
pub async fn client(world: World, index: u64, mut rng: Rng) {
    let actor = format!("client-{index}");
    let mut n = 0;
    while !world.draining.load(Ordering::Relaxed) && !world.stopped.load(Ordering::Relaxed) {
        n += 1;
        let choice = rng.pick(&[
            (40, ClientMove::Submit),
            (15, ClientMove::DoubleSubmit),
            (10, ClientMove::ReuseKey),
            (5, ClientMove::CancelJob),
            (20, ClientMove::ManualAttempts),
            (10, ClientMove::Resume),
        ]);
        match choice {
            ClientMove::Submit | ClientMove::DoubleSubmit => {
                let key = format!("{actor}-{n}");
                let manual = rng.chance(40);
                let input = json!({"v": rng.below(1_000_000), "manual": manual});
                world
                    .keys
                    .lock()
                    .map(|mut k| k.push((key.clone(), input.clone())))
                    .ok();
                let copies = if matches!(choice, ClientMove::DoubleSubmit) {
                    2
                } else {
                    1
                };
                let sends = (0..copies).map(|i| {
                    let mut rng = Rng::new(rng.bits(), i);
                    let (world, key, input, actor) =
                        (world.clone(), key.clone(), input.clone(), actor.clone());
                    async move { submit(&world, &mut rng, &actor, &key, &input, manual).await }
                });
                futures::future::join_all(sends).await;
            }
            ClientMove::ReuseKey => {
                let known = world.keys.lock().ok().and_then(|k| {
                    (!k.is_empty()).then(|| k[rng.below(k.len() as u64) as usize].clone())
                });
                if let Some((key, input)) = known {
                    let manual = input["manual"].as_bool().unwrap_or(false);
                    let other = json!({"v": 1_000_000 + rng.below(1_000), "manual": manual});
                    submit(&world, &mut rng, &actor, &key, &other, manual).await;
                }
            }
            ClientMove::CancelJob => {
                if let Some((job_id, _)) = pick_job(&world, &mut rng, false) {
                    let start = world.history.now_ms();
                    let (status, body) = call(
                        &world,
                        &mut rng,
                        &world.client_token,
                        &format!("/v1/jobs/{job_id}/cancel"),
                        None,
                        &json!({}),
                    )
                    .await;
                    world.history.record(
                        &actor,
                        start,
                        Op::CancelJob { job_id },
                        detail(status, &body, "status"),
                    );
                }
            }
            ClientMove::ManualAttempts => {
                if let Some((job_id, _)) = pick_job(&world, &mut rng, true) {
                    let provider = PROVIDERS[rng.below(2) as usize];
                    // Two at once: at most one may be created.
                    let sends = (0..2).map(|i| {
                        let mut rng = Rng::new(rng.bits(), i);
                        let (world, actor) = (world.clone(), actor.clone());
                        async move {
                            let start = world.history.now_ms();
                            let path = format!("/v1/jobs/{job_id}/activities/0/attempts");
                            let (status, body) = call(
                                &world,
                                &mut rng,
                                &world.client_token,
                                &path,
                                None,
                                &json!({"provider": provider}),
                            )
                            .await;
                            world.history.record(
                                &actor,
                                start,
                                Op::ManualAttempt {
                                    job_id,
                                    provider: provider.to_owned(),
                                },
                                detail(status, &body, "id"),
                            );
                        }
                    });
                    futures::future::join_all(sends).await;
                }
            }
            ClientMove::Resume => {
                if let Some((job_id, _)) = pick_job(&world, &mut rng, false) {
                    let start = world.history.now_ms();
                    let (status, body) = call(
                        &world,
                        &mut rng,
                        &world.client_token,
                        &format!("/v1/jobs/{job_id}/resume"),
                        None,
                        &json!({"reason": "torture"}),
                    )
                    .await;
                    world.history.record(
                        &actor,
                        start,
                        Op::Resume { job_id },
                        detail(status, &body, "status"),
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20 + rng.below(80))).await;
    }
}

fn pick_job(world: &World, rng: &mut Rng, manual_only: bool) -> Option<(Uuid, bool)> {
    let jobs = world.jobs.lock().ok()?;
    let candidates: Vec<&(Uuid, bool)> = jobs.iter().filter(|(_, m)| !manual_only || *m).collect();
    (!candidates.is_empty()).then(|| *candidates[rng.below(candidates.len() as u64) as usize])
}

async fn submit(world: &World, rng: &mut Rng, actor: &str, key: &str, input: &Value, manual: bool) {
    let body = json!({
        "activity": ACTIVITY,
        "providers": PROVIDERS,
        "input": input,
        "options": {
            "heartbeat_timeout_s": HEARTBEAT_S,
            "failover": if manual { "manual" } else { "auto" },
            "retry": {"max_attempts_per_provider": 2, "initial_backoff_ms": 50, "max_backoff_ms": 200, "multiplier": 2.0}
        }
    });
    let start = world.history.now_ms();
    let (status, reply) = call(
        world,
        rng,
        &world.client_token,
        "/v1/jobs",
        Some(key),
        &body,
    )
    .await;
    let answer = detail(status, &reply, "id");
    if matches!(status, Some(200 | 201)) {
        if let Some(id) = reply["id"].as_str().and_then(|s| Uuid::parse_str(s).ok()) {
            world.jobs.lock().map(|mut j| j.push((id, manual))).ok();
        }
    }
    world.history.record(
        actor,
        start,
        Op::Submit {
            key: key.to_owned(),
            input: input.clone(),
        },
        answer,
    );
}

#[derive(Clone, Copy, Debug)]
enum WorkerMove {
    Prompt,
    Stall,
    Die,
    Twice,
    WrongToken,
    HeartbeatThenSilent,
    Retryable,
    NonRetryable,
    OffContract,
}

/// A worker: polls for attempts and answers each as its stream says.
pub async fn worker(world: World, index: u64, mut rng: Rng) {
    let actor = format!("worker-{index}");
    let providers: Vec<Value> = PROVIDERS
        .iter()
        .map(|p| json!({"activity": ACTIVITY, "provider": p}))
        .collect();
    while !world.stopped.load(Ordering::Relaxed) {
        let start = world.history.now_ms();
        let body =
            json!({"worker_id": actor, "providers": providers, "max_tasks": 4, "wait_ms": 500});
        let (status, reply) = call(
            &world,
            &mut rng,
            &world.worker_token,
            "/v1/worker/poll",
            None,
            &body,
        )
        .await;
        let tasks: Vec<Value> = reply["tasks"].as_array().cloned().unwrap_or_default();
        let attempts: Vec<Uuid> = tasks
            .iter()
            .filter_map(|t| {
                t["attempt_id"]
                    .as_str()
                    .and_then(|s| Uuid::parse_str(s).ok())
            })
            .collect();
        world.history.record(
            &actor,
            start,
            Op::Poll { attempts },
            Answer {
                status,
                detail: None,
            },
        );
        if status.is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for task in tasks {
            let choice = if world.draining.load(Ordering::Relaxed) {
                WorkerMove::Prompt
            } else {
                rng.pick(&[
                    (40, WorkerMove::Prompt),
                    (8, WorkerMove::Stall),
                    (6, WorkerMove::Die),
                    (8, WorkerMove::Twice),
                    (8, WorkerMove::WrongToken),
                    (6, WorkerMove::HeartbeatThenSilent),
                    (8, WorkerMove::Retryable),
                    (8, WorkerMove::NonRetryable),
                    (8, WorkerMove::OffContract),
                ])
            };
            let rng = Rng::new(rng.bits(), 0);
            tokio::spawn(answer(world.clone(), actor.clone(), rng, task, choice));
        }
    }
}

async fn answer(world: World, actor: String, mut rng: Rng, task: Value, choice: WorkerMove) {
    let (Some(attempt_id), Some(job_id)) = (
        task["attempt_id"]
            .as_str()
            .and_then(|s| Uuid::parse_str(s).ok()),
        task["job_id"]
            .as_str()
            .and_then(|s| Uuid::parse_str(s).ok()),
    ) else {
        return;
    };
    let token = task["lease_token"].as_str().unwrap_or_default().to_owned();
    let read_version = task["read_version"].as_i64().unwrap_or(0);
    let result = json!({"value": world.tag(), "attempt": attempt_id.to_string()});
    match choice {
        WorkerMove::Prompt => {
            complete(
                &world,
                &actor,
                &mut rng,
                attempt_id,
                job_id,
                &token,
                true,
                read_version,
                Some(result),
                None,
            )
            .await
        }
        WorkerMove::Stall => {
            tokio::time::sleep(Duration::from_millis(
                HEARTBEAT_S * 1000 + 500 + rng.below(3_500),
            ))
            .await;
            complete(
                &world,
                &actor,
                &mut rng,
                attempt_id,
                job_id,
                &token,
                true,
                read_version,
                Some(result),
                None,
            )
            .await;
        }
        WorkerMove::Die => {}
        WorkerMove::Twice => {
            let again = result.clone();
            let mut other = Rng::new(rng.bits(), 1);
            let (w, a, t) = (world.clone(), actor.clone(), token.clone());
            tokio::join!(
                complete(
                    &world,
                    &actor,
                    &mut rng,
                    attempt_id,
                    job_id,
                    &token,
                    true,
                    read_version,
                    Some(result),
                    None
                ),
                complete(
                    &w,
                    &a,
                    &mut other,
                    attempt_id,
                    job_id,
                    &t,
                    true,
                    read_version,
                    Some(again),
                    None
                ),
            );
        }
        WorkerMove::WrongToken => {
            let poison = json!({"value": world.tag(), "poison": true});
            complete(
                &world,
                &actor,
                &mut rng,
                attempt_id,
                job_id,
                &Uuid::new_v4().to_string(),
                false,
                read_version,
                Some(poison),
                None,
            )
            .await;
            complete(
                &world,
                &actor,
                &mut rng,
                attempt_id,
                job_id,
                &token,
                true,
                read_version,
                Some(result),
                None,
            )
            .await;
        }
        WorkerMove::HeartbeatThenSilent => {
            let start = world.history.now_ms();
            let (status, body) = call(
                &world,
                &mut rng,
                &world.worker_token,
                &format!("/v1/worker/attempts/{attempt_id}/heartbeat"),
                None,
                &json!({"lease_token": token}),
            )
            .await;
            world.history.record(
                &actor,
                start,
                Op::Heartbeat {
                    attempt_id,
                    right_token: true,
                },
                detail(status, &body, "outcome"),
            );
        }
        WorkerMove::Retryable | WorkerMove::NonRetryable => {
            let retryable = matches!(choice, WorkerMove::Retryable);
            complete(
                &world,
                &actor,
                &mut rng,
                attempt_id,
                job_id,
                &token,
                true,
                read_version,
                None,
                Some(retryable),
            )
            .await;
        }
        WorkerMove::OffContract => {
            let off = json!({"nope": world.tag()});
            complete(
                &world,
                &actor,
                &mut rng,
                attempt_id,
                job_id,
                &token,
                true,
                read_version,
                Some(off),
                None,
            )
            .await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn complete(
    world: &World,
    actor: &str,
    rng: &mut Rng,
    attempt_id: Uuid,
    job_id: Uuid,
    token: &str,
    right_token: bool,
    read_version: i64,
    result: Option<Value>,
    error_retryable: Option<bool>,
) {
    let mut body = json!({"lease_token": token, "read_version": read_version});
    match (&result, error_retryable) {
        (Some(result), _) => body["result"] = result.clone(),
        (None, Some(retryable)) => {
            body["error"] = json!({"message": "torture", "retryable": retryable})
        }
        (None, None) => return,
    }
    let start = world.history.now_ms();
    let (status, reply) = call(
        world,
        rng,
        &world.worker_token,
        &format!("/v1/worker/attempts/{attempt_id}/complete"),
        None,
        &body,
    )
    .await;
    world.history.record(
        actor,
        start,
        Op::Complete {
            attempt_id,
            job_id,
            right_token,
            result,
            error_retryable,
        },
        detail(status, &reply, "outcome"),
    );
}

/// The operator: cancels some `unknown` attempts now and then, until the drain (whose
/// end state keeps `unknown` attempts as they are).
pub async fn operator(world: World, mut rng: Rng) {
    while !world.draining.load(Ordering::Relaxed) && !world.stopped.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(300 + rng.below(400))).await;
        let Some(listed) = get(
            &world,
            &mut rng,
            &world.operator_token,
            "/v1/attempts?status=unknown&limit=50",
        )
        .await
        else {
            continue;
        };
        for attempt in listed["attempts"].as_array().cloned().unwrap_or_default() {
            let Some(attempt_id) = attempt["id"].as_str().and_then(|s| Uuid::parse_str(s).ok())
            else {
                continue;
            };
            if !rng.chance(40) {
                continue;
            }
            let start = world.history.now_ms();
            let (status, body) = call(
                &world,
                &mut rng,
                &world.operator_token,
                &format!("/v1/attempts/{attempt_id}/cancel"),
                None,
                &json!({"reason": "torture operator"}),
            )
            .await;
            world.history.record(
                "operator",
                start,
                Op::CancelAttempt { attempt_id },
                detail(status, &body, "status"),
            );
        }
    }
}

/// Samples the database for activities with more than one live attempt (at any moment
/// there must be at most one): `(ms, activity id, count)` for each seen.
pub async fn sampler(world: World, db: Db, seen: Arc<Mutex<Vec<(u64, String, i64)>>>) {
    let mut counts: HashMap<String, i64> = HashMap::new();
    while !world.stopped.load(Ordering::Relaxed) {
        if let Ok(rows) = db.live_duplicates().await {
            let at = world.history.now_ms();
            for (activity, count) in rows {
                if counts.insert(activity.clone(), count) != Some(count) {
                    seen.lock().map(|mut s| s.push((at, activity, count))).ok();
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
