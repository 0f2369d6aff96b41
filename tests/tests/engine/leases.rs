//! Invariants 3 and 5: a timeout is unknown, not failed; leases are fenced by their token.

use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::model::{ActivityStatus, AttemptStatus, CompletionOutcome, JobStatus, Scope};
use onceflow_tests::{
    attempt_view, certify, claim, claim_one, code_of, error_of, event_types, llm_job, metric,
    owner, quick_options, reap_until_unknown, result_of, rules, wait_for, TestDb, ALICE,
};
use serde_json::json;
use uuid::Uuid;

rules! {
    async fn an_expired_lease_makes_the_attempt_unknown_not_failed(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        reap_until_unknown(&engine, job.id, task.attempt_id).await;

        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        let activity = &job.activities[0];
        assert_eq!(activity.status, ActivityStatus::Blocked, "unknown blocks the activity");
        assert_eq!(activity.attempts.len(), 1, "nothing was retried automatically");
        assert_eq!(activity.attempts[0].status, AttemptStatus::Unknown);
        assert_eq!(job.status, JobStatus::Running, "the job is not failed");
        assert!(event_types(&engine, job.id).await.contains(&"attempt_heartbeat_lost".to_owned()));

        // More reaper passes change nothing: unknown waits for a result or a person.
        engine.reap().await.unwrap();
        let again = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(again.activities[0].attempts.len(), 1);
    }

    async fn unknown_refuses_a_new_attempt_until_a_late_result_arrives(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        reap_until_unknown(&engine, job.id, task.attempt_id).await;

        let refused = engine.create_attempt(&owner(ALICE), job.id, 0, "fallback-llm").await;
        assert_eq!(code_of(&refused), "attempt_in_flight");
        match refused {
            Err(onceflow_engine::EngineError::AttemptInFlight { attempt_id, status }) => {
                assert_eq!((attempt_id, status), (task.attempt_id, AttemptStatus::Unknown));
            }
            other => panic!("{other:?}"),
        }

        // The remote side was still working: its late result is judged by the CAS and wins.
        let outcome = engine
            .complete(&Scope::AllOwners, task.attempt_id, &result_of(&task, json!({"text": "late but fine"})))
            .await
            .unwrap();
        assert_eq!(outcome, CompletionOutcome::Won);
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded);
        assert_eq!(job.result, Some(json!({"text": "late but fine"})));
        assert_eq!(job.activities[0].attempts[0].status, AttemptStatus::Succeeded);
        assert_eq!(code_of(&engine.create_attempt(&owner(ALICE), job.id, 0, "fallback-llm").await), "activity_completed");
    }

    async fn unknown_refuses_a_new_attempt_until_an_operator_cancels_it(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        reap_until_unknown(&engine, job.id, task.attempt_id).await;
        assert_eq!(code_of(&engine.create_attempt(&owner(ALICE), job.id, 0, "fallback-llm").await), "attempt_in_flight");

        let cancelled = engine.cancel_attempt("ops", task.attempt_id, "provider confirmed no request").await.unwrap();
        assert_eq!(cancelled.status, AttemptStatus::Cancelled);
        assert_eq!(cancelled.cancelled_by.as_deref(), Some("ops"));
        assert_eq!(cancelled.cancel_reason.as_deref(), Some("provider confirmed no request"));

        // Failover is automatic once the unknown attempt is resolved.
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        let attempts = &job.activities[0].attempts;
        assert_eq!(attempts.len(), 2);
        assert_eq!((attempts[1].provider.as_str(), attempts[1].status), ("fallback-llm", AttemptStatus::Scheduled));
        assert_eq!(job.activities[0].status, ActivityStatus::Scheduled);
        let events = event_types(&engine, job.id).await;
        assert!(events.ends_with(&["attempt_cancelled".to_owned(), "failover".to_owned()]), "{events:?}");
    }

    async fn a_late_error_of_an_unknown_attempt_lets_the_policy_move_on(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        reap_until_unknown(&engine, job.id, task.attempt_id).await;
        let outcome = engine
            .complete(&Scope::AllOwners, task.attempt_id, &error_of(&task, "upstream refused", false))
            .await
            .unwrap();
        assert_eq!(outcome, CompletionOutcome::Recorded);
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        let attempts = &job.activities[0].attempts;
        assert_eq!(attempts[0].status, AttemptStatus::Failed);
        assert_eq!(attempts[1].provider, "fallback-llm");
    }

    async fn heartbeats_keep_a_lease_alive_past_the_heartbeat_timeout(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        let started = tokio::time::Instant::now();
        // Run the reaper continuously for 2.5 heartbeat timeouts while heartbeating.
        while started.elapsed() < Duration::from_millis(2500) {
            let ack = engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, Some(&json!({"progress": 1}))).await.unwrap();
            assert!(!ack.cancel_requested);
            engine.reap().await.unwrap();
            assert_eq!(attempt_view(&engine, job.id, task.attempt_id).await.status, AttemptStatus::Started);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let outcome = engine.complete(&owner(ALICE), task.attempt_id, &result_of(&task, json!({"text": "slow"}))).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Won);
    }

    async fn a_heartbeat_with_the_lease_token_revives_an_unknown_attempt(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        reap_until_unknown(&engine, job.id, task.attempt_id).await;
        let ack = engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, None).await.unwrap();
        assert!(!ack.cancel_requested);
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.activities[0].attempts[0].status, AttemptStatus::Started);
        assert_eq!(job.activities[0].status, ActivityStatus::Running);
        assert!(event_types(&engine, job.id).await.contains(&"attempt_revived".to_owned()));
    }

    async fn a_wrong_lease_token_changes_nothing(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        let before = engine.job(&owner(ALICE), job.id).await.unwrap();
        let events_before = event_types(&engine, job.id).await;
        let forged = Uuid::new_v4();

        assert_eq!(code_of(&engine.heartbeat(&owner(ALICE), task.attempt_id, forged, None).await), "lease_lost");
        let mut stolen = result_of(&task, json!({"text": "forged"}));
        stolen.lease_token = forged;
        assert_eq!(code_of(&engine.complete(&owner(ALICE), task.attempt_id, &stolen).await), "lease_lost");
        let mut stolen_error = error_of(&task, "forged", false);
        stolen_error.lease_token = forged;
        assert_eq!(code_of(&engine.complete(&owner(ALICE), task.attempt_id, &stolen_error).await), "lease_lost");

        let after = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(before, after, "a stale writer changed nothing");
        assert_eq!(events_before, event_types(&engine, job.id).await);
        // The real holder still completes.
        let outcome = engine.complete(&owner(ALICE), task.attempt_id, &result_of(&task, json!({"text": "real"}))).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Won);
    }

    async fn a_stale_worker_whose_attempt_was_revived_elsewhere_cannot_write(db) {
        // Worker w1's attempt loses its lease and an operator gives up on it: the activity
        // moves to the certified fallback, whose attempt worker w2 takes through another
        // engine, loses the lease of too, and revives there with its heartbeat. (No one
        // but the holder of an attempt's token revives it: docs/api.md.) w1, the stale
        // worker, still holds its token: it opens nothing of the revived attempt.
        let (engines, _turn) = db.separate_engines(2).await;
        let (here, elsewhere) = (&engines[0], &engines[1]);
        certify(here, ALICE, "fallback-llm").await;
        let job = here.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let stale = claim_one(here, "primary-llm").await;
        reap_until_unknown(here, job.id, stale.attempt_id).await;
        here.cancel_attempt("ops", stale.attempt_id, "worker w1 stopped answering").await.unwrap();
        let revived = claim_one(elsewhere, "fallback-llm").await;
        assert_ne!(revived.attempt_id, stale.attempt_id);
        reap_until_unknown(elsewhere, job.id, revived.attempt_id).await;
        let ack = elsewhere.heartbeat(&owner(ALICE), revived.attempt_id, revived.lease_token, None).await.unwrap();
        assert!(!ack.cancel_requested);
        assert_eq!(attempt_view(here, job.id, revived.attempt_id).await.status, AttemptStatus::Started, "revived");
        assert!(event_types(here, job.id).await.contains(&"attempt_revived".to_owned()));

        let before = here.job(&owner(ALICE), job.id).await.unwrap();
        let events_before = event_types(here, job.id).await;
        for engine in [here, elsewhere] {
            assert_eq!(code_of(&engine.heartbeat(&owner(ALICE), revived.attempt_id, stale.lease_token, None).await), "lease_lost");
            let mut result = result_of(&revived, json!({"text": "stale"}));
            result.lease_token = stale.lease_token;
            assert_eq!(code_of(&engine.complete(&owner(ALICE), revived.attempt_id, &result).await), "lease_lost");
            let mut error = error_of(&revived, "stale", false);
            error.lease_token = stale.lease_token;
            assert_eq!(code_of(&engine.complete(&owner(ALICE), revived.attempt_id, &error).await), "lease_lost");
        }
        assert_eq!(here.job(&owner(ALICE), job.id).await.unwrap(), before, "the stale worker changed nothing");
        assert_eq!(event_types(here, job.id).await, events_before);
        // The reviver still holds the attempt.
        let outcome = elsewhere.complete(&owner(ALICE), revived.attempt_id, &result_of(&revived, json!({"text": "real"}))).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Won);
        assert_eq!(here.job(&owner(ALICE), job.id).await.unwrap().status, JobStatus::Succeeded);
    }

    async fn a_heartbeat_of_a_finished_attempt_is_lease_lost(db) {
        let engine = db.engine();
        engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap();
        let task = claim_one(&engine, "primary-llm").await;
        engine.complete(&owner(ALICE), task.attempt_id, &result_of(&task, json!({"text": "done"}))).await.unwrap();
        assert_eq!(code_of(&engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, None).await), "lease_lost");
    }

    async fn concurrent_reapers_change_each_attempt_once(db) {
        let (engines, _turn) = db.separate_engines(4).await;
        let engine = &engines[0];
        let n = 30;
        for i in 0..n {
            engine.submit(ALICE, &format!("k{i}"), &llm_job(json!({}), quick_options())).await.unwrap();
        }
        let tasks = claim(engine, &owner(ALICE), "w1", "primary-llm", 100).await;
        assert_eq!(tasks.len(), n);
        // Wait until every lease has expired by the database's clock.
        // Wait until every lease has expired (a margin over the latest expiry).
        let latest = tasks.iter().map(|t| t.job_id).collect::<Vec<_>>();
        let mut last_expiry = chrono::DateTime::<chrono::Utc>::MIN_UTC;
        for job in latest {
            if let Some(at) = engine.job(&Scope::AllOwners, job).await.unwrap().activities[0].attempts[0].lease_expires_at {
                last_expiry = last_expiry.max(at);
            }
        }
        onceflow_tests::wait_for("all leases to expire", Duration::from_secs(10), || async {
            chrono::Utc::now() > last_expiry + chrono::Duration::milliseconds(50)
        }).await;
        let reports = join_all(engines.iter().map(|e| e.reap())).await;
        let unknown: u64 = reports.into_iter().map(|r| r.unwrap().unknown).sum();
        assert_eq!(unknown, n as u64, "together the reapers changed each attempt exactly once");
        let lost = db.count("SELECT count(*) FROM job_events WHERE type = 'attempt_heartbeat_lost'").await;
        assert_eq!(lost, n as i64, "one heartbeat-lost event per attempt");
        let still_started = db.count("SELECT count(*) FROM attempts WHERE status <> 'unknown'").await;
        assert_eq!(still_started, 0);
    }
    async fn start_to_close_makes_a_heartbeating_attempt_unknown_for_good(db) {
        // A handler stuck on a call that never answers keeps heartbeating; start-to-close
        // bounds it. Past that deadline, heartbeats neither extend nor revive the lease.
        let engine = db.engine();
        let options = onceflow_engine::model::ActivityOptions { start_to_close_timeout_s: Some(1), heartbeat_timeout_s: Some(30), ..quick_options() };
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), options)).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        onceflow_tests::wait_for("start-to-close to pass while heartbeating", Duration::from_secs(10), || async {
            // Heartbeating like a live handler would; only the deadline ends the lease.
            let _ = engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, None).await;
            engine.reap().await.unwrap();
            attempt_view(&engine, job.id, task.attempt_id).await.status == AttemptStatus::Unknown
        }).await;
        assert_eq!(code_of(&engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, None).await), "lease_lost");
        assert_eq!(attempt_view(&engine, job.id, task.attempt_id).await.status, AttemptStatus::Unknown);
        // Its result is still judged by the CAS.
        let outcome = engine.complete(&owner(ALICE), task.attempt_id, &result_of(&task, json!({"text": "late"}))).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Won);
    }

    async fn an_attempt_the_reaper_cannot_change_is_skipped_counted_and_retried_and_stops_no_other_owners(db) {
        let engine = db.engine();
        for who in [ALICE, "bob"] {
            certify(&engine, who, "fallback-llm").await;
        }
        // Per owner: a started attempt whose lease will expire (heartbeat timeout 1 s) ...
        let mut started = Vec::new();
        for who in [ALICE, "bob"] {
            let job = engine.submit(who, "lease", &llm_job(json!({}), quick_options())).await.unwrap().job;
            let task = claim(&engine, &owner(who), "w1", "primary-llm", 1).await.pop().expect("a task");
            started.push((job.id, task.attempt_id));
        }
        // ... and a scheduled attempt nobody will start (schedule-to-start 1 s).
        let mut unstarted = Vec::new();
        for who in [ALICE, "bob"] {
            let mut options = quick_options();
            options.schedule_to_start_timeout_s = Some(1);
            let job = engine.submit(who, "deadline", &llm_job(json!({}), options)).await.unwrap().job;
            unstarted.push((job.id, job.activities[0].attempts[0].id));
        }
        // Alice's two go bad in the database: the started attempt's row no longer parses,
        // nor the unstarted one's activity options, which its failover reads.
        let (alice_started, alice_unstarted) = (started[0], unstarted[0]);
        db.execute(&format!(r#"UPDATE attempts SET error = '"not an error object"' WHERE id = '{}'"#, alice_started.1)).await.unwrap();
        let options = db.json(&format!("SELECT options FROM activities WHERE job_id = '{}'", alice_unstarted.0)).await;
        db.execute(&format!(r#"UPDATE activities SET options = '{{"retry": "not a policy"}}' WHERE job_id = '{}'"#, alice_unstarted.0)).await.unwrap();

        // Bob's attempts are reaped as usual, pass after pass.
        let (bob_started, bob_unstarted) = (started[1], unstarted[1]);
        wait_for("bob's lease to expire and his unstarted attempt to pass its deadline", Duration::from_secs(10), || async {
            engine.reap().await.expect("a pass with bad attempts succeeds");
            attempt_view(&engine, bob_started.0, bob_started.1).await.status == AttemptStatus::Unknown
                && attempt_view(&engine, bob_unstarted.0, bob_unstarted.1).await.status == AttemptStatus::Expired
        }).await;
        let bob = engine.job(&owner("bob"), bob_unstarted.0).await.unwrap();
        assert_eq!(bob.activities[0].attempts[1].provider, "fallback-llm", "the expiry failed over");
        // Alice's are left exactly as they were, and counted.
        assert_eq!(statuses(db, alice_started.0).await, ["started"]);
        assert_eq!(statuses(db, alice_unstarted.0).await, ["scheduled"]);
        let failures = metric(&engine, r#"onceflow_pass_item_failures_total{pass="reaper"}"#).await;
        assert!(failures >= 2.0, "each bad attempt counted: {failures}");

        // Repaired, they are reaped at the next pass.
        db.execute(&format!("UPDATE attempts SET error = NULL WHERE id = '{}'", alice_started.1)).await.unwrap();
        db.execute(&format!("UPDATE activities SET options = '{options}' WHERE job_id = '{}'", alice_unstarted.0)).await.unwrap();
        let report = engine.reap().await.unwrap();
        assert_eq!((report.unknown, report.expired, report.failed), (1, 1, 0));
        assert_eq!(attempt_view(&engine, alice_started.0, alice_started.1).await.status, AttemptStatus::Unknown);
        let alice = engine.job(&owner(ALICE), alice_unstarted.0).await.unwrap();
        assert_eq!(alice.activities[0].attempts[0].status, AttemptStatus::Expired);
        assert_eq!(alice.activities[0].attempts[1].provider, "fallback-llm");
    }
}

/// The statuses of a job's attempts, read from the database (the job's view would not
/// read a row that no longer parses).
async fn statuses(db: &TestDb, job_id: Uuid) -> Vec<String> {
    db.strings(&format!(
        "SELECT status FROM attempts WHERE job_id = '{job_id}' ORDER BY number"
    ))
    .await
}
