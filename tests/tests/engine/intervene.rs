//! Invariant 2 and the people who step in: manual attempts, operator cancels, job cancels.

use futures::future::join_all;
use onceflow_engine::model::{
    ActivityStatus, AttemptStatus, CompletionOutcome, Failover, JobStatus, Scope,
};
use onceflow_tests::{
    certify, claim_one, code_of, error_of, event_types, llm_job, owner, quick_options, result_of,
    rules, ALICE,
};
use serde_json::json;

rules! {
    async fn twenty_concurrent_manual_attempts_create_at_most_one(db) {
        let (engines, _turn) = db.separate_engines(20).await;
        certify(&engines[0], ALICE, "fallback-llm").await;
        let mut options = quick_options();
        options.failover = Failover::Manual;
        let job = engines[0].submit(ALICE, "k", &llm_job(json!({}), options)).await.unwrap().job;
        let first = claim_one(&engines[0], "primary-llm").await;
        engines[0].complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "down", false)).await.unwrap();

        let alice = owner(ALICE);
        let clicks = join_all(engines.iter().map(|e| e.create_attempt(&alice, job.id, 0, "fallback-llm"))).await;
        let created: Vec<_> = clicks.iter().filter_map(|c| c.as_ref().ok()).collect();
        assert_eq!(created.len(), 1, "exactly one of twenty racing clicks creates an attempt");
        for click in clicks.iter().filter(|c| c.is_err()) {
            assert_eq!(code_of(click), "attempt_in_flight");
        }
        let job = engines[0].job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.activities[0].attempts.len(), 2);
    }

    async fn the_database_itself_refuses_a_second_live_attempt(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let id = uuid::Uuid::now_v7();
        let sql = match db.backend() {
            onceflow_tests::Backend::Postgres => format!(
                "INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider)
                 SELECT owner_id, '{id}', activity_id, job_id, 2, activity, task_queue, 'fallback-llm'
                 FROM attempts WHERE job_id = '{}'", job.id),
            onceflow_tests::Backend::Sqlite => format!(
                "INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, available_at, created_at)
                 SELECT owner_id, '{id}', activity_id, job_id, 2, activity, task_queue, 'fallback-llm', 0, 0
                 FROM attempts WHERE job_id = '{}'", job.id),
        };
        let err = db.execute(&sql).await.expect_err("the partial unique index refuses a second live attempt");
        assert!(err.contains("attempts_one_live_per_activity") || err.contains("UNIQUE constraint failed: attempts.owner_id, attempts.activity_id"), "{err}");
    }

    async fn manual_attempts_are_checked_in_the_order_api_md_gives(db) {
        let engine = db.engine();
        engine.register_contract(ALICE, "generate", &onceflow_tests::text_schema()).await.unwrap();
        let mut options = quick_options();
        options.failover = Failover::Manual;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), options)).await.unwrap().job;
        let me = owner(ALICE);
        // A live attempt is reported before the provider is even looked at.
        assert_eq!(code_of(&engine.create_attempt(&me, job.id, 0, "nobody").await), "attempt_in_flight");
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "down", false)).await.unwrap();
        assert_eq!(code_of(&engine.create_attempt(&me, job.id, 0, "nobody").await), "provider_not_certified");
        assert_eq!(code_of(&engine.create_attempt(&me, job.id, 0, "fallback-llm").await), "provider_not_certified");
        assert_eq!(code_of(&engine.create_attempt(&me, job.id, 1, "primary-llm").await), "not_found");
        // The primary needs no certification.
        let again = engine.create_attempt(&me, job.id, 0, "primary-llm").await.unwrap();
        assert_eq!(again.number, 2);
        let task = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, task.attempt_id, &result_of(&task, json!({"text": "ok"}))).await.unwrap();
        // A taken slot is reported first of all.
        assert_eq!(code_of(&engine.create_attempt(&me, job.id, 0, "nobody").await), "activity_completed");
    }

    async fn an_operator_cancel_needs_a_reason_and_is_idempotent(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        assert_eq!(code_of(&engine.cancel_attempt("ops", task.attempt_id, "  ").await), "invalid_request");
        assert_eq!(code_of(&engine.cancel_attempt("ops", uuid::Uuid::now_v7(), "why").await), "not_found");
        let first = engine.cancel_attempt("ops", task.attempt_id, "customer asked").await.unwrap();
        let second = engine.cancel_attempt("other-op", task.attempt_id, "again").await.unwrap();
        assert_eq!(first, second, "repeating answers the cancelled attempt unchanged");
        assert_eq!(second.cancelled_by.as_deref(), Some("ops"));
        let events = event_types(&engine, job.id).await;
        assert_eq!(events.iter().filter(|e| *e == "attempt_cancelled").count(), 1);
        // The worker learns to stop at its next heartbeat.
        let ack = engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, None).await.unwrap();
        assert!(ack.cancel_requested);
    }

    async fn a_finished_attempt_cannot_be_cancelled(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, task.attempt_id, &result_of(&task, json!({"text": "done"}))).await.unwrap();
        let refused = engine.cancel_attempt("ops", task.attempt_id, "too late").await;
        assert_eq!(code_of(&refused), "attempt_not_cancellable");
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.activities[0].attempts[0].cancelled_by, None, "nothing changed");
    }

    async fn cancelling_a_job_closes_its_slots_and_later_results_are_lost(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        let cancelled = engine.cancel_job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(cancelled.status, JobStatus::Cancelled);
        assert_eq!(cancelled.activities[0].status, ActivityStatus::Cancelled);
        let attempt = &cancelled.activities[0].attempts[0];
        assert_eq!(attempt.status, AttemptStatus::Cancelled);
        assert_eq!((attempt.cancelled_by.as_deref(), attempt.cancel_reason.as_deref()), (Some(ALICE), Some("job cancelled")));

        let ack = engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, None).await.unwrap();
        assert!(ack.cancel_requested);
        let outcome = engine.complete(&owner(ALICE), task.attempt_id, &result_of(&task, json!({"text": "too late"}))).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Lost);
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.status, JobStatus::Cancelled);
        assert_eq!(job.result, None);
        assert_eq!(job.activities[0].attempts[0].status, AttemptStatus::Lost);

        // Repeating answers the cancelled job; no new attempt can be made.
        assert_eq!(engine.cancel_job(&owner(ALICE), job.id).await.unwrap().status, JobStatus::Cancelled);
        assert_eq!(code_of(&engine.create_attempt(&owner(ALICE), job.id, 0, "primary-llm").await), "activity_completed");
        let events = event_types(&engine, job.id).await;
        assert_eq!(events.iter().filter(|e| *e == "job_cancelled").count(), 1);
        assert!(events.contains(&"race_lost".to_owned()));
    }

    async fn a_finished_job_cannot_be_cancelled(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        engine.complete(&owner(ALICE), task.attempt_id, &result_of(&task, json!({"text": "done"}))).await.unwrap();
        assert_eq!(code_of(&engine.cancel_job(&owner(ALICE), job.id).await), "job_finished");
        assert_eq!(engine.job(&owner(ALICE), job.id).await.unwrap().status, JobStatus::Succeeded);
    }
}
