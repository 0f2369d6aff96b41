//! Every guarded UPDATE of the store, with the late or stale writer losing. These run
//! against the `Store` directly, so the guard in the SQL itself is what is tested, not
//! the domain's checks in front of it.

use onceflow_engine::model::{ActivityStatus, AttemptStatus, JobStatus, Scope};
use onceflow_engine::store::{
    ActivityResultCommit, AttemptEnding, JobClosing, JobResultCommit, WinningResult,
};
use onceflow_engine::store::{AttemptLocation, LeaseExtension, NewEvent, NewReplay, Store};
use onceflow_engine::Engine;
use onceflow_tests::{claim_one, llm_job, quick_options, rules, Backend, TestDb, ALICE};
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;

/// A job whose first attempt a worker holds: (store, job id, activity id, attempt id, token).
async fn held(db: &TestDb) -> (Arc<dyn Store>, Engine, Uuid, Uuid, Uuid, Uuid) {
    let engine = db.engine();
    let job = engine
        .submit(ALICE, "k", &llm_job(json!({}), quick_options()))
        .await
        .unwrap()
        .job;
    let task = claim_one(&engine, "primary-llm").await;
    let store = db.store();
    let mut tx = store.begin().await.unwrap();
    let attempt = tx.attempt(ALICE, task.attempt_id).await.unwrap().unwrap();
    drop(tx);
    (
        store,
        engine,
        job.id,
        attempt.activity_id,
        task.attempt_id,
        task.lease_token,
    )
}

rules! {
    async fn the_one_step_win_loses_whole_with_a_stale_version_and_spares_a_moved_job(db) {
        let (store, _, job, activity, attempt, _) = held(db).await;
        let live = [AttemptStatus::Started, AttemptStatus::Unknown, AttemptStatus::Scheduled, AttemptStatus::Cancelled];
        let mut tx = store.begin().await.unwrap();
        let version = tx.lock_job(ALICE, job).await.unwrap().unwrap().version;
        // A stale activity version: nothing at all moves.
        assert_eq!(tx.commit_activity_job_result(&WinningResult { owner_id: ALICE.into(), job_id: job, job_version: version, activity_id: activity, read_version: 7, attempt_id: attempt, result: json!(1) }, &live).await.unwrap(), (false, false));
        assert_eq!(tx.attempt(ALICE, attempt).await.unwrap().unwrap().status, AttemptStatus::Started);
        assert_eq!(tx.lock_job(ALICE, job).await.unwrap().unwrap().status, JobStatus::Running);
        // A stale job version: the activity's slot is taken, the job's is not.
        assert_eq!(tx.commit_activity_job_result(&WinningResult { owner_id: ALICE.into(), job_id: job, job_version: version + 5, activity_id: activity, read_version: 0, attempt_id: attempt, result: json!(1) }, &live).await.unwrap(), (true, false));
        assert_eq!(tx.attempt(ALICE, attempt).await.unwrap().unwrap().status, AttemptStatus::Succeeded);
        assert_eq!(tx.lock_job(ALICE, job).await.unwrap().unwrap().status, JobStatus::Running);
        // The slot is taken: a second winner loses whole.
        let other = Uuid::now_v7();
        assert_eq!(tx.commit_activity_job_result(&WinningResult { owner_id: ALICE.into(), job_id: job, job_version: version, activity_id: activity, read_version: 1, attempt_id: other, result: json!(2) }, &live).await.unwrap(), (false, false));
        assert_eq!(tx.lock_job(ALICE, job).await.unwrap().unwrap().result, None);
        let row = tx.activity(ALICE, activity).await.unwrap().unwrap();
        assert_eq!((row.completed_by, row.result), (Some(attempt), Some(json!(1))));
    }

    async fn the_activity_cas_loses_with_a_stale_version_or_a_taken_slot(db) {
        let (store, _, _, activity, attempt, _) = held(db).await;
        let mut tx = store.begin().await.unwrap();
        assert!(!tx.commit_activity_result(&ActivityResultCommit { owner: ALICE, activity_id: activity, read_version: 7, attempt_id: attempt, result: &json!(1) }).await.unwrap(), "stale version loses");
        assert!(tx.commit_activity_result(&ActivityResultCommit { owner: ALICE, activity_id: activity, read_version: 0, attempt_id: attempt, result: &json!(1) }).await.unwrap());
        assert!(!tx.commit_activity_result(&ActivityResultCommit { owner: ALICE, activity_id: activity, read_version: 0, attempt_id: Uuid::now_v7(), result: &json!(2) }).await.unwrap(), "second writer loses");
        assert!(!tx.commit_activity_result(&ActivityResultCommit { owner: ALICE, activity_id: activity, read_version: 1, attempt_id: Uuid::now_v7(), result: &json!(3) }).await.unwrap(), "completed_by is set");
        let row = tx.activity(ALICE, activity).await.unwrap().unwrap();
        assert_eq!((row.version, row.completed_by, row.result), (1, Some(attempt), Some(json!(1))));
    }

    async fn the_job_cas_and_close_lose_with_a_stale_version(db) {
        let (store, _, job, _, attempt, _) = held(db).await;
        let mut tx = store.begin().await.unwrap();
        let current = tx.lock_job(ALICE, job).await.unwrap().unwrap().version;
        assert!(!tx.commit_job_result(&JobResultCommit { owner: ALICE, job_id: job, version: current + 1, attempt_id: Some(attempt), result: &json!(1) }).await.unwrap());
        assert!(!tx.close_job(&JobClosing { owner: ALICE, job_id: job, version: current - 1, status: JobStatus::Failed, error: None }).await.unwrap());
        assert!(tx.commit_job_result(&JobResultCommit { owner: ALICE, job_id: job, version: current, attempt_id: Some(attempt), result: &json!(1) }).await.unwrap());
        assert!(!tx.close_job(&JobClosing { owner: ALICE, job_id: job, version: current + 1, status: JobStatus::Cancelled, error: None }).await.unwrap(), "a succeeded job stays succeeded");
        assert_eq!(tx.lock_job(ALICE, job).await.unwrap().unwrap().status, JobStatus::Succeeded);
    }

    async fn closing_an_activity_loses_once_its_slot_is_taken(db) {
        let (store, _, _, activity, attempt, _) = held(db).await;
        let mut tx = store.begin().await.unwrap();
        assert!(tx.commit_activity_result(&ActivityResultCommit { owner: ALICE, activity_id: activity, read_version: 0, attempt_id: attempt, result: &json!(1) }).await.unwrap());
        assert!(!tx.close_activity(ALICE, activity, ActivityStatus::Cancelled, None).await.unwrap());
        assert!(!tx.set_activity_status(ALICE, activity, &[ActivityStatus::Succeeded], ActivityStatus::Running).await.unwrap(), "a closed activity never reopens");
        assert_eq!(tx.activity(ALICE, activity).await.unwrap().unwrap().status, ActivityStatus::Succeeded);
    }

    async fn marking_unknown_loses_to_a_lease_that_is_still_running(db) {
        let (store, _, _, _, attempt, _) = held(db).await;
        let mut tx = store.begin().await.unwrap();
        assert!(!tx.mark_attempt_unknown(ALICE, attempt).await.unwrap());
        assert_eq!(tx.attempt(ALICE, attempt).await.unwrap().unwrap().status, AttemptStatus::Started);
    }

    async fn ending_an_attempt_loses_when_its_status_moved(db) {
        let (store, _, _, _, attempt, _) = held(db).await;
        let mut tx = store.begin().await.unwrap();
        assert!(!tx.finish_attempt(&AttemptEnding { owner: ALICE, attempt_id: attempt, from: &[AttemptStatus::Scheduled], to: AttemptStatus::Expired, error: None, outcome: None }).await.unwrap());
        assert!(tx.finish_attempt(&AttemptEnding { owner: ALICE, attempt_id: attempt, from: &[AttemptStatus::Started], to: AttemptStatus::Failed, error: None, outcome: None }).await.unwrap());
        assert!(!tx.finish_attempt(&AttemptEnding { owner: ALICE, attempt_id: attempt, from: &[AttemptStatus::Started], to: AttemptStatus::Succeeded, error: None, outcome: None }).await.unwrap(), "ends once");
        assert!(!tx.cancel_attempt(ALICE, attempt, "ops", "late").await.unwrap(), "a finished attempt is not cancelled");
        assert_eq!(tx.attempt(ALICE, attempt).await.unwrap().unwrap().status, AttemptStatus::Failed);
    }

    async fn lease_extension_and_revival_lose_with_a_wrong_token(db) {
        let (store, _, job, _, attempt, token) = held(db).await;
        let location = AttemptLocation { owner_id: ALICE.into(), job_id: job };
        assert_eq!(store.extend_lease(&location, attempt, Uuid::new_v4(), None).await.unwrap(), LeaseExtension::NotExtended);
        assert_eq!(store.extend_lease(&location, attempt, token, None).await.unwrap(), LeaseExtension::Extended);
        let mut tx = store.begin().await.unwrap();
        assert!(!tx.revive_attempt(ALICE, attempt, token, None).await.unwrap(), "only an unknown attempt revives");
        drop(tx);
        db.execute(&format!("UPDATE attempts SET status = 'unknown' WHERE id = '{attempt}'")).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        assert!(!tx.revive_attempt(ALICE, attempt, Uuid::new_v4(), None).await.unwrap(), "a wrong token never revives");
        assert!(tx.revive_attempt(ALICE, attempt, token, None).await.unwrap());
    }

    async fn a_claim_never_takes_an_attempt_that_is_not_scheduled(db) {
        let engine = db.engine();
        // One job per status an attempt can have besides `scheduled`, and one left
        // `scheduled`. Each attempt is moved by hand, everything else kept as a claimable
        // attempt's (queue, activity, provider, available now): only the status guard in
        // the claim's SQL stands between it and the claim.
        let others = ["started", "unknown", "succeeded", "lost", "failed", "invalid", "expired", "cancelled"];
        let mut attempts = Vec::new();
        for status in others.iter().chain(&["scheduled"]) {
            let job = engine.submit(ALICE, status, &llm_job(json!({}), quick_options())).await.unwrap().job;
            let attempt = job.activities[0].attempts[0].id;
            if *status != "scheduled" {
                let moved = db.execute(&format!("UPDATE attempts SET status = '{status}' WHERE id = '{attempt}'")).await.unwrap();
                assert_eq!(moved, 1, "{status}");
            }
            if *status == "succeeded" {
                // As a winner leaves it: its activity's and its job's slot name it.
                db.execute(&format!("UPDATE activities SET status = 'succeeded', completed_by = '{attempt}', result = '{{}}' WHERE job_id = '{}'", job.id)).await.unwrap();
                db.execute(&format!("UPDATE jobs SET status = 'succeeded', completed_by = '{attempt}', result = '{{}}' WHERE id = '{}'", job.id)).await.unwrap();
            }
            attempts.push((*status, attempt));
        }
        let scheduled = attempts.last().expect("the scheduled one").1;
        let tasks = onceflow_tests::claim(&engine, &Scope::AllOwners, "w", "primary-llm", 100).await;
        let taken: Vec<Uuid> = tasks.iter().map(|t| t.attempt_id).collect();
        let names: Vec<&str> = taken.iter().map(|id| attempts.iter().find(|(_, a)| a == id).map_or("?", |(s, _)| *s)).collect();
        assert_eq!(taken, vec![scheduled], "only the scheduled attempt is claimed, not: {names:?}");
        let statuses = db.strings("SELECT status FROM attempts ORDER BY status").await;
        let mut expected: Vec<String> = others.iter().map(|s| s.to_string()).chain(["started".to_owned()]).collect();
        expected.sort();
        assert_eq!(statuses, expected, "the others were left as they were");
    }
}

/// A replay numbered in one statement that waited for its job's lock while the holder
/// appended an event loses whole; the history stays 1, 2, 3…
///
/// PostgreSQL only: it needs a replay that is seen waiting for the job's row lock. On
/// SQLite every write transaction holds the database's one write lock from its `BEGIN`,
/// so a replay never reads before the holder commits and nothing can be seen waiting: the
/// test would pass there whether or not the two ever met.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_that_waited_on_a_job_whose_holder_wrote_events_loses_whole() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        let job = engine
            .submit(ALICE, "k", &llm_job(json!({}), quick_options()))
            .await
            .unwrap()
            .job;
        let store = db.store();
        // Another writer holds the job and appends to its history.
        let mut holder = store.begin().await.unwrap();
        let row = holder.lock_job(ALICE, job.id).await.unwrap().unwrap();
        let event = NewEvent {
            owner_id: ALICE.into(),
            job_id: job.id,
            kind: "job_replayed",
            attempt_id: None,
            actor: "client:alice".into(),
            data: json!({}),
        };
        holder.append_events(&[event]).await.unwrap();
        let replay = NewReplay {
            owner_id: ALICE.into(),
            idempotency_key: "k".into(),
            fingerprint: row.fingerprint,
            actor: "client:alice".into(),
            data: json!({}),
        };
        let replaying = tokio::spawn({
            let store = store.clone();
            async move { onceflow_engine::domain::replay(store.as_ref(), &[replay]).await }
        });
        // The replay waits on the job's lock (on Citus, on the job's shard).
        while db.lock_waiters().await == 0 {
            tokio::task::yield_now().await;
        }
        holder.commit().await.unwrap();
        let replayed = replaying.await.unwrap();
        // On Citus the store has no one-statement replay: the domain composes it from a
        // transaction's statements (as on SQLite), which number after the lock.
        if !onceflow_tests::on_citus() {
            // Its numbers were read before the holder's event: it loses whole.
            assert!(
                replayed.is_err(),
                "a replay numbered from a stale history must fail: {replayed:?}"
            );
        }
        // Either way the history is numbered 1, 2, 3… and holds one event per writer that won.
        let events = engine.job_events(&Scope::AllOwners, job.id).await.unwrap();
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=events.len() as i64).collect::<Vec<_>>());
        let replays = events.iter().filter(|e| e.kind == "job_replayed").count();
        assert_eq!(replays, 1 + usize::from(replayed.is_ok()), "{events:?}");
        db.assert_integrity().await;
    })
    .await;
}

/// PostgreSQL keeps no foreign keys on the hot tables, so the harness's integrity check
/// is what finds a row without its parent: it must see an attempt whose activity does
/// not exist, and one whose job is not its activity's. (PostgreSQL: SQLite's foreign
/// keys refuse such rows before the check could see them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_integrity_check_finds_attempts_without_their_activity_or_with_another_job() {
    onceflow_tests::time_limit(async {
        use futures::FutureExt;
        for (name, activity, job) in [
            ("no activity", "md5('no-such-activity')::uuid", "job_id"),
            ("another job", "activity_id", "md5('no-such-job')::uuid"),
        ] {
            let db = TestDb::new(Backend::Postgres).await;
            db.engine()
                .submit(ALICE, "k", &llm_job(json!({}), quick_options()))
                .await
                .unwrap();
            db.assert_integrity().await;
            db.execute(&format!(
                "INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status, finished_at)
                 SELECT owner_id, md5('orphan')::uuid, {activity}, {job}, 99, activity, task_queue, provider, 'failed', now()
                 FROM attempts LIMIT 1"
            ))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let checked = std::panic::AssertUnwindSafe(db.assert_integrity())
                .catch_unwind()
                .await;
            assert!(checked.is_err(), "{name}: the integrity check must fail");
        }
    })
    .await;
}

/// The integrity check sees the states no rule allows beyond orphans, on every store: a
/// gap in a job's history, a `completed_by` that names an attempt that did not succeed,
/// a succeeded attempt that is not its activity's winner, and an activity job whose
/// result is not its activity's. Each is made by hand on a fresh database holding one
/// succeeded job, which passes the check before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_integrity_check_finds_gaps_in_a_history_and_slots_no_succeeded_attempt_won() {
    onceflow_tests::time_limit(async {
        use futures::FutureExt;
        use onceflow_engine::model::CompletionOutcome;
        use onceflow_tests::result_of;
        for backend in [Backend::Postgres, Backend::Sqlite] {
            for (name, breakage) in [
                (
                    "a gap in the history",
                    "DELETE FROM job_events WHERE seq = 2",
                ),
                (
                    "a history without its first event",
                    "DELETE FROM job_events WHERE seq = 1",
                ),
                (
                    "a winner that did not succeed",
                    "UPDATE attempts SET status = 'failed'",
                ),
                (
                    "a succeeded attempt that is not the winner",
                    "UPDATE activities SET completed_by = NULL",
                ),
                (
                    "a job won by no attempt",
                    "UPDATE jobs SET completed_by = id",
                ),
                (
                    "a job result that is not its activity's",
                    "UPDATE jobs SET result = '{\"text\": \"other\"}'",
                ),
            ] {
                let db = TestDb::new(backend).await;
                let engine = db.engine();
                engine
                    .submit(ALICE, "k", &llm_job(json!({}), quick_options()))
                    .await
                    .unwrap();
                let task = claim_one(&engine, "primary-llm").await;
                let won = engine
                    .complete(
                        &Scope::AllOwners,
                        task.attempt_id,
                        &result_of(&task, json!({"text": "real"})),
                    )
                    .await
                    .unwrap();
                assert_eq!(won, CompletionOutcome::Won);
                db.assert_integrity().await;
                let changed = db
                    .execute(breakage)
                    .await
                    .unwrap_or_else(|e| panic!("{backend:?}, {name}: {e}"));
                assert!(
                    changed > 0,
                    "{backend:?}, {name}: the breakage changed a row"
                );
                let checked = std::panic::AssertUnwindSafe(db.assert_integrity())
                    .catch_unwind()
                    .await;
                assert!(
                    checked.is_err(),
                    "{backend:?}, {name}: the integrity check must fail"
                );
            }
        }
    })
    .await;
}
