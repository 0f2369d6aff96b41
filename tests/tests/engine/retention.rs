//! Retention (docs/design.md, Performance shape): finished jobs are pruned by a setting, never
//! by hand. A job is deleted with everything it owns only once it finished longer ago than
//! the retention and none of its attempts is live; its idempotency key is free afterwards.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::model::{CompletionOutcome, JobStatus, Overlap, Scope};
use onceflow_engine::{Engine, EngineError, ScheduleRequestBody};
use onceflow_tests::{
    claim, claim_one, llm_job, owner, quick_options, result_of, rules, TestDb, ALICE,
};
use serde_json::json;
use uuid::Uuid;

const RETENTION: Duration = Duration::from_secs(1);

/// Submits a job and runs it to `succeeded`.
async fn finished(engine: &Engine, key: &str) -> Uuid {
    let job = engine
        .submit(ALICE, key, &llm_job(json!({"key": key}), quick_options()))
        .await
        .unwrap()
        .job;
    let task = claim_one(engine, "primary-llm").await;
    assert_eq!(task.job_id, job.id);
    let outcome = engine
        .complete(
            &Scope::AllOwners,
            task.attempt_id,
            &result_of(&task, json!({"text": key})),
        )
        .await
        .unwrap();
    assert_eq!(outcome, CompletionOutcome::Won);
    job.id
}

/// Rows a job owns, table by table.
async fn rows_of(db: &TestDb, job: Uuid) -> [i64; 5] {
    let count = |table: &str, column: &str| {
        format!("SELECT count(*) FROM {table} WHERE {column} = '{job}'")
    };
    [
        db.count(&count("jobs", "id")).await,
        db.count(&count("activities", "job_id")).await,
        db.count(&count("attempts", "job_id")).await,
        db.count(&count("job_events", "job_id")).await,
        db.count(&count("timers", "job_id")).await,
    ]
}

/// Lets `RETENTION` pass (retention is measured by the database clock, so time must pass).
async fn retention_passes() {
    tokio::time::sleep(RETENTION + Duration::from_millis(300)).await;
}

/// The retention that puts the cutoff, now, halfway between `old` and `fresh` (two
/// readings of the database clock at least `RETENTION` apart): jobs finished before `old`
/// are past it and jobs finished after `fresh` are not, however slowly the test runs.
async fn retention_between(
    db: &TestDb,
    old: chrono::DateTime<chrono::Utc>,
    fresh: chrono::DateTime<chrono::Utc>,
) -> Duration {
    let midpoint = old + (fresh - old) / 2;
    (db.clock().await - midpoint)
        .to_std()
        .expect("the midpoint is in the past")
}

/// What a resubmission racing retention may answer: the old job (it came before the key's
/// job was pruned), the new job it created (the first after), or that new job replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Outcome {
    Old,
    CreatedNew,
    ReplayedNew,
}

/// One round of the race: finished jobs under keys of their own, then, in separate
/// sessions, one engine prunes them, one job per transaction, oldest (`race-0`) first, while
/// three others submit every key again and again, newest key first, until the pass is
/// over, then once more. Checks that every answer is an allowed one; answers how many of
/// each came while the pass ran (`true`) and after.
async fn race_retention_with_resubmissions(
    db: &TestDb,
    round: usize,
) -> HashMap<(Outcome, bool), usize> {
    const KEYS: usize = 24;
    const CLICKERS: usize = 3;
    let engine = db.engine();
    let request = |key: &str| llm_job(json!({"key": key}), quick_options());
    // An owner per round, so that a round claims and counts its own jobs only.
    let racer = format!("racer-{round}");
    let keys: Vec<String> = (0..KEYS).map(|i| format!("race-{i}")).collect();
    let mut old = HashMap::new();
    for key in &keys {
        old.insert(
            key.clone(),
            engine
                .submit(&racer, key, &request(key))
                .await
                .unwrap()
                .job
                .id,
        );
    }
    let mut left = KEYS;
    while left > 0 {
        let tasks = claim(&engine, &owner(&racer), "w1", "primary-llm", 100).await;
        for task in &tasks {
            engine
                .complete(
                    &Scope::AllOwners,
                    task.attempt_id,
                    &result_of(task, json!({})),
                )
                .await
                .unwrap();
        }
        left -= tasks.len();
    }
    retention_passes().await;

    let (engines, _turn) = db.separate_engines(CLICKERS + 1).await;
    let (pruner, clickers) = engines.split_first().expect("engines");
    let pass_over = AtomicBool::new(false);
    let pruning = async {
        let pruned = pruner.prune_finished_jobs(RETENTION, 1).await;
        pass_over.store(true, Ordering::SeqCst);
        pruned
    };
    // Per clicker, in its order: (key, sent while the pass ran, answer).
    let clicking = join_all(clickers.iter().map(|e| {
        let (keys, pass_over, racer) = (&keys, &pass_over, &racer);
        async move {
            let mut answers = Vec::new();
            loop {
                let last_round = pass_over.load(Ordering::SeqCst);
                for key in keys.iter().rev() {
                    let during = !pass_over.load(Ordering::SeqCst);
                    answers.push((
                        key.clone(),
                        during,
                        e.submit(racer, key, &request(key)).await,
                    ));
                }
                if last_round {
                    return answers;
                }
            }
        }
    }));
    let (pruned, clicks) = tokio::join!(pruning, clicking);
    let pruned = pruned.expect("the retention pass succeeds");

    let mut outcomes: HashMap<(Outcome, bool), usize> = HashMap::new();
    let mut new_ids: HashMap<String, HashSet<Uuid>> = HashMap::new();
    let mut created: HashMap<String, usize> = HashMap::new();
    for answers in &clicks {
        // Per clicker and key: the old job until it was pruned, then only the new one.
        let mut saw_new: HashSet<&str> = HashSet::new();
        for (key, during, answer) in answers {
            let s = answer
                .as_ref()
                .unwrap_or_else(|e| panic!("a submission of {key} racing retention: {e:?}"));
            let outcome = if s.job.id == old[key] {
                assert!(s.replayed, "{key}: the old job is only ever replayed");
                assert!(
                    !saw_new.contains(key.as_str()),
                    "{key}: the old job answered after the new one"
                );
                Outcome::Old
            } else {
                saw_new.insert(key);
                new_ids.entry(key.clone()).or_default().insert(s.job.id);
                if s.replayed {
                    Outcome::ReplayedNew
                } else {
                    *created.entry(key.clone()).or_default() += 1;
                    Outcome::CreatedNew
                }
            };
            *outcomes.entry((outcome, *during)).or_default() += 1;
        }
    }
    let mut renewed = 0;
    for key in &keys {
        let now: Vec<String> = db
            .strings(&format!(
                "SELECT CAST(id AS TEXT) FROM jobs WHERE owner_id = '{racer}' AND idempotency_key = '{key}'"
            ))
            .await;
        assert_eq!(
            now.len(),
            1,
            "one job per key, the old or the new one: {key} has {now:?}"
        );
        match new_ids.get(key) {
            Some(ids) => {
                renewed += 1;
                assert_eq!(ids.len(), 1, "{key}: one new job: {ids:?}");
                assert_eq!(
                    created.get(key),
                    Some(&1),
                    "{key}: created by exactly one submission"
                );
                assert_eq!(
                    now,
                    vec![ids.iter().next().unwrap().to_string()],
                    "{key}: the new job holds the key"
                );
            }
            None => assert_eq!(
                now,
                vec![old[key].to_string()],
                "{key}: never renewed, so the old job was kept"
            ),
        }
    }
    // A key is renewed only once its job was pruned (and every pruned key was renewed by
    // the round after the pass, above: one job per key); a new job is never pruned (it is
    // not finished). The pass also prunes the jobs earlier rounds kept.
    assert!(
        pruned >= renewed as u64,
        "{pruned} pruned, {renewed} renewed"
    );
    outcomes
}

rules! {
    async fn finished_jobs_past_retention_are_pruned_with_everything_they_own_and_nothing_else(db) {
        let engine = db.engine();
        // Finished before the retention runs out: one succeeded, one cancelled by its owner.
        let succeeded = finished(&engine, "succeeded").await;
        let cancelled = engine.submit(ALICE, "cancelled", &llm_job(json!({}), quick_options())).await.unwrap().job.id;
        assert_eq!(engine.cancel_job(&owner(ALICE), cancelled).await.unwrap().status, JobStatus::Cancelled);
        // Finished as long ago, but one of its attempts is still live (its late result
        // must still find the job): beside the winner, a second attempt left `unknown`.
        let with_live_attempt = finished(&engine, "with-live-attempt").await;
        let live_id = match db.backend() {
            onceflow_tests::Backend::Postgres => format!("CAST('{}' AS uuid)", Uuid::now_v7()),
            onceflow_tests::Backend::Sqlite => format!("'{}'", Uuid::now_v7()),
        };
        db.execute(&format!(
            "INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status, available_at, created_at)
             SELECT owner_id, {live_id}, activity_id, job_id, 2, activity, task_queue, provider, 'unknown', available_at, created_at
             FROM attempts WHERE job_id = '{with_live_attempt}'"
        )).await.unwrap();
        // Submitted as long ago, never finished.
        let queued = engine.submit(ALICE, "queued", &llm_job(json!({}), quick_options())).await.unwrap().job.id;
        let old = db.clock().await;
        retention_passes().await;
        let fresh = db.clock().await;
        // Created before the retention ran out, finished just now.
        let finished_late = {
            let task = claim(&engine, &owner(ALICE), "w1", "primary-llm", 1).await.pop().expect("the queued job's attempt");
            assert_eq!(task.job_id, queued);
            engine.complete(&Scope::AllOwners, task.attempt_id, &result_of(&task, json!({}))).await.unwrap();
            task.job_id
        };
        let recent = finished(&engine, "recent").await;
        let queued_now = engine.submit(ALICE, "queued-now", &llm_job(json!({}), quick_options())).await.unwrap().job.id;
        let before: HashMap<Uuid, [i64; 5]> =
            join_all([succeeded, cancelled, with_live_attempt, finished_late, queued_now, recent].map(|j| async move { (j, rows_of(db, j).await) }))
                .await
                .into_iter()
                .collect();
        assert!(before[&succeeded][3] >= 3, "the job had events: {:?}", before[&succeeded]);

        // One job per transaction, so the pass needs several.
        // The cutoff sits between the two groups whatever the machine's load.
        let pruned = engine.prune_finished_jobs(retention_between(db, old, fresh).await, 1).await.unwrap();
        assert_eq!(pruned, 2, "the succeeded and the cancelled job");
        for gone in [succeeded, cancelled] {
            assert_eq!(rows_of(db, gone).await, [0; 5], "nothing of job {gone} is left");
            assert!(matches!(engine.job(&Scope::AllOwners, gone).await, Err(EngineError::NotFound)));
        }
        for kept in [with_live_attempt, finished_late, queued_now, recent] {
            assert_eq!(rows_of(db, kept).await, before[&kept], "job {kept} is untouched");
        }
        assert_eq!(
            engine.prune_finished_jobs(retention_between(db, old, fresh).await, 1).await.unwrap(),
            0,
            "a second pass finds nothing"
        );

        // A pruned job's key is free: the same key makes a new job, with any request.
        let again = engine.submit(ALICE, "succeeded", &llm_job(json!({"key": "succeeded"}), quick_options())).await.unwrap();
        assert!(!again.replayed);
        assert_ne!(again.job.id, succeeded);
        let other = engine.submit(ALICE, "cancelled", &llm_job(json!({"another": "request"}), quick_options())).await.unwrap();
        assert!(!other.replayed);
        // A kept job's key still dedups.
        let replay = engine.submit(ALICE, "recent", &llm_job(json!({"key": "recent"}), quick_options())).await.unwrap();
        assert!(replay.replayed);
        assert_eq!(replay.job.id, recent);
    }

    async fn a_pruned_workflow_job_takes_its_signals_with_it(db) {
        let engine = db.engine();
        let request = onceflow_engine::JobRequest::from_json(&json!({"workflow": "approval", "input": {}})).unwrap();
        let pruned = engine.submit(ALICE, "pruned", &request).await.unwrap().job.id;
        let kept = engine.submit(ALICE, "kept", &request).await.unwrap().job.id;
        let approve = onceflow_engine::SignalRequest::from_json(&json!({"name": "approve", "payload": {"by": "ann"}})).unwrap();
        for job in [pruned, kept] {
            engine.signal(&owner(ALICE), job, "click", &approve).await.unwrap();
        }
        engine.cancel_job(&owner(ALICE), pruned).await.unwrap();
        let old = db.clock().await;
        retention_passes().await;
        let fresh = db.clock().await;
        assert_eq!(engine.prune_finished_jobs(retention_between(db, old, fresh).await, 10).await.unwrap(), 1);
        assert_eq!(db.count(&format!("SELECT count(*) FROM signals WHERE job_id = '{pruned}'")).await, 0);
        assert_eq!(db.count(&format!("SELECT count(*) FROM signals WHERE job_id = '{kept}'")).await, 1, "an open job keeps its signals");
    }

    async fn a_pruned_workflow_job_takes_its_patch_markers_with_it(db) {
        use onceflow_protocol::workflow::{CompleteWorkflowTaskRequest, Task, WorkflowCommand};
        let engine = db.engine();
        let request = onceflow_engine::JobRequest::from_json(&json!({"workflow": "order", "input": {}})).unwrap();
        let pruned = engine.submit(ALICE, "pruned", &request).await.unwrap().job.id;
        let kept = engine.submit(ALICE, "kept", &request).await.unwrap().job.id;
        let claim = onceflow_engine::ClaimRequest { worker_id: "w".into(), task_queue: "default".into(), providers: vec![], max_tasks: 2 };
        for task in engine.claim_tasks(&Scope::AllOwners, &claim, &["order".to_owned()]).await.unwrap() {
            let Task::Workflow(task) = task else { continue };
            let commands = vec![WorkflowCommand::RecordPatch { id: "discount".into(), deprecated: false }];
            engine.complete_workflow_task(&Scope::AllOwners, task.job_id, &CompleteWorkflowTaskRequest { lease_token: task.lease_token, read_version: task.read_version, commands, sticky_horizon: None }).await.unwrap();
        }
        assert_eq!(db.count("SELECT count(*) FROM workflow_patches").await, 2);
        engine.cancel_job(&owner(ALICE), pruned).await.unwrap();
        let old = db.clock().await;
        retention_passes().await;
        let fresh = db.clock().await;
        assert_eq!(engine.prune_finished_jobs(retention_between(db, old, fresh).await, 10).await.unwrap(), 1);
        assert_eq!(db.count(&format!("SELECT count(*) FROM workflow_patches WHERE job_id = '{pruned}'")).await, 0);
        assert_eq!(db.count(&format!("SELECT count(*) FROM workflow_patches WHERE job_id = '{kept}'")).await, 1, "an open job keeps its markers");
    }

    async fn schedule_events_past_retention_are_pruned_and_the_schedule_is_kept(db) {
        let engine = db.engine();
        let body = |paused: bool| ScheduleRequestBody {
            cron: "0 0 * * * *".to_owned(),
            timezone: None,
            job: json!({"activity": "generate", "providers": ["primary-llm"], "input": {}}),
            overlap: Some(Overlap::Skip),
            catchup_window_s: None,
            paused: Some(paused),
        };
        engine.put_schedule(ALICE, "hourly", &body(false)).await.unwrap();
        let old = engine.schedule_events(ALICE, "hourly", None).await.unwrap();
        assert!(!old.is_empty(), "creating the schedule wrote an event");
        retention_passes().await;
        engine.pause_schedule(ALICE, "hourly").await.unwrap();
        let all = engine.schedule_events(ALICE, "hourly", None).await.unwrap();
        assert!(all.len() > old.len(), "pausing wrote an event");

        let pruned = engine.prune_schedule_events(RETENTION, 1).await.unwrap();
        assert_eq!(pruned as usize, old.len(), "the events older than the retention");
        let left = engine.schedule_events(ALICE, "hourly", None).await.unwrap();
        assert_eq!(left.iter().map(|e| e.id).collect::<Vec<_>>(), all[old.len()..].iter().map(|e| e.id).collect::<Vec<_>>(), "the recent ones stay");
        let schedule = engine.schedule(ALICE, "hourly").await.expect("the schedule itself is kept");
        assert!(schedule.paused);
    }

    async fn resubmissions_racing_retention_get_the_old_job_or_one_new_job_never_an_error(db) {
        // The race is left to the machine's scheduling, which can keep the two apart (on
        // SQLite the pass may take the write lock again and again until it is over): a
        // round whose resubmissions all came after, or all before, proves nothing, so up
        // to five rounds run, each on keys of its own, until one raced.
        let mut rounds = Vec::new();
        for round in 0..5 {
            let outcomes = race_retention_with_resubmissions(db, round).await;
            let during = |o| outcomes.get(&(o, true)).copied().unwrap_or(0);
            let raced = during(Outcome::Old) > 0 && during(Outcome::CreatedNew) + during(Outcome::ReplayedNew) > 0;
            rounds.push(outcomes);
            if raced {
                return;
            }
        }
        panic!("in no round did resubmissions meet both a job not yet pruned and a pruned key while the pass ran: {rounds:?}");
    }
}

/// A job another transaction holds is passed over, not waited for, and the pass goes on
/// to the jobs after it; the next pass starts from the oldest again and takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_held_by_another_transaction_is_passed_over_and_pruned_next_pass() {
    onceflow_tests::time_limit(async {
        use sqlx::Connection;
        let db = TestDb::new(onceflow_tests::Backend::Postgres).await;
        let engine = db.engine();
        let mut jobs = Vec::new();
        for i in 0..4 {
            jobs.push(finished(&engine, &format!("held-{i}")).await);
        }
        retention_passes().await;
        let mut holder = db.pg_connection().await.expect("PostgreSQL");
        let mut held = holder.begin().await.expect("begin");
        sqlx::query("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE")
            .bind(jobs[0])
            .execute(&mut *held)
            .await
            .expect("lock the oldest job");

        // Batches of one: the held job is the oldest, so every batch would meet it first.
        let pass = tokio::time::timeout(
            Duration::from_secs(20),
            engine.prune_finished_jobs(RETENTION, 1),
        )
        .await;
        assert_eq!(
            pass.expect("the pass never waits for the held job")
                .unwrap(),
            3,
            "every job but the held one"
        );
        assert_eq!(
            rows_of(&db, jobs[0]).await[0],
            1,
            "the held job is still there"
        );
        held.commit().await.expect("release");
        assert_eq!(
            engine.prune_finished_jobs(RETENTION, 1).await.unwrap(),
            1,
            "the next pass takes it"
        );
        assert_eq!(db.count("SELECT count(*) FROM jobs").await, 0);
        db.assert_integrity().await;
    })
    .await;
}
