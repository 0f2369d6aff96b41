//! Resume against the engine alone: the resume guard across separate engines, and late
//! results of attempts made before a resume.

use futures::future::join_all;
use onceflow_engine::model::{CompletionOutcome, JobStatus, Principal, Role, Scope};
use onceflow_engine::Engine;
use onceflow_tests::{
    claim_one, code_of, error_of, event_types, llm_job, quick_options, result_of, rules, ALICE,
};
use serde_json::json;
use uuid::Uuid;

fn alice() -> Principal {
    Principal {
        token_id: Uuid::nil(),
        owner: ALICE.to_owned(),
        role: Role::Client,
    }
}

/// A failed activity job of alice: its attempt at the primary failed for good and the
/// uncertified fallback was passed over.
async fn failed_job(engine: &Engine, key: &str) -> Uuid {
    let job = engine
        .submit(ALICE, key, &llm_job(json!({"text": "x"}), quick_options()))
        .await
        .unwrap()
        .job;
    let task = claim_one(engine, "primary-llm").await;
    engine
        .complete(
            &Scope::AllOwners,
            task.attempt_id,
            &error_of(&task, "down", false),
        )
        .await
        .unwrap();
    assert_eq!(
        engine.job(&Scope::AllOwners, job.id).await.unwrap().status,
        JobStatus::Failed
    );
    job.id
}

rules! {
    async fn twenty_concurrent_resumes_on_separate_engines_resume_once(db) {
        let (engines, _turn) = db.separate_engines(20).await;
        let id = failed_job(&engines[0], "k").await;
        let who = alice();
        let resumes = join_all(engines.iter().map(|e| e.resume_job(&who, id, "again"))).await;
        assert_eq!(resumes.iter().filter(|r| r.is_ok()).count(), 1, "{resumes:?}");
        for refused in resumes.iter().filter(|r| r.is_err()) {
            assert_eq!(code_of(refused), "job_not_resumable");
        }
        let events = event_types(&engines[0], id).await;
        assert_eq!(events.iter().filter(|e| *e == "job_resumed").count(), 1, "{events:?}");
        let view = engines[0].job(&Scope::AllOwners, id).await.unwrap();
        assert_eq!(view.activities[0].attempts.len(), 2, "one fresh attempt: {view:?}");
    }

    async fn a_late_result_of_an_attempt_made_before_a_resume_is_lost(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({"text": "x"}), quick_options())).await.unwrap().job;
        // The attempt hangs; an operator cancels it; the uncertified fallback is passed
        // over: the job fails.
        let old = claim_one(&engine, "primary-llm").await;
        engine.cancel_attempt("ops", old.attempt_id, "stuck").await.unwrap();
        assert_eq!(engine.job(&Scope::AllOwners, job.id).await.unwrap().status, JobStatus::Failed);
        let resumed = engine.resume_job(&alice(), job.id, "provider back").await.unwrap();
        assert_eq!(resumed.status, JobStatus::Running);
        // The cancelled attempt's result arrives late: the slot it could have taken was
        // closed; the reopened one belongs to the fresh attempt.
        let late = engine.complete(&Scope::AllOwners, old.attempt_id, &result_of(&old, json!({"text": "late"}))).await.unwrap();
        assert_eq!(late, CompletionOutcome::Lost);
        let fresh = claim_one(&engine, "primary-llm").await;
        assert_ne!(fresh.attempt_id, old.attempt_id);
        let won = engine.complete(&Scope::AllOwners, fresh.attempt_id, &result_of(&fresh, json!({"text": "fresh"}))).await.unwrap();
        assert_eq!(won, CompletionOutcome::Won);
        let view = engine.job(&Scope::AllOwners, job.id).await.unwrap();
        assert_eq!(view.status, JobStatus::Succeeded);
        assert_eq!(view.result, Some(json!({"text": "fresh"})));
        let attempts: Vec<(i32, &str)> = view.activities[0].attempts.iter().map(|a| (a.number, a.status.as_str())).collect();
        assert_eq!(attempts, vec![(1, "lost"), (2, "succeeded")]);
    }
}
