//! The scheduler's exactly-once (docs/api.md, Schedules): each tick is a submission under key
//! `schedule:{name}:{tick}`, advanced under a version CAS, taken by one engine at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::Utc;
use onceflow_engine::model::Overlap;
use onceflow_engine::{tick_key, JobListQuery, JobRequest, ScheduleRequestBody};
use onceflow_tests::{metric, owner, rules, wait_for, TestDb, ALICE};
use serde_json::json;

fn every_second(overlap: Overlap) -> ScheduleRequestBody {
    ScheduleRequestBody {
        cron: "* * * * * *".to_owned(),
        timezone: None,
        job: json!({"activity": "generate", "providers": ["primary-llm"], "input": {"n": 1}}),
        overlap: Some(overlap),
        catchup_window_s: None,
        paused: None,
    }
}

/// The idempotency keys of alice's jobs, checking no key appears twice.
async fn keys(db: &TestDb) -> Vec<String> {
    let page = db
        .engine()
        .list_jobs(
            &owner(ALICE),
            &JobListQuery {
                limit: Some(500),
                ..JobListQuery::default()
            },
        )
        .await
        .expect("jobs list");
    let keys: Vec<String> = page.jobs.into_iter().map(|j| j.idempotency_key).collect();
    assert_eq!(
        keys.iter().collect::<BTreeSet<_>>().len(),
        keys.len(),
        "no key twice"
    );
    keys
}

rules! {
    async fn concurrent_scheduler_passes_in_many_engines_fire_each_tick_once(db) {
        let (engines, _turn) = db.separate_engines(4).await;
        engines[0].put_schedule(ALICE, "busy", &every_second(Overlap::Allow)).await.unwrap();
        // Four engines run passes as fast as they can for four ticks.
        let until = tokio::time::Instant::now() + Duration::from_millis(4200);
        let mut loops = Vec::new();
        for engine in &engines {
            let engine = engine.clone();
            loops.push(tokio::spawn(async move {
                let mut fired = 0;
                while tokio::time::Instant::now() < until {
                    fired += engine.run_schedules().await.expect("a scheduler pass").fired;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                fired
            }));
        }
        let mut fired = 0;
        for l in loops {
            fired += l.await.unwrap();
        }
        let schedule = engines[0].pause_schedule(ALICE, "busy").await.unwrap();
        assert!(fired >= 3, "ticks fired: {fired}");
        assert_eq!(schedule.fired_count, fired, "the passes together fired each tick once");
        let keys = keys(db).await;
        assert_eq!(keys.len() as u64, fired, "one job per tick");
        assert!(keys.iter().all(|k| k.starts_with("schedule:busy:")));
        assert_eq!(schedule.skipped_too_old_count, 0);
    }

    async fn a_tick_whose_job_exists_already_does_not_make_a_second_one(db) {
        let engine = db.engine();
        let put = engine.put_schedule(ALICE, "once", &every_second(Overlap::Allow)).await.unwrap();
        let tick = put.schedule.next_fire_at.expect("a next tick");
        // As if an engine had submitted this tick's job and died before moving the schedule.
        let request = JobRequest::from_json(&put.schedule.job).unwrap();
        let earlier = engine.submit(ALICE, &tick_key("once", tick), &request).await.unwrap();
        wait_for("the tick to come", Duration::from_secs(5), || async { Utc::now() >= tick }).await;
        let report = engine.run_schedules().await.unwrap();
        assert!(report.fired >= 1);
        let schedule = engine.pause_schedule(ALICE, "once").await.unwrap();
        let keys = keys(db).await;
        assert_eq!(keys.iter().filter(|k| **k == tick_key("once", tick)).count(), 1, "the tick has one job");
        assert_eq!(keys.len() as u64, schedule.fired_count);
        let events = engine.schedule_events(ALICE, "once", None).await.unwrap();
        let fired = events.iter().find(|e| e.kind == "fired" && e.tick_at == Some(tick)).expect("the tick fired");
        assert_eq!(fired.job_id, Some(earlier.job.id), "it names the job that existed");
        assert_eq!(fired.data["existing"], json!(true));
    }

    async fn a_catch_up_fires_every_missed_tick_with_allow_and_only_the_oldest_with_skip(db) {
        // No scheduler runs for three ticks; then one pass catches up (window: 300 s).
        let engine = db.engine();
        let allow = engine.put_schedule(ALICE, "allow", &every_second(Overlap::Allow)).await.unwrap();
        let skip = engine.put_schedule(ALICE, "skip", &every_second(Overlap::Skip)).await.unwrap();
        let first = skip.schedule.next_fire_at.expect("a next tick");
        let third = first + chrono::Duration::seconds(2);
        wait_for("three ticks to pass", Duration::from_secs(10), || async { db.clock().await > third }).await;
        engine.run_schedules().await.unwrap();
        let allow_now = engine.pause_schedule(ALICE, "allow").await.unwrap();
        let skip_now = engine.pause_schedule(ALICE, "skip").await.unwrap();

        // `allow`: each missed tick fires, once, in order.
        assert!(allow_now.fired_count >= 3, "{allow_now:?}");
        assert_eq!((allow_now.skipped_overlap_count, allow_now.skipped_too_old_count), (0, 0));
        let allow_first = allow.schedule.next_fire_at.unwrap();
        let allow_keys: Vec<String> = keys(db).await.into_iter().filter(|k| k.starts_with("schedule:allow:")).collect();
        for n in 0..3 {
            let key = tick_key("allow", allow_first + chrono::Duration::seconds(n));
            assert!(allow_keys.contains(&key), "{key} fired: {allow_keys:?}");
        }

        // `skip`: the oldest missed tick fires; its job is still open (no worker), so every
        // younger missed tick is skipped for overlap, naming that job.
        assert_eq!(skip_now.fired_count, 1, "{skip_now:?}");
        assert!(skip_now.skipped_overlap_count >= 2, "{skip_now:?}");
        assert_eq!(skip_now.last_fired_at, Some(first), "the oldest missed tick is the one that fires");
        let events = engine.schedule_events(ALICE, "skip", None).await.unwrap();
        let fired = events.iter().find(|e| e.kind == "fired").expect("a fired event");
        assert_eq!(fired.tick_at, Some(first));
        let skipped: Vec<_> = events.iter().filter(|e| e.kind == "skipped_overlap").collect();
        assert_eq!(skipped.len() as u64, skip_now.skipped_overlap_count);
        assert!(skipped.iter().all(|e| e.job_id == fired.job_id && e.tick_at > Some(first)), "{skipped:?}");
    }

    async fn a_stale_schedule_writer_loses(db) {
        let engine = db.engine();
        engine.put_schedule(ALICE, "guarded", &every_second(Overlap::Skip)).await.unwrap();
        let store = db.store();
        let read = store.schedule(ALICE, "guarded").await.unwrap().unwrap();
        let mut first = read.clone();
        first.view.fired_count = 1;
        let mut tx = store.begin().await.unwrap();
        assert!(tx.update_schedule(&first).await.unwrap(), "the writer that read the current version wins");
        let mut stale = read.clone();
        stale.view.fired_count = 99;
        stale.view.paused = true;
        stale.view.next_fire_at = None;
        assert!(!tx.update_schedule(&stale).await.unwrap(), "a writer with the old version loses");
        tx.commit().await.unwrap();
        let now = store.schedule(ALICE, "guarded").await.unwrap().unwrap();
        assert_eq!((now.view.fired_count, now.view.paused, now.version), (1, false, read.version + 1));
    }

    async fn a_paused_schedule_is_never_due(db) {
        let engine = db.engine();
        let mut body = every_second(Overlap::Allow);
        body.paused = Some(true);
        let put = engine.put_schedule(ALICE, "quiet", &body).await.unwrap();
        assert_eq!((put.schedule.paused, put.schedule.next_fire_at), (true, None));
        assert_eq!(engine.next_schedule_fire_at().await.unwrap(), None);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(engine.run_schedules().await.unwrap().fired, 0);
        assert!(keys(db).await.is_empty());
    }

    async fn a_skewed_engine_fires_no_tick_early_or_twice(db) {
        // Two engines whose hosts' clocks are an hour fast and an hour slow.
        let fast = db.engine().with_clock_offset(chrono::Duration::hours(1));
        let slow = db.engine().with_clock_offset(-chrono::Duration::hours(1));
        // Three ticks an hour; a catch-up window wide enough that a tick taken early would
        // fire (not be skipped as too old).
        let body = ScheduleRequestBody {
            cron: "0 */20 * * * *".to_owned(),
            catchup_window_s: Some(7200),
            ..every_second(Overlap::Allow)
        };
        let before = db.clock().await;
        let put = db.engine().put_schedule(ALICE, "skewed", &body).await.unwrap();
        let first = put.schedule.next_fire_at.expect("a next tick");
        assert!(first > before, "the first tick is after the database's now");

        // The fast engine's pass takes no tick the database's clock has not reached.
        fast.run_schedules().await.unwrap();
        let reached = db.clock().await;
        let fired = fired_ticks(db).await;
        assert!(fired.keys().all(|t| *t <= reached), "ticks fired early: {fired:?} (database's now {reached})");

        // The slow engine pauses and resumes it: it resumes from the first tick after the
        // database's now, not from a tick that fell before (one that fired, or fell while
        // it was paused).
        slow.pause_schedule(ALICE, "skewed").await.unwrap();
        let resumed_at = db.clock().await;
        let resumed = slow.resume_schedule(ALICE, "skewed").await.unwrap();
        let next = resumed.next_fire_at.expect("a next tick");
        assert!(next > resumed_at, "resumed at {resumed_at}, next tick {next}");

        for engine in [&slow, &fast, &db.engine()] {
            engine.run_schedules().await.unwrap();
        }
        let reached = db.clock().await;
        let fired = fired_ticks(db).await;
        assert!(fired.keys().all(|t| *t <= reached), "ticks fired early: {fired:?} (database's now {reached})");
        assert!(fired.values().all(|n| *n == 1), "a tick fired twice: {fired:?}");
        let schedule = db.engine().schedule(ALICE, "skewed").await.unwrap();
        assert_eq!(schedule.fired_count, fired.len() as u64);
        assert_eq!(keys(db).await.len(), fired.len(), "one job per fired tick");
    }

    async fn a_schedule_that_cannot_fire_is_skipped_counted_and_retried_and_stops_no_other_owners(db) {
        let engine = db.engine();
        let every_second_job = every_second(Overlap::Allow);
        for name in ["bad-cron", "bad-job"] {
            engine.put_schedule(ALICE, name, &every_second_job).await.unwrap();
        }
        engine.put_schedule("bob", "fine", &every_second_job).await.unwrap();
        // Two of alice's schedules go bad in the database: a cron expression and a job body
        // that no longer parse.
        db.execute("UPDATE schedules SET cron = 'not a cron' WHERE owner_id = 'alice' AND name = 'bad-cron'").await.unwrap();
        db.execute(r#"UPDATE schedules SET job = '{"not": "a job"}' WHERE owner_id = 'alice' AND name = 'bad-job'"#).await.unwrap();
        let stored = |name: &'static str| {
            let store = db.store();
            async move { store.schedule(ALICE, name).await.unwrap().expect("the schedule is kept") }
        };
        let (bad_cron, bad_job) = (stored("bad-cron").await, stored("bad-job").await);

        // Bob's schedule fires pass after pass.
        wait_for("bob's schedule to fire", Duration::from_secs(10), || async {
            let report = engine.run_schedules().await.expect("a pass with bad schedules succeeds");
            assert!(report.failed <= 2, "{report:?}");
            engine.schedule("bob", "fine").await.unwrap().fired_count >= 2
        }).await;
        let failures = metric(&engine, r#"onceflow_pass_item_failures_total{pass="scheduler"}"#).await;
        assert!(failures >= 2.0, "each bad schedule counted: {failures}");
        assert_eq!(metric(&engine, r#"onceflow_pass_item_failures_total{pass="reaper"}"#).await, 0.0);

        // The bad ones are left exactly as they were: not moved past their ticks, not lost.
        for (name, before) in [("bad-cron", &bad_cron), ("bad-job", &bad_job)] {
            let now = stored(name).await;
            assert_eq!((now.version, now.view.next_fire_at, now.view.fired_count), (before.version, before.view.next_fire_at, 0), "{name}");
        }
        assert!(keys(db).await.is_empty(), "alice's schedules made no job");

        // Repaired, they fire at the next pass, from the tick they were stuck at (within
        // their catch-up window).
        db.execute("UPDATE schedules SET cron = '* * * * * *' WHERE owner_id = 'alice' AND name = 'bad-cron'").await.unwrap();
        db.execute(&format!("UPDATE schedules SET job = '{}' WHERE owner_id = 'alice' AND name = 'bad-job'", every_second_job.job)).await.unwrap();
        let report = engine.run_schedules().await.unwrap();
        assert_eq!(report.failed, 0);
        for (name, before) in [("bad-cron", &bad_cron), ("bad-job", &bad_job)] {
            let stuck_at = before.view.next_fire_at.expect("a next tick");
            let events = engine.schedule_events(ALICE, name, None).await.unwrap();
            assert!(events.iter().any(|e| e.kind == "fired" && e.tick_at == Some(stuck_at)), "{name} fired its stuck tick: {events:?}");
        }
    }
}
/// How many times each tick of alice's schedule `skewed` fired.
async fn fired_ticks(db: &TestDb) -> BTreeMap<chrono::DateTime<Utc>, usize> {
    let mut fired = BTreeMap::new();
    for e in db
        .engine()
        .schedule_events(ALICE, "skewed", Some(1000))
        .await
        .expect("events read")
    {
        if e.kind == "fired" {
            *fired
                .entry(e.tick_at.expect("a fired event names its tick"))
                .or_default() += 1;
        }
    }
    fired
}
