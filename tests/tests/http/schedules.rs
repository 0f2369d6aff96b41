//! Schedules over HTTP (docs/api.md, Schedules): every tick one job, however many engines run.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use onceflow_tests::server::{Api, ServerProcess, TestServer, Tokens};
use onceflow_tests::{rules, wait_for};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

fn every_second(overlap: &str) -> Value {
    json!({"cron": "* * * * * *", "overlap": overlap,
           "job": {"activity": "generate", "providers": ["primary-llm"], "input": {"from": "schedule"}}})
}

async fn put(api: &Api, token: &str, name: &str, body: &Value) -> onceflow_tests::server::Reply {
    api.send(
        Method::PUT,
        &format!("/v1/schedules/{name}"),
        Some(token),
        &[],
        Some(body),
    )
    .await
}

async fn schedule(api: &Api, token: &str, name: &str) -> Value {
    let reply = api.get(&format!("/v1/schedules/{name}"), token).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    reply.body
}

/// The tick times of the jobs the schedule `name` submitted, from their idempotency keys;
/// fails if any tick has two jobs.
async fn ticks_of_jobs(api: &Api, token: &str, name: &str) -> Vec<DateTime<Utc>> {
    let jobs = api.get("/v1/jobs?limit=500", token).await.body["jobs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let prefix = format!("schedule:{name}:");
    let mut ticks: Vec<DateTime<Utc>> = jobs
        .iter()
        .filter_map(|j| {
            j["idempotency_key"]
                .as_str()?
                .strip_prefix(&prefix)
                .map(str::to_owned)
        })
        .map(|t| {
            DateTime::parse_from_rfc3339(&t)
                .expect("tick time in the key")
                .with_timezone(&Utc)
        })
        .collect();
    ticks.sort();
    let distinct: BTreeSet<_> = ticks.iter().collect();
    assert_eq!(
        distinct.len(),
        ticks.len(),
        "a tick has more than one job: {ticks:?}"
    );
    ticks
}

/// Consecutive seconds: no tick was fired twice, and none was left out.
fn assert_consecutive_seconds(ticks: &[DateTime<Utc>]) {
    for pair in ticks.windows(2) {
        assert_eq!(
            (pair[1] - pair[0]).num_seconds(),
            1,
            "ticks are one second apart: {ticks:?}"
        );
    }
}

/// How many schedule ticks the process behind `api` fired itself, by its own metrics
/// (`onceflow_schedule_ticks_total{outcome="fired"}`: counters count what this process did).
async fn fired_by(api: &Api) -> u64 {
    let text = api
        .http
        .get(format!("{}/metrics", api.url))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics' text");
    text.lines()
        .find_map(|l| l.strip_prefix("onceflow_schedule_ticks_total{outcome=\"fired\"} "))
        .map_or(0, |n| n.parse::<f64>().expect("a count") as u64)
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

rules! {
    async fn put_creates_then_replaces_and_get_list_delete_follow(db) {
        let server = TestServer::start(db).await;
        let (api, alice) = (&server.api, &server.tokens.client);
        let body = json!({"cron": "0 */5 * * * *", "job": {"workflow": "nightly", "input": {}}});
        let created = put(api, alice, "nightly", &body).await;
        assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
        assert_eq!(created.body["timezone"], json!("UTC"));
        assert_eq!(created.body["overlap"], json!("skip"));
        assert_eq!(created.body["catchup_window_s"], json!(300));
        assert_eq!(created.body["paused"], json!(false));
        assert_eq!(created.body["last_fired_at"], Value::Null);
        let next = time(&created.body["next_fire_at"]);
        assert!(next > Utc::now() && next <= Utc::now() + chrono::Duration::minutes(5));
        assert_eq!(next.timestamp() % 300, 0, "a */5-minute tick");

        let replaced = put(api, alice, "nightly", &json!({"cron": "0 0 * * * *", "overlap": "allow", "catchup_window_s": 60,
            "job": {"workflow": "nightly", "input": {"v": 2}}})).await;
        assert_eq!(replaced.status, StatusCode::OK);
        assert_eq!(replaced.body["overlap"], json!("allow"));
        assert_eq!(time(&replaced.body["next_fire_at"]).timestamp() % 3600, 0, "the new cron's ticks");
        assert_eq!(replaced.body["job"]["input"], json!({"v": 2}));

        let list = api.get("/v1/schedules", alice).await;
        assert_eq!(list.body["schedules"].as_array().map(Vec::len), Some(1));
        let events = api.get("/v1/schedules/nightly/events", alice).await;
        let kinds: Vec<_> = events.body["events"].as_array().unwrap().iter().map(|e| e["type"].clone()).collect();
        assert_eq!(kinds, vec![json!("created"), json!("replaced")]);

        let deleted = api.send(Method::DELETE, "/v1/schedules/nightly", Some(alice), &[], None).await;
        assert_eq!(deleted.status, StatusCode::NO_CONTENT);
        assert_eq!(api.get("/v1/schedules/nightly", alice).await.code(), "not_found");
        assert_eq!(api.send(Method::DELETE, "/v1/schedules/nightly", Some(alice), &[], None).await.code(), "not_found");
    }

    async fn an_invalid_cron_expression_answers_400_saying_where_and_changes_nothing(db) {
        let server = TestServer::start(db).await;
        let (api, alice) = (&server.api, &server.tokens.client);
        let job = json!({"activity": "generate", "providers": ["p"]});
        let bad_cron = put(api, alice, "s", &json!({"cron": "0 0 61 * * *", "job": job})).await;
        assert_eq!((bad_cron.status, bad_cron.code()), (StatusCode::BAD_REQUEST, "invalid_request"));
        let message = bad_cron.body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("cron:") && message.contains("61"), "names the field and the value: {message}");
        assert!(message.contains('^'), "points at where it fails: {message}");
        for (body, field) in [
            (json!({"cron": "every day", "job": job}), "cron"),
            (json!({"cron": "* * * * * *", "timezone": "Mars/Olympus", "job": job}), "timezone"),
            (json!({"cron": "* * * * * *", "job": {"activity": "generate"}}), "job.providers"),
            (json!({"cron": "* * * * * *", "job": job, "overlap": "sometimes"}), "overlap"),
            (json!({"cron": "* * * * * *", "job": job, "catchup_window_s": 0}), "catchup_window_s"),
            (json!({"job": job}), "cron"),
            (json!({"cron": "0 0 0 1 1 * 2020", "job": job}), "cron"),
        ] {
            let reply = put(api, alice, "s", &body).await;
            assert_eq!((reply.status, reply.code()), (StatusCode::BAD_REQUEST, "invalid_request"), "{body}");
            let message = reply.body["error"]["message"].as_str().unwrap();
            assert!(message.contains(field), "`{message}` names {field}");
        }
        let bad_name = put(api, alice, "has%20space", &json!({"cron": "* * * * * *", "job": job})).await;
        assert_eq!(bad_name.code(), "invalid_request");
        let not_json = api.send_raw(Method::PUT, "/v1/schedules/s", Some(alice), &[], b"{cron".to_vec()).await;
        assert_eq!(not_json.code(), "invalid_json");
        assert_eq!(api.get("/v1/schedules", alice).await.body["schedules"], json!([]), "nothing was created");
    }

    async fn schedules_are_owner_scoped_and_for_client_tokens(db) {
        let server = TestServer::start(db).await;
        let (api, t) = (&server.api, &server.tokens);
        assert_eq!(put(api, &t.client, "mine", &every_second("allow")).await.status, StatusCode::CREATED);
        // Bob has a schedule of the same name: names are per owner.
        assert_eq!(put(api, &t.bob, "mine", &every_second("skip")).await.status, StatusCode::CREATED);
        assert_eq!(schedule(api, &t.bob, "mine").await["overlap"], json!("skip"));
        assert_eq!(schedule(api, &t.client, "mine").await["overlap"], json!("allow"));
        assert_eq!(api.post("/v1/schedules/theirs/pause", &t.bob, &json!({})).await.code(), "not_found");
        assert_eq!(api.get("/v1/schedules/mine", &t.operator).await.code(), "forbidden");
        assert_eq!(put(api, &t.worker, "w", &every_second("allow")).await.code(), "forbidden");
        assert_eq!(api.send(Method::GET, "/v1/schedules", None, &[], None).await.code(), "unauthenticated");
    }

    async fn a_time_zone_places_ticks_at_local_wall_clock_time(db) {
        let server = TestServer::start(db).await;
        // India has no daylight saving time: 09:00 there is 03:30 UTC every day.
        let reply = put(&server.api, &server.tokens.client, "morning", &json!({"cron": "0 0 9 * * *", "timezone": "Asia/Kolkata",
            "job": {"workflow": "report", "input": {}}})).await;
        assert_eq!(reply.status, StatusCode::CREATED);
        let next = time(&reply.body["next_fire_at"]);
        assert_eq!(next.format("%H:%M:%S").to_string(), "03:30:00");
        assert!(next > Utc::now() && next <= Utc::now() + chrono::Duration::days(1));
        // Five fields (no seconds) fire at second 0.
        let five = put(&server.api, &server.tokens.client, "hourly", &json!({"cron": "15 * * * *",
            "job": {"workflow": "report", "input": {}}})).await;
        assert_eq!(time(&five.body["next_fire_at"]).format("%M:%S").to_string(), "15:00");
    }

    async fn each_tick_fires_one_job_keyed_by_its_time_until_paused(db) {
        let server = TestServer::start(db).await;
        let (api, alice) = (&server.api, &server.tokens.client);
        assert_eq!(put(api, alice, "tick", &every_second("allow")).await.status, StatusCode::CREATED);
        wait_for("three ticks fired", Duration::from_secs(10), || async {
            schedule(api, alice, "tick").await["fired_count"].as_u64() >= Some(3)
        }).await;
        let paused = api.post("/v1/schedules/tick/pause", alice, &json!({})).await;
        assert_eq!((paused.body["paused"].clone(), paused.body["next_fire_at"].clone()), (json!(true), Value::Null));
        let fired = paused.body["fired_count"].as_u64().unwrap();
        let ticks = ticks_of_jobs(api, alice, "tick").await;
        assert_eq!(ticks.len() as u64, fired, "one job per fired tick");
        assert_consecutive_seconds(&ticks);
        assert_eq!(time(&paused.body["last_fired_at"]), *ticks.last().unwrap());
        let job = api.get(&format!("/v1/jobs/{}", paused.body["last_job_id"].as_str().unwrap()), alice).await;
        assert_eq!(job.body["input"], json!({"from": "schedule"}));

        // Paused: nothing fires for two ticks' time; pausing again changes nothing.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert_eq!(ticks_of_jobs(api, alice, "tick").await.len() as u64, fired);
        assert_eq!(api.post("/v1/schedules/tick/pause", alice, &json!({})).await.body["fired_count"].as_u64(), Some(fired));

        // Resumed: from the first tick after now; the ticks that fell while paused never fire.
        let resumed = api.post("/v1/schedules/tick/resume", alice, &json!({})).await;
        assert_eq!(resumed.body["paused"], json!(false));
        assert!(time(&resumed.body["next_fire_at"]) > Utc::now() - chrono::Duration::seconds(1));
        wait_for("a tick after resume", Duration::from_secs(10), || async {
            schedule(api, alice, "tick").await["fired_count"].as_u64() > Some(fired)
        }).await;
        let after = ticks_of_jobs(api, alice, "tick").await;
        assert!((after[ticks.len()] - *ticks.last().unwrap()).num_seconds() >= 2, "paused ticks were not fired late");
        let text = api.http.get(format!("{}/metrics", api.url)).send().await.unwrap().text().await.unwrap();
        let fired_line = text.lines().find(|l| l.starts_with("onceflow_schedule_ticks_total{outcome=\"fired\"}")).unwrap_or_default().to_owned();
        let counted: f64 = fired_line.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0.0);
        assert!(counted as u64 > fired, "the fired ticks are counted: {fired_line:?} (fired {fired} before the pause)");
        let kinds: Vec<String> = api.get("/v1/schedules/tick/events", alice).await.body["events"].as_array().unwrap()
            .iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect();
        assert!(kinds.contains(&"paused".to_owned()) && kinds.contains(&"resumed".to_owned()) && kinds.contains(&"fired".to_owned()));
    }

    async fn overlap_skip_skips_ticks_while_the_previous_job_is_open(db) {
        let server = TestServer::start(db).await;
        let (api, alice) = (&server.api, &server.tokens.client);
        // No worker runs `generate`: the first tick's job stays open as long as we like.
        assert_eq!(put(api, alice, "long", &every_second("skip")).await.status, StatusCode::CREATED);
        wait_for("two ticks skipped for overlap", Duration::from_secs(10), || async {
            schedule(api, alice, "long").await["skipped_overlap_count"].as_u64() >= Some(2)
        }).await;
        let s = schedule(api, alice, "long").await;
        assert_eq!(s["fired_count"], json!(1));
        assert_eq!(ticks_of_jobs(api, alice, "long").await.len(), 1, "one job while it is open");
        let open_job = s["last_job_id"].as_str().unwrap().to_owned();
        let events = api.get("/v1/schedules/long/events", alice).await.body["events"].as_array().cloned().unwrap();
        let skipped: Vec<_> = events.iter().filter(|e| e["type"] == json!("skipped_overlap")).collect();
        assert!(skipped.len() >= 2);
        assert!(skipped.iter().all(|e| e["job_id"] == json!(open_job) && e["tick_at"].is_string()), "names the open job");

        // Once that job is closed, the next tick fires again.
        let cancelled = api.post(&format!("/v1/jobs/{open_job}/cancel"), alice, &json!({})).await;
        assert_eq!(cancelled.status, StatusCode::ACCEPTED);
        wait_for("a tick after the job closed", Duration::from_secs(10), || async {
            schedule(api, alice, "long").await["fired_count"].as_u64() == Some(2)
        }).await;
        assert_eq!(ticks_of_jobs(api, alice, "long").await.len(), 2);
    }

    async fn two_engine_processes_fire_each_tick_exactly_once(db) {
        let tokens = Tokens::mint(&db.engine()).await;
        let a = ServerProcess::start(&db.url(), &[]).await;
        let b = ServerProcess::start(&db.url(), &[]).await;
        assert_eq!(put(&a.api, &tokens.client, "both", &every_second("allow")).await.status, StatusCode::CREATED);
        // Both schedulers wake at each tick and race for it; which one fires it is up to
        // the race. Ticks go on until each process has fired some.
        wait_for("five ticks fired, some by each process", Duration::from_secs(60), || async {
            schedule(&b.api, &tokens.client, "both").await["fired_count"].as_u64() >= Some(5)
                && fired_by(&a.api).await >= 1
                && fired_by(&b.api).await >= 1
        }).await;
        let paused = b.api.post("/v1/schedules/both/pause", &tokens.client, &json!({})).await;
        let fired = paused.body["fired_count"].as_u64().unwrap();
        let ticks = ticks_of_jobs(&a.api, &tokens.client, "both").await;
        assert_eq!(ticks.len() as u64, fired, "exactly one job per tick");
        assert_consecutive_seconds(&ticks);
        // Every `fired` event counts: a tick fired by both processes would be two.
        let events = a.api.get("/v1/schedules/both/events?limit=1000", &tokens.client).await.body["events"].as_array().cloned().unwrap();
        let fired_events: Vec<String> = events.iter().filter(|e| e["type"] == json!("fired")).map(|e| e["tick_at"].to_string()).collect();
        assert_eq!(fired_events.len() as u64, fired, "one fired event per tick: {fired_events:?}");
        assert_eq!(fired_events.iter().collect::<BTreeSet<_>>().len(), fired_events.len(), "no tick fired twice: {fired_events:?}");
        // Each process counts the ticks it fired (its own `/metrics`, counted after each
        // pass commits): together, each tick once; each process, some.
        wait_for("both processes to count the ticks they fired", Duration::from_secs(10), || async {
            fired_by(&a.api).await + fired_by(&b.api).await >= fired
        }).await;
        let (by_a, by_b) = (fired_by(&a.api).await, fired_by(&b.api).await);
        assert_eq!(by_a + by_b, fired, "each tick fired by one process: {by_a} by one, {by_b} by the other");
        assert!(by_a >= 1 && by_b >= 1, "both processes fired ticks: {by_a} and {by_b}");
    }

    async fn an_engine_stopped_across_three_ticks_catches_up_within_the_window(db) {
        let tokens = Tokens::mint(&db.engine()).await;
        let mut server = ServerProcess::start(&db.url(), &[]).await;
        let port = server.port();
        let wide = json!({"cron": "* * * * * *", "overlap": "allow", "catchup_window_s": 60,
                          "job": {"activity": "generate", "providers": ["p"], "input": {}}});
        let narrow = json!({"cron": "* * * * * *", "overlap": "allow", "catchup_window_s": 2,
                            "job": {"activity": "generate", "providers": ["p"], "input": {}}});
        assert_eq!(put(&server.api, &tokens.client, "wide", &wide).await.status, StatusCode::CREATED);
        assert_eq!(put(&server.api, &tokens.client, "narrow", &narrow).await.status, StatusCode::CREATED);
        wait_for("both fired once", Duration::from_secs(10), || async {
            schedule(&server.api, &tokens.client, "wide").await["fired_count"].as_u64() >= Some(1)
                && schedule(&server.api, &tokens.client, "narrow").await["fired_count"].as_u64() >= Some(1)
        }).await;
        server.signal(libc::SIGKILL);
        assert!(!server.wait().success());
        let down_from = Utc::now();
        // No engine runs for more than four ticks.
        tokio::time::sleep(Duration::from_millis(4500)).await;
        let server = ServerProcess::start_at(&db.url(), port, &[]).await;
        let back_at = Utc::now();
        wait_for("both fired after the restart", Duration::from_secs(10), || async {
            let after = |s: Value| s["last_fired_at"].as_str().map(|_| time(&s["last_fired_at"]) >= back_at).unwrap_or(false);
            after(schedule(&server.api, &tokens.client, "wide").await) && after(schedule(&server.api, &tokens.client, "narrow").await)
        }).await;
        server.api.post("/v1/schedules/wide/pause", &tokens.client, &json!({})).await;
        server.api.post("/v1/schedules/narrow/pause", &tokens.client, &json!({})).await;

        // Wide window: every tick of the downtime fired late, once each.
        let wide_ticks = ticks_of_jobs(&server.api, &tokens.client, "wide").await;
        assert_consecutive_seconds(&wide_ticks);
        let missed = wide_ticks.iter().filter(|t| **t > down_from && **t < back_at).count();
        assert!(missed >= 3, "the ticks of the downtime fired on restart: {wide_ticks:?}");
        assert_eq!(schedule(&server.api, &tokens.client, "wide").await["skipped_too_old_count"], json!(0));

        // Narrow window: the older ticks of the downtime were skipped and counted, not fired.
        let narrow = schedule(&server.api, &tokens.client, "narrow").await;
        let skipped = narrow["skipped_too_old_count"].as_u64().unwrap();
        assert!(skipped >= 1, "ticks older than 2 s were skipped: {narrow}");
        let narrow_ticks = ticks_of_jobs(&server.api, &tokens.client, "narrow").await;
        assert_eq!(narrow_ticks.len() as u64, narrow["fired_count"].as_u64().unwrap());
        let events = server.api.get("/v1/schedules/narrow/events", &tokens.client).await.body["events"].as_array().cloned().unwrap();
        let too_old: Vec<_> = events.iter().filter(|e| e["type"] == json!("skipped_too_old")).collect();
        assert_eq!(too_old.iter().map(|e| e["data"]["count"].as_u64().unwrap()).sum::<u64>(), skipped);
        for e in &too_old {
            let (first, last) = (time(&e["tick_at"]), time(&e["data"]["last_tick_at"]));
            assert!(first > down_from - chrono::Duration::seconds(1) && last < back_at, "skipped ticks fell in the downtime");
            assert!(narrow_ticks.iter().all(|t| *t < first || *t > last), "a skipped tick never also fired");
        }
        // Every tick from the first to the last is either fired or skipped: none lost, none doubled.
        let span = (*narrow_ticks.last().unwrap() - narrow_ticks[0]).num_seconds() as u64 + 1;
        assert_eq!(narrow_ticks.len() as u64 + skipped, span, "fired + skipped covers every tick once");
    }
}
