//! Invariant 4: exactly one winner, by compare-and-swap; the first result to return wins.

use futures::future::join_all;
use onceflow_engine::model::{
    ActivityTask, AttemptStatus, CompletionOutcome, JobStatus, JobView, Scope,
};
use onceflow_engine::Engine;
use onceflow_tests::{
    certify, claim, claim_one, code_of, error_of, event_types, llm_job, owner, quick_options,
    reap_until_unknown, result_of, rules, ALICE,
};
use serde_json::json;

/// Primary attempt A leaves first and goes unknown; an operator cancels it; the engine
/// fails over to the certified fallback B, which a worker takes. Both are now out there.
async fn two_attempts_out(engine: &Engine, key: &str) -> (JobView, ActivityTask, ActivityTask) {
    let job = engine
        .submit(
            ALICE,
            key,
            &llm_job(json!({"prompt": key}), quick_options()),
        )
        .await
        .unwrap()
        .job;
    let a = claim_one(engine, "primary-llm").await;
    reap_until_unknown(engine, job.id, a.attempt_id).await;
    engine
        .cancel_attempt("ops", a.attempt_id, "stalled; trying the fallback")
        .await
        .unwrap();
    let b = claim_one(engine, "fallback-llm").await;
    assert_eq!(b.job_id, job.id);
    assert_eq!(b.attempt_number, 2);
    assert_eq!(
        b.idempotency_key, a.idempotency_key,
        "one identity for the downstream provider"
    );
    (job, a, b)
}

rules! {
    async fn reverse_order_finish_the_fallback_returning_first_wins(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let (job, a, b) = two_attempts_out(&engine, "k").await;

        let b_outcome = engine.complete(&Scope::AllOwners, b.attempt_id, &result_of(&b, json!({"text": "from fallback"}))).await.unwrap();
        assert_eq!(b_outcome, CompletionOutcome::Won);
        let a_outcome = engine.complete(&Scope::AllOwners, a.attempt_id, &result_of(&a, json!({"text": "from primary, late"}))).await.unwrap();
        assert_eq!(a_outcome, CompletionOutcome::Lost);

        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded);
        assert_eq!(job.result, Some(json!({"text": "from fallback"})));
        let activity = &job.activities[0];
        assert_eq!(activity.completed_by, Some(b.attempt_id));
        assert_eq!(activity.result, Some(json!({"text": "from fallback"})));
        assert_eq!(activity.attempts[0].status, AttemptStatus::Lost);
        assert_eq!(activity.attempts[0].cancelled_by.as_deref(), Some("ops"), "cancellation fields stay set");
        assert_eq!(activity.attempts[1].status, AttemptStatus::Succeeded);
        let events = engine.job_events(&owner(ALICE), job.id).await.unwrap();
        let race = events.iter().find(|e| e.kind == "race_lost").expect("race_lost is logged");
        assert_eq!(race.attempt_id, Some(a.attempt_id));
        assert_eq!(race.data["winner"], json!(b.attempt_id));
        let everything = serde_json::to_string(&(&job, &events)).unwrap();
        assert!(!everything.contains("from primary, late"), "the losing payload is dropped, never stored");
    }

    async fn reverse_order_finish_the_primary_returning_first_wins(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let (job, a, b) = two_attempts_out(&engine, "k").await;

        let a_outcome = engine.complete(&Scope::AllOwners, a.attempt_id, &result_of(&a, json!({"text": "primary after all"}))).await.unwrap();
        assert_eq!(a_outcome, CompletionOutcome::Won, "a cancelled attempt's late result still takes part in the CAS");
        // The fallback is told to stop, and its result loses.
        let ack = engine.heartbeat(&Scope::AllOwners, b.attempt_id, b.lease_token, None).await.unwrap();
        assert!(ack.cancel_requested);
        let b_outcome = engine.complete(&Scope::AllOwners, b.attempt_id, &result_of(&b, json!({"text": "fallback, late"}))).await.unwrap();
        assert_eq!(b_outcome, CompletionOutcome::Lost);

        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.result, Some(json!({"text": "primary after all"})));
        assert_eq!(job.activities[0].completed_by, Some(a.attempt_id));
        let statuses: Vec<_> = job.activities[0].attempts.iter().map(|t| t.status).collect();
        assert_eq!(statuses, vec![AttemptStatus::Succeeded, AttemptStatus::Lost]);
        assert!(event_types(&engine, job.id).await.contains(&"race_lost".to_owned()));
    }

    async fn simultaneous_results_of_two_attempts_have_exactly_one_winner(db) {
        let (engines, _turn) = db.separate_engines(4).await;
        certify(&engines[0], ALICE, "fallback-llm").await;
        let rounds = 8;
        // Every job gets its primary attempt A out, unknown and cancelled, and its fallback B out.
        let mut jobs = Vec::new();
        for i in 0..rounds {
            jobs.push(engines[0].submit(ALICE, &format!("race-{i}"), &llm_job(json!({}), quick_options())).await.unwrap().job);
        }
        let primaries = claim(&engines[0], &owner(ALICE), "w1", "primary-llm", 100).await;
        assert_eq!(primaries.len(), rounds);
        for a in &primaries {
            reap_until_unknown(&engines[0], a.job_id, a.attempt_id).await;
            engines[0].cancel_attempt("ops", a.attempt_id, "stalled").await.unwrap();
        }
        let fallbacks = claim(&engines[1], &owner(ALICE), "w2", "fallback-llm", 100).await;
        assert_eq!(fallbacks.len(), rounds);
        let setups: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let a = primaries.iter().find(|t| t.job_id == job.id).unwrap().clone();
                let b = fallbacks.iter().find(|t| t.job_id == job.id).unwrap().clone();
                (job, a, b)
            })
            .collect();
        let races = join_all(setups.iter().map(|(_, a, b)| {
            let (ea, eb) = (&engines[2], &engines[3]);
            let (ca, cb) = (result_of(a, json!({"text": "A"})), result_of(b, json!({"text": "B"})));
            async move {
                tokio::join!(
                    ea.complete(&Scope::AllOwners, a.attempt_id, &ca),
                    eb.complete(&Scope::AllOwners, b.attempt_id, &cb),
                )
            }
        }))
        .await;
        for ((job, a, b), (ra, rb)) in setups.iter().zip(races) {
            let (ra, rb) = (ra.unwrap(), rb.unwrap());
            let mut outcomes = [ra, rb];
            outcomes.sort_by_key(|o| o.as_str());
            assert_eq!(outcomes, [CompletionOutcome::Lost, CompletionOutcome::Won], "exactly one winner");
            let job = engines[0].job(&owner(ALICE), job.id).await.unwrap();
            let (winner, text) = if ra == CompletionOutcome::Won { (a.attempt_id, "A") } else { (b.attempt_id, "B") };
            assert_eq!(job.activities[0].completed_by, Some(winner));
            assert_eq!(job.result, Some(json!({"text": text})), "the job holds the winner's result");
            assert_eq!(job.activities[0].version, 1, "the version moved once, when the slot was claimed");
        }
    }

    async fn creating_attempts_never_moves_the_version(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let (job, _a, b) = two_attempts_out(&engine, "k").await;
        let before = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(before.activities[0].version, 0);
        assert_eq!(b.read_version, 0);
        engine.complete(&Scope::AllOwners, b.attempt_id, &result_of(&b, json!({"text": "ok"}))).await.unwrap();
        assert_eq!(engine.job(&owner(ALICE), job.id).await.unwrap().activities[0].version, 1);
    }

    async fn repeating_a_completion_answers_what_the_first_answered(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let (job, a, b) = two_attempts_out(&engine, "k").await;
        let won = result_of(&b, json!({"text": "b"}));
        assert_eq!(engine.complete(&Scope::AllOwners, b.attempt_id, &won).await.unwrap(), CompletionOutcome::Won);
        assert_eq!(engine.complete(&Scope::AllOwners, b.attempt_id, &won).await.unwrap(), CompletionOutcome::Won);
        // Even with a different body, a repeat answers the first outcome and changes nothing.
        assert_eq!(
            engine.complete(&Scope::AllOwners, b.attempt_id, &error_of(&b, "oops", true)).await.unwrap(),
            CompletionOutcome::Won
        );
        let lost = result_of(&a, json!({"text": "a"}));
        assert_eq!(engine.complete(&Scope::AllOwners, a.attempt_id, &lost).await.unwrap(), CompletionOutcome::Lost);
        assert_eq!(engine.complete(&Scope::AllOwners, a.attempt_id, &lost).await.unwrap(), CompletionOutcome::Lost);
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.result, Some(json!({"text": "b"})));
        let events = event_types(&engine, job.id).await;
        assert_eq!(events.iter().filter(|e| *e == "race_lost").count(), 1, "a repeat writes no new event");
        assert_eq!(events.iter().filter(|e| *e == "attempt_succeeded").count(), 1);
    }

    async fn an_error_after_the_slot_is_taken_is_recorded_and_changes_nothing(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let (job, a, b) = two_attempts_out(&engine, "k").await;
        engine.complete(&Scope::AllOwners, b.attempt_id, &result_of(&b, json!({"text": "b"}))).await.unwrap();
        let before = engine.job(&owner(ALICE), job.id).await.unwrap();
        let outcome = engine.complete(&Scope::AllOwners, a.attempt_id, &error_of(&a, "gave up", true)).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Recorded);
        let after = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(after.status, JobStatus::Succeeded);
        assert_eq!(after.activities[0].attempts.len(), 2, "no retry was scheduled");
        assert_eq!(after.activities[0].attempts[0].status, AttemptStatus::Cancelled);
        assert_eq!(before.result, after.result);
    }

    async fn completing_an_attempt_that_was_never_handed_out_is_lease_lost(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let attempt = job.activities[0].attempts[0].id;
        let guess = onceflow_engine::Completion {
            lease_token: uuid::Uuid::new_v4(),
            body: onceflow_engine::CompletionBody::Result(json!({"text": "?"})),
        };
        assert_eq!(code_of(&engine.complete(&owner(ALICE), attempt, &guess).await), "lease_lost");
    }
}
