//! Concurrent calls on one engine share statements (natural batching), and every call is
//! still judged alone: one job per key, one winner per activity, each completion answered
//! as it would be answered on its own.

use std::collections::HashMap;

use futures::future::join_all;
use onceflow_engine::model::{AttemptStatus, CompletionOutcome, JobStatus, Scope};
use onceflow_engine::store::AttemptEnding;
use onceflow_engine::store::WinningResult;
use onceflow_engine::{Completion, CompletionBody, Engine, EngineError};
use onceflow_tests::{
    attempt_view, claim, error_of, event_types, llm_job, owner, quick_options, result_of, rules,
    text_schema, ALICE,
};
use serde_json::json;
use uuid::Uuid;

/// What a submission answered.
type Answer = Result<onceflow_engine::Submission, EngineError>;

/// The sum and count of the `onceflow_batch_items{kind}` histogram.
async fn batch_sizes(engine: &Engine, kind: &str) -> (f64, f64) {
    let text = engine.metrics_text().await.expect("metrics");
    let read = |suffix: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("onceflow_batch_items_{suffix}{{kind=\"{kind}\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (read("sum"), read("count"))
}

/// `n` jobs of ALICE, each with its primary attempt handed out.
async fn held_jobs(engine: &Engine, n: usize) -> Vec<onceflow_engine::model::ActivityTask> {
    for i in 0..n {
        engine
            .submit(
                ALICE,
                &format!("held-{i}"),
                &llm_job(json!({ "i": i }), quick_options()),
            )
            .await
            .unwrap();
    }
    let tasks = claim(engine, &owner(ALICE), "w1", "primary-llm", n as u32).await;
    assert_eq!(tasks.len(), n);
    tasks
}

rules! {
    async fn concurrent_submissions_to_one_engine_make_one_job_per_key(db) {
        let engine = db.engine();
        let keys = 40;
        // Four identical requests per key and one with other input, all at once.
        let mut calls = Vec::new();
        for k in 0..keys {
            for copy in 0..5 {
                let input = if copy == 4 { json!({ "k": k, "other": true }) } else { json!({ "k": k }) };
                calls.push((format!("key-{k}"), input));
            }
        }
        let answers = join_all(calls.iter().map(|(key, input)| {
            let engine = engine.clone();
            let request = llm_job(input.clone(), quick_options());
            async move { engine.submit(ALICE, key, &request).await }
        }))
        .await;
        assert_eq!(db.count("SELECT count(*) FROM jobs").await as usize, keys, "one job per key");
        assert_eq!(db.count("SELECT count(*) FROM attempts").await as usize, keys, "one first attempt per job");
        let mut per_key: HashMap<&str, Vec<(&serde_json::Value, &Answer)>> = HashMap::new();
        for ((key, input), answer) in calls.iter().zip(&answers) {
            per_key.entry(key.as_str()).or_default().push((input, answer));
        }
        for (key, answers) in per_key {
            let created: Vec<_> = answers.iter().filter_map(|(i, a)| a.as_ref().ok().filter(|s| !s.replayed).map(|s| (*i, s))).collect();
            assert_eq!(created.len(), 1, "{key}: exactly one submission created the job");
            let (winning_input, job) = (created[0].0, &created[0].1.job);
            for (input, answer) in &answers {
                match answer {
                    Ok(s) => {
                        assert_eq!(s.job.id, job.id, "{key}: every accepted submission answers the one job");
                        let attempts: Vec<usize> = s.job.activities.iter().map(|a| a.attempts.len()).collect();
                        assert_eq!(attempts, vec![1], "{key}: every answer shows the job's activity and its first attempt");
                        assert_eq!(*input, winning_input, "{key}: only the same request is a replay");
                    }
                    Err(EngineError::IdempotencyKeyReused { job_id }) => {
                        assert_eq!(*job_id, job.id);
                        assert_ne!(*input, winning_input, "{key}: only another request is refused");
                    }
                    Err(e) => panic!("{key}: unexpected {e:?}"),
                }
            }
            let events = event_types(&engine, job.id).await;
            assert_eq!(events[..2], ["job_created", "attempt_scheduled"], "{key}: replays are recorded after the creation: {events:?}");
            assert_eq!(events.iter().filter(|e| *e == "job_created").count(), 1, "{key}: {events:?}");
            let accepted = answers.iter().filter(|(_, a)| a.is_ok()).count();
            assert_eq!(events.iter().filter(|e| *e == "job_replayed").count(), accepted - 1, "{key}: one event per replay: {events:?}");
        }
        let (items, flushes) = batch_sizes(&engine, "submissions").await;
        assert!(flushes > 0.0 && items > flushes, "concurrent submissions shared flushes: {items} items in {flushes} flushes");

    }

    async fn concurrent_replays_on_one_engine_each_answer_the_job_as_it_is_now(db) {
        let engine = db.engine();
        let keys = 20;
        let mut originals = Vec::new();
        for k in 0..keys {
            originals.push(engine.submit(ALICE, &format!("r-{k}"), &llm_job(json!({ "k": k }), quick_options())).await.unwrap().job);
        }
        // The first job has finished: its replays must show that, not the job as created.
        let task = claim(&engine, &owner(ALICE), "w1", "primary-llm", 1).await.remove(0);
        assert_eq!(task.job_id, originals[0].id);
        engine.complete(&owner(ALICE), task.attempt_id, &result_of(&task, json!({"text": "done"}))).await.unwrap();
        // Six replays and one other request per key, all at once.
        let calls: Vec<(usize, bool)> = (0..keys).flat_map(|k| (0..7).map(move |copy| (k, copy == 6))).collect();
        let answers = join_all(calls.iter().map(|&(k, other)| {
            let engine = engine.clone();
            let input = if other { json!({ "k": k, "other": true }) } else { json!({ "k": k }) };
            async move { engine.submit(ALICE, &format!("r-{k}"), &llm_job(input, quick_options())).await }
        }))
        .await;
        for (&(k, other), answer) in calls.iter().zip(&answers) {
            match (other, answer) {
                (false, Ok(s)) => {
                    assert!(s.replayed);
                    assert_eq!(s.job.id, originals[k].id);
                    let expected = if k == 0 { JobStatus::Succeeded } else { JobStatus::Queued };
                    assert_eq!(s.job.status, expected, "key {k}: the job as it is now");
                }
                (true, Err(EngineError::IdempotencyKeyReused { job_id })) => assert_eq!(*job_id, originals[k].id),
                (_, other_answer) => panic!("key {k}: unexpected {other_answer:?}"),
            }
        }
        assert_eq!(db.count("SELECT count(*) FROM jobs").await as usize, keys, "nothing created");
        for job in &originals {
            let events = event_types(&engine, job.id).await;
            assert_eq!(events.iter().filter(|e| *e == "job_replayed").count(), 6, "one event per replay: {events:?}");
        }
        let (items, flushes) = batch_sizes(&engine, "replays").await;
        assert!(flushes > 0.0 && items >= flushes, "replays went through the shared path: {items} items in {flushes} flushes");
    }

    async fn concurrent_completions_on_one_engine_are_each_judged_alone(db) {
        let engine = db.engine();
        engine.register_contract(ALICE, "generate", &text_schema()).await.unwrap();
        let tasks = held_jobs(&engine, 40).await;
        let wrong = |_: &onceflow_engine::model::ActivityTask| Completion {
            lease_token: Uuid::now_v7(),
            body: CompletionBody::Result(json!({ "text": "forged" })),
        };
        // 0..10 a result sent twice at once; 10..20 a forged token beside the real one;
        // 20..30 an error; 30..40 a result that breaks the contract.
        let mut calls: Vec<(usize, Completion)> = Vec::new();
        for (i, t) in tasks.iter().enumerate() {
            match i / 10 {
                0 => {
                    calls.push((i, result_of(t, json!({ "text": format!("r{i}") }))));
                    calls.push((i, result_of(t, json!({ "text": format!("r{i}") }))));
                }
                1 => {
                    calls.push((i, wrong(t)));
                    calls.push((i, result_of(t, json!({ "text": format!("r{i}") }))));
                }
                2 => calls.push((i, error_of(t, "provider down", false))),
                _ => calls.push((i, result_of(t, json!({ "words": 3 })))),
            }
        }
        let answers = join_all(calls.iter().map(|(i, c)| {
            let engine = engine.clone();
            let attempt = tasks[*i].attempt_id;
            async move { engine.complete(&Scope::AllOwners, attempt, c).await }
        }))
        .await;
        for ((i, c), answer) in calls.iter().zip(&answers) {
            let forged = c.lease_token != tasks[*i].lease_token;
            match (i / 10, answer) {
                (0, Ok(CompletionOutcome::Won)) => {}
                (1, Err(EngineError::LeaseLost)) if forged => {}
                (1, Ok(CompletionOutcome::Won)) if !forged => {}
                (2, Ok(CompletionOutcome::Recorded)) => {}
                (3, Err(EngineError::ContractViolation { .. })) => {}
                (group, other) => panic!("completion {i} (group {group}, forged {forged}) answered {other:?}"),
            }
        }
        for (i, t) in tasks.iter().enumerate() {
            let job = engine.job(&owner(ALICE), t.job_id).await.unwrap();
            let attempt = &job.activities[0].attempts[0];
            let events = event_types(&engine, t.job_id).await;
            let count = |kind: &str| events.iter().filter(|e| *e == kind).count();
            match i / 10 {
                0 | 1 => {
                    assert_eq!(job.status, JobStatus::Succeeded, "job {i}");
                    assert_eq!(job.result, Some(json!({ "text": format!("r{i}") })), "job {i}");
                    assert_eq!(job.activities[0].version, 1, "job {i}: the slot was taken once");
                    assert_eq!((count("attempt_succeeded"), count("job_succeeded")), (1, 1), "job {i}: {events:?}");
                }
                2 => {
                    assert_eq!(attempt.status, AttemptStatus::Failed, "job {i}");
                    assert_eq!(count("attempt_failed"), 1, "job {i}: {events:?}");
                }
                _ => {
                    assert_eq!(attempt.status, AttemptStatus::Invalid, "job {i}");
                    assert_eq!(job.result, None, "job {i}: an invalid result is never committed");
                    assert_eq!(count("attempt_invalid"), 1, "job {i}: {events:?}");
                }
            }
        }
        let (items, flushes) = batch_sizes(&engine, "completions").await;
        assert!(flushes > 0.0 && items > flushes, "concurrent completions shared flushes: {items} items in {flushes} flushes");
    }

    async fn the_batched_win_takes_each_slot_alone_and_a_stale_writer_loses_whole(db) {
        let engine = db.engine();
        let tasks = held_jobs(&engine, 3).await;
        let store = db.store();
        let mut tx = store.begin().await.unwrap();
        let ids: Vec<Uuid> = tasks.iter().map(|t| t.attempt_id).collect();
        let locked = tx.lock_jobs_of_attempts(&ids).await.unwrap();
        assert_eq!(locked.len(), 3, "every attempt is found with its job");
        let win = |t: &onceflow_engine::model::ActivityTask| {
            let l = locked.iter().find(|l| l.attempt.id == t.attempt_id).expect("locked");
            WinningResult::of(&l.job, &l.attempt, &json!({ "text": "ok" }))
        };
        let fresh = win(&tasks[0]);
        let stale_activity = WinningResult { read_version: 7, ..win(&tasks[1]) };
        let stale_job = WinningResult { job_version: 99, ..win(&tasks[2]) };
        let live = [AttemptStatus::Started, AttemptStatus::Unknown, AttemptStatus::Scheduled, AttemptStatus::Cancelled];
        let taken = tx.commit_activity_job_results(&[fresh, stale_activity, stale_job], &live).await.unwrap();
        assert_eq!(taken, vec![(true, true), (false, false), (true, false)]);
        // The stale activity version moved nothing at all.
        let loser = tx.attempt(ALICE, tasks[1].attempt_id).await.unwrap().unwrap();
        assert_eq!((loser.status, loser.completion_outcome), (AttemptStatus::Started, None));
        let loser_activity = tx.activity(ALICE, loser.activity_id).await.unwrap().unwrap();
        assert_eq!((loser_activity.version, loser_activity.completed_by), (0, None));
        assert_eq!(tx.lock_job(ALICE, tasks[1].job_id).await.unwrap().unwrap().status, JobStatus::Running);
        // A stale job version: the activity's slot is taken, the job's is not.
        assert_eq!(tx.lock_job(ALICE, tasks[2].job_id).await.unwrap().unwrap().status, JobStatus::Running);
        assert_eq!(tx.lock_job(ALICE, tasks[0].job_id).await.unwrap().unwrap().status, JobStatus::Succeeded);
        // A second batch for the taken slot loses whole.
        let again = WinningResult { attempt_id: Uuid::now_v7(), read_version: 1, ..win(&tasks[0]) };
        assert_eq!(tx.commit_activity_job_results(&[again], &live).await.unwrap(), vec![(false, false)]);
        assert_eq!(tx.lock_job(ALICE, tasks[0].job_id).await.unwrap().unwrap().completed_by, Some(tasks[0].attempt_id));
    }

    async fn locked_attempts_come_with_the_current_contract_of_their_activity(db) {
        let engine = db.engine();
        let tasks = held_jobs(&engine, 2).await;
        let ids: Vec<Uuid> = tasks.iter().map(|t| t.attempt_id).collect();
        let store = db.store();
        let contracts = |locked: &[onceflow_engine::store::LockedAttempt]| -> Vec<Option<(String, String)>> {
            locked.iter().map(|l| l.contract.as_ref().map(|c| (c.owner.clone(), c.contract_hash.clone()))).collect()
        };
        let mut tx = store.begin().await.unwrap();
        assert_eq!(contracts(&tx.lock_jobs_of_attempts(&ids).await.unwrap()), vec![None, None], "no contract yet");
        tx.commit().await.unwrap();
        // The platform's contract applies to every owner...
        let platform = engine.register_contract("*", "generate", &json!({ "type": "object" })).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let expected = Some(("*".to_owned(), platform.clone()));
        assert_eq!(contracts(&tx.lock_jobs_of_attempts(&ids).await.unwrap()), vec![expected.clone(), expected]);
        tx.commit().await.unwrap();
        // ... until the owner registers its own.
        let own = engine.register_contract(ALICE, "generate", &text_schema()).await.unwrap();
        assert_ne!(own, platform);
        let mut tx = store.begin().await.unwrap();
        let expected = Some((ALICE.to_owned(), own));
        assert_eq!(contracts(&tx.lock_jobs_of_attempts(&ids).await.unwrap()), vec![expected.clone(), expected]);
        tx.commit().await.unwrap();
    }

    async fn a_completion_batch_finds_no_attempt_of_another_owner(db) {
        let engine = db.engine();
        let tasks = held_jobs(&engine, 2).await;
        let answers = join_all(tasks.iter().map(|t| {
            let engine = engine.clone();
            let completion = result_of(t, json!({ "text": "x" }));
            async move { engine.complete(&owner("mallory"), t.attempt_id, &completion).await }
        }))
        .await;
        for answer in answers {
            assert!(matches!(answer, Err(EngineError::NotFound)), "{answer:?}");
        }
        for t in &tasks {
            assert_eq!(engine.job(&owner(ALICE), t.job_id).await.unwrap().status, JobStatus::Running);
        }
    }

    async fn workers_completing_and_claiming_in_one_call_take_each_attempt_once(db) {
        let engine = db.engine();
        let n = 160;
        for i in 0..n {
            engine.submit(ALICE, &format!("cycle-{i}"), &llm_job(json!({ "i": i }), quick_options())).await.unwrap();
        }
        // 8 workers at once, each cycle completing what it took and claiming more in one
        // call (on PostgreSQL, two transactions at once), with a forged completion in every cycle.
        let won = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let workers = (0..8).map(|w| {
            let engine = engine.clone();
            let won = won.clone();
            async move {
                let request = onceflow_engine::ClaimRequest {
                    worker_id: format!("w{w}"),
                    task_queue: "default".to_owned(),
                    providers: vec![("generate".to_owned(), "primary-llm".to_owned())],
                    max_tasks: 4,
                };
                let (mut taken, mut outcomes) = (Vec::new(), Vec::new());
                let mut held: Vec<onceflow_engine::model::ActivityTask> = Vec::new();
                loop {
                    let mut completions: Vec<(Uuid, Completion)> = held.iter().map(|t| (t.attempt_id, result_of(t, json!({"text": "ok"})))).collect();
                    if let Some(t) = held.first() {
                        completions.push((t.attempt_id, Completion { lease_token: Uuid::now_v7(), body: CompletionBody::Result(json!({"text": "forged"})) }));
                    }
                    let (answers, tasks) = engine.complete_and_claim(&owner(ALICE), &completions, &request).await.expect("the poll is valid");
                    for (answer, (attempt_id, c)) in answers.into_iter().zip(&completions) {
                        let forged = held.iter().all(|t| t.lease_token != c.lease_token);
                        if answer.is_ok() && !forged {
                            won.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        outcomes.push((*attempt_id, forged, answer.map_err(|e| e.code())));
                    }
                    held = tasks.expect("the claim succeeds");
                    taken.extend(held.iter().map(|t| t.attempt_id));
                    // Done once every job's result is in (a claim may skip a job another
                    // worker's transaction holds, so an empty claim alone proves nothing).
                    if held.is_empty() {
                        if won.load(std::sync::atomic::Ordering::SeqCst) >= n {
                            return (taken, outcomes);
                        }
                        tokio::task::yield_now().await;
                    }
                }
            }
        });
        let results = join_all(workers).await;
        let mut all_taken: Vec<Uuid> = results.iter().flat_map(|(t, _)| t.clone()).collect();
        let handed_out = all_taken.len();
        all_taken.sort();
        all_taken.dedup();
        assert_eq!((handed_out, all_taken.len()), (n, n), "every attempt handed out exactly once");
        for (attempt_id, forged, answer) in results.into_iter().flat_map(|(_, o)| o) {
            let expected = if forged { Err("lease_lost") } else { Ok(CompletionOutcome::Won) };
            assert_eq!(answer, expected, "attempt {attempt_id}");
        }
        let jobs = engine.list_jobs(&owner(ALICE), &onceflow_engine::JobListQuery { limit: Some(200), ..Default::default() }).await.unwrap();
        assert_eq!(jobs.jobs.len(), n);
        for job in &jobs.jobs {
            assert_eq!(job.status, JobStatus::Succeeded);
            assert_eq!(event_types(&engine, job.id).await.iter().filter(|e| *e == "attempt_started").count(), 1);
        }
    }

    async fn heartbeats_sent_together_are_each_judged_by_their_own_token_and_owner(db) {
        // Heartbeats that arrive at once share the fast path's statement; each is still
        // fenced by its own token, its owner and its attempt's status, and answered alone.
        let engine = db.engine();
        let n = 12;
        for i in 0..n {
            engine.submit(ALICE, &format!("k{i}"), &llm_job(json!({}), quick_options())).await.unwrap();
        }
        let tasks = claim(&engine, &owner(ALICE), "w1", "primary-llm", n as u32).await;
        assert_eq!(tasks.len(), n);
        engine.cancel_attempt("ops", tasks[0].attempt_id, "stop").await.unwrap();
        let forged = Uuid::new_v4();
        // Per attempt: its holder (progress i), a stale writer with a wrong token, and the
        // holder's token presented in another owner's scope; and an attempt that does not exist.
        let mut calls = Vec::new();
        for (i, t) in tasks.iter().enumerate() {
            let holder = if i == 0 { "cancel_requested" } else { "extended" };
            calls.push((t.attempt_id, t.lease_token, owner(ALICE), json!({"n": i}), holder));
            calls.push((t.attempt_id, forged, owner(ALICE), json!({"forged": i}), "lease_lost"));
            calls.push((t.attempt_id, t.lease_token, owner("bob"), json!({"foreign": i}), "not_found"));
        }
        calls.push((Uuid::new_v4(), forged, owner(ALICE), json!({"missing": true}), "not_found"));
        let answers = join_all(calls.iter().map(|(id, token, scope, details, _)| engine.heartbeat(scope, *id, *token, Some(details)))).await;
        for ((id, token, scope, _, expected), answer) in calls.iter().zip(&answers) {
            let got = match answer {
                Ok(ack) if ack.cancel_requested => "cancel_requested",
                Ok(_) => "extended",
                Err(e) => e.code(),
            };
            assert_eq!(got, *expected, "heartbeat of {id} with token {token} in {scope:?}");
        }
        // Only the holders' heartbeats changed anything.
        let kept = db.count("SELECT count(*) FROM attempts WHERE CAST(heartbeat_details AS TEXT) LIKE '%\"n\"%'").await;
        assert_eq!(kept, n as i64 - 1, "every started attempt keeps its holder's progress");
        let stale = db.count("SELECT count(*) FROM attempts WHERE CAST(heartbeat_details AS TEXT) LIKE '%forged%' \
            OR CAST(heartbeat_details AS TEXT) LIKE '%foreign%' OR CAST(heartbeat_details AS TEXT) LIKE '%missing%'").await;
        assert_eq!(stale, 0, "no stale or foreign heartbeat wrote");
        for t in &tasks[1..] {
            let view = attempt_view(&engine, t.job_id, t.attempt_id).await;
            assert_eq!(view.status, AttemptStatus::Started);
            assert!(view.heartbeat_at >= view.started_at, "the lease was renewed");
        }
        assert_eq!(attempt_view(&engine, tasks[0].job_id, tasks[0].attempt_id).await.status, AttemptStatus::Cancelled);
        let (items, flushes) = batch_sizes(&engine, "heartbeats").await;
        assert!(flushes > 0.0 && items > flushes, "concurrent heartbeats shared flushes: {items} items in {flushes} flushes");
    }
}

/// Locking the jobs of a batch of completions reads each attempt as the transaction that
/// held its job left it, not as the snapshot taken when the statement began to wait.
///
/// PostgreSQL only: it needs a statement that is seen waiting for the job's row lock with
/// a snapshot older than the holder's commit. On SQLite every write transaction holds the
/// database's one write lock from its `BEGIN`, so nothing reads before the holder commits
/// and nothing can be seen waiting: the test would pass there whether or not the two ever
/// met.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_locked_attempt_is_read_as_the_previous_holder_of_its_job_left_it() {
    use onceflow_tests::{Backend, TestDb};
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        let task = held_jobs(&engine, 1).await.remove(0);
        let store = db.store();
        let mut holder = store.begin().await.unwrap();
        holder
            .lock_job(ALICE, task.job_id)
            .await
            .unwrap()
            .expect("job");
        let moved = holder
            .finish_attempt(&AttemptEnding {
                owner: ALICE,
                attempt_id: task.attempt_id,
                from: &[AttemptStatus::Started],
                to: AttemptStatus::Failed,
                error: None,
                outcome: Some(CompletionOutcome::Recorded),
            })
            .await
            .unwrap();
        assert!(moved);
        let waiter = tokio::spawn({
            let store = store.clone();
            async move {
                let mut tx = store.begin().await.unwrap();
                let locked = tx.lock_jobs_of_attempts(&[task.attempt_id]).await.unwrap();
                tx.commit().await.unwrap();
                locked
                    .into_iter()
                    .map(|l| (l.attempt.status, l.attempt.completion_outcome))
                    .collect::<Vec<_>>()
            }
        });
        // The waiter's statement has started (and taken its snapshot) and waits for the job.
        onceflow_tests::wait_for(
            "the waiter to wait for the job's lock",
            std::time::Duration::from_secs(10),
            || async { db.lock_waiters().await > 0 },
        )
        .await;
        holder.commit().await.unwrap();
        let seen = waiter.await.unwrap();
        assert_eq!(
            seen,
            vec![(AttemptStatus::Failed, Some(CompletionOutcome::Recorded))],
            "not the snapshot taken before the wait"
        );
        db.assert_integrity().await;
    })
    .await;
}

/// The value of a counter in the engine's metrics.
async fn counter(engine: &Engine, name: &str) -> f64 {
    let text = engine.metrics_text().await.expect("metrics");
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Repeats of a key whose first submission is being written (its statement waits on a
/// lock here) wait for it and are judged as replays, or refused, without a place in a
/// submission statement; one job, one event per replay. (PostgreSQL: the lock that holds
/// the statement is a table lock.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn repeats_of_a_key_being_written_wait_for_it_and_are_replays() {
    onceflow_tests::time_limit(async {
        use onceflow_tests::{Backend, TestDb};
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        let mut locker = db.pg_connection().await.expect("a PostgreSQL connection");
        sqlx::query("BEGIN")
            .execute(&mut locker)
            .await
            .expect("begin");
        sqlx::query("LOCK TABLE jobs IN SHARE MODE")
            .execute(&mut locker)
            .await
            .expect("lock jobs");
        let submit = |input: serde_json::Value| {
            let engine = engine.clone();
            tokio::spawn(async move {
                engine
                    .submit(ALICE, "k", &llm_job(input, quick_options()))
                    .await
            })
        };
        let first = submit(json!({ "n": 1 }));
        // Wait until the first submission's statement waits on the lock.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while db.lock_waiters().await < 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the first submission never reached its statement"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let repeats: Vec<_> = (0..5).map(|_| submit(json!({ "n": 1 }))).collect();
        let other = submit(json!({ "n": 2 }));
        // Wait until all six wait for the first (a state, not a time).
        let metric = "onceflow_submission_repeats_waited_total";
        while counter(&engine, metric).await < 6.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the repeats never waited for the first"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        sqlx::query("COMMIT")
            .execute(&mut locker)
            .await
            .expect("release the lock");

        let created = first
            .await
            .expect("task")
            .expect("the first submission creates the job");
        assert!(!created.replayed);
        for repeat in repeats {
            let replay = repeat.await.expect("task").expect("a repeat is answered");
            assert!(replay.replayed, "a repeat of the same request is a replay");
            assert_eq!(replay.job.id, created.job.id);
            assert_eq!(
                replay.job.activities.len(),
                1,
                "a replay shows the job as it is now"
            );
        }
        match other.await.expect("task") {
            Err(EngineError::IdempotencyKeyReused { job_id }) => assert_eq!(job_id, created.job.id),
            answer => panic!("another request under the key must be refused, got {answer:?}"),
        }
        assert_eq!(db.count("SELECT count(*) FROM jobs").await, 1);
        let events = event_types(&engine, created.job.id).await;
        assert_eq!(
            events.iter().filter(|e| *e == "job_replayed").count(),
            5,
            "one event per replay: {events:?}"
        );
        let (items, _) = batch_sizes(&engine, "submissions").await;
        assert_eq!(
            items, 1.0,
            "only the first took a place in a submission statement"
        );
        db.assert_integrity().await;
    })
    .await;
}

/// A worker's cycle on PostgreSQL: the claim runs beside the completions, on a
/// connection of its own, so a completion waiting for its job's lock (an operator's
/// transaction, say) does not hold up the worker's next tasks; once the lock is
/// released the completion still wins by its own CAS.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_polls_claim_is_not_held_up_by_its_completions() {
    onceflow_tests::time_limit(async {
        use onceflow_tests::{Backend, TestDb};
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        let held = held_jobs(&engine, 1).await;
        let t = &held[0];
        engine
            .submit(
                ALICE,
                "next",
                &llm_job(json!({ "next": true }), quick_options()),
            )
            .await
            .unwrap();
        // Another transaction holds the completed attempt's job.
        let mut locker = db.pg_connection().await.expect("a PostgreSQL connection");
        sqlx::query("BEGIN")
            .execute(&mut locker)
            .await
            .expect("begin");
        sqlx::query("SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE")
            .bind(t.job_id)
            .execute(&mut locker)
            .await
            .expect("lock the job");
        let cycle = {
            let engine = engine.clone();
            let completions = vec![(t.attempt_id, result_of(t, json!({ "text": "done" })))];
            tokio::spawn(async move {
                let request = onceflow_engine::ClaimRequest {
                    worker_id: "w1".to_owned(),
                    task_queue: "default".to_owned(),
                    providers: vec![("generate".to_owned(), "primary-llm".to_owned())],
                    max_tasks: 1,
                };
                engine
                    .complete_and_claim(&owner(ALICE), &completions, &request)
                    .await
            })
        };
        // The claim commits while the completion waits for the lock (states, not times).
        onceflow_tests::wait_for(
            "the completion to wait for its job's lock",
            std::time::Duration::from_secs(10),
            || async { db.lock_waiters().await > 0 },
        )
        .await;
        onceflow_tests::wait_for(
            "the next job's attempt to start",
            std::time::Duration::from_secs(10),
            || async {
                db.count("SELECT count(*) FROM attempts WHERE status = 'started'")
                    .await
                    == 2
            },
        )
        .await;
        assert!(
            !cycle.is_finished(),
            "the completion cannot be judged while its job is held"
        );
        sqlx::query("COMMIT")
            .execute(&mut locker)
            .await
            .expect("release the job");
        let (answers, tasks) = cycle
            .await
            .expect("the cycle's task")
            .expect("the poll is valid");
        assert_eq!(
            answers
                .into_iter()
                .map(|a| a.map_err(|e| e.code()))
                .collect::<Vec<_>>(),
            vec![Ok(CompletionOutcome::Won)]
        );
        let tasks = tasks.expect("the claim succeeds");
        assert_eq!(tasks.len(), 1);
        assert_ne!(tasks[0].job_id, t.job_id);
        assert_eq!(
            engine.job(&owner(ALICE), t.job_id).await.unwrap().status,
            JobStatus::Succeeded
        );
    })
    .await;
}

/// Heartbeats share a statement, but one whose attempt another transaction holds (an
/// operator's cancel, a completion) does not hold up the others: it is left to the single
/// path, which waits for that attempt alone and then extends its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_heartbeat_waiting_for_its_attempt_does_not_hold_up_the_others() {
    onceflow_tests::time_limit(async {
        use onceflow_tests::{Backend, TestDb};
        let db = TestDb::new(Backend::Postgres).await;
        let engine = db.engine();
        let held = held_jobs(&engine, 6).await;
        let mut locker = db.pg_connection().await.expect("a PostgreSQL connection");
        sqlx::query("BEGIN")
            .execute(&mut locker)
            .await
            .expect("begin");
        sqlx::query("SELECT 1 FROM attempts WHERE id = $1 FOR UPDATE")
            .bind(held[0].attempt_id)
            .execute(&mut locker)
            .await
            .expect("lock the attempt");
        let waiting = {
            let (engine, t) = (engine.clone(), held[0].clone());
            tokio::spawn(async move {
                engine
                    .heartbeat(
                        &owner(ALICE),
                        t.attempt_id,
                        t.lease_token,
                        Some(&json!({ "held": true })),
                    )
                    .await
            })
        };
        onceflow_tests::wait_for(
            "the held attempt's heartbeat to wait for its row",
            std::time::Duration::from_secs(10),
            || async { db.lock_waiters().await > 0 },
        )
        .await;
        // The others are answered while that one still waits (states, not times: they could
        // not finish at all if they queued behind it).
        let (alice, other) = (owner(ALICE), json!({ "other": true }));
        let others = join_all(
            held[1..]
                .iter()
                .map(|t| engine.heartbeat(&alice, t.attempt_id, t.lease_token, Some(&other))),
        );
        let others = tokio::time::timeout(std::time::Duration::from_secs(30), others)
            .await
            .expect("the other heartbeats are answered while one attempt is held");
        assert!(
            others
                .iter()
                .all(|a| matches!(a, Ok(ack) if !ack.cancel_requested)),
            "{others:?}"
        );
        assert!(
            !waiting.is_finished(),
            "the held attempt's heartbeat waits for its row"
        );
        sqlx::query("COMMIT")
            .execute(&mut locker)
            .await
            .expect("release the attempt");
        let ack = waiting
            .await
            .expect("the heartbeat's task")
            .expect("its lease is extended once the row is free");
        assert!(!ack.cancel_requested);
        let written = db
            .count(
                "SELECT count(*) FROM attempts WHERE CAST(heartbeat_details AS TEXT) LIKE '%held%'",
            )
            .await;
        assert_eq!(
            written, 1,
            "the held attempt's heartbeat wrote once it could"
        );
    })
    .await;
}
