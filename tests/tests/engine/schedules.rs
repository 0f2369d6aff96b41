//! The scheduler's exactly-once (API.md, Schedules): each tick is a submission under key
//! `schedule:{name}:{tick}`, advanced under a version CAS, taken by one engine at a time.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use onceflow_engine::model::Overlap;
use onceflow_engine::{tick_key, JobListQuery, JobRequest, ScheduleRequestBody};
use onceflow_tests::{owner, rules, wait_for, TestDb, ALICE};
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
}
