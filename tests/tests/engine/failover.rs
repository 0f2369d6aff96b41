//! Invariant 6 and docs/api.md "What happens after an attempt ends": retries, failover only to
//! certified providers, contracts checked on the engine side.

use std::time::Duration;

use onceflow_engine::model::Certification;
use onceflow_engine::model::{
    ActivityStatus, AttemptStatus, CompletionOutcome, Failover, JobStatus, Scope,
};
use onceflow_engine::EngineError;
use onceflow_tests::{
    certify, claim, claim_one, code_of, error_of, event_types, llm_job, owner, quick_options,
    result_of, rules, text_schema, wait_for, ALICE,
};
use serde_json::json;

rules! {
    async fn a_result_that_violates_the_contract_is_invalid_and_fails_over(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let task = claim_one(&engine, "primary-llm").await;
        let bad = result_of(&task, json!({"txt": 42}));
        let err = engine.complete(&Scope::AllOwners, task.attempt_id, &bad).await.expect_err("contract is enforced");
        match &err {
            EngineError::ContractViolation { errors, .. } => assert!(!errors.is_empty()),
            other => panic!("expected contract_violation, got {other:?}"),
        }
        assert_eq!(err.http_status(), 422);
        // A repeat answers the same 422.
        assert_eq!(code_of(&engine.complete(&Scope::AllOwners, task.attempt_id, &bad).await), "contract_violation");

        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.result, None, "an invalid result is never committed");
        let attempts = &job.activities[0].attempts;
        assert_eq!(attempts[0].status, AttemptStatus::Invalid);
        assert_eq!(attempts[0].error.as_ref().unwrap().code, "contract_violation");
        assert_eq!((attempts[1].provider.as_str(), attempts[1].status), ("fallback-llm", AttemptStatus::Scheduled));
        let events = event_types(&engine, job.id).await;
        assert!(events.ends_with(&["attempt_invalid".to_owned(), "failover".to_owned()]), "{events:?}");
    }

    async fn retryable_errors_retry_the_same_provider_then_fail_over(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let mut options = quick_options();
        options.retry.max_attempts_per_provider = 2;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), options)).await.unwrap().job;

        let first = claim_one(&engine, "primary-llm").await;
        let outcome = engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "rate limited", true)).await.unwrap();
        assert_eq!(outcome, CompletionOutcome::Recorded);
        let second = claim_one(&engine, "primary-llm").await;
        assert_eq!(second.attempt_number, 2, "the same provider again");
        engine.complete(&Scope::AllOwners, second.attempt_id, &error_of(&second, "rate limited", true)).await.unwrap();
        let third = claim_one(&engine, "fallback-llm").await;
        assert_eq!(third.attempt_number, 3, "budget spent: the next certified provider");
        engine.complete(&Scope::AllOwners, third.attempt_id, &result_of(&third, json!({"text": "ok"}))).await.unwrap();

        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.status, JobStatus::Succeeded);
        let providers: Vec<_> = job.activities[0].attempts.iter().map(|a| (a.provider.as_str(), a.status)).collect();
        assert_eq!(providers, vec![
            ("primary-llm", AttemptStatus::Failed),
            ("primary-llm", AttemptStatus::Failed),
            ("fallback-llm", AttemptStatus::Succeeded),
        ]);
        assert_eq!(job.activities[0].attempts[0].error.as_ref().unwrap().retryable, Some(true));
    }

    async fn a_retry_waits_for_its_backoff(db) {
        let engine = db.engine();
        let mut options = quick_options();
        options.retry.initial_backoff_ms = 800;
        options.retry.max_backoff_ms = 5000;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), options)).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "503", true)).await.unwrap();
        assert!(claim(&engine, &owner(ALICE), "w1", "primary-llm", 1).await.is_empty(), "not before its backoff");
        let events = engine.job_events(&owner(ALICE), job.id).await.unwrap();
        let scheduled = events.iter().rev().find(|e| e.kind == "attempt_scheduled").unwrap();
        assert_eq!(scheduled.data["delay_ms"], json!(800));
        assert_eq!(scheduled.data["reason"], json!("retry"));
        let second = claim_one(&engine, "primary-llm").await;
        assert_eq!(second.attempt_number, 2);
    }

    async fn a_non_retryable_error_fails_over_at_once(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "bad request", false)).await.unwrap();
        let next = claim_one(&engine, "fallback-llm").await;
        assert_eq!(next.attempt_number, 2);
        assert_eq!(next.job_id, job.id);
    }

    async fn an_uncertified_fallback_is_skipped_and_the_job_fails_with_providers_exhausted(db) {
        let engine = db.engine();
        // A contract exists, but nobody certified the fallback against it.
        engine.register_contract(ALICE, "generate", &text_schema()).await.unwrap();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "bad request", false)).await.unwrap();

        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.status, JobStatus::Failed);
        assert_eq!(job.error.as_ref().unwrap().code, "providers_exhausted");
        assert_eq!(job.activities[0].status, ActivityStatus::Failed);
        assert_eq!(job.activities[0].error.as_ref().unwrap().code, "providers_exhausted");
        assert_eq!(job.activities[0].attempts.len(), 1, "no attempt at the uncertified provider");
        let events = engine.job_events(&owner(ALICE), job.id).await.unwrap();
        let skipped = events.iter().find(|e| e.kind == "failover_skipped").expect("failover_skipped is logged");
        assert_eq!(skipped.data["provider"], json!("fallback-llm"));
        let reason = skipped.data["reason"].as_str().unwrap();
        assert!(reason.contains("`fallback-llm` is not certified for the current contract"), "{reason}");
        // The job's error says why nobody took over, not only that nobody did.
        let message = &job.error.as_ref().unwrap().message;
        assert!(message.contains("after `primary-llm`") && message.contains("`fallback-llm` is not certified for the current contract"), "{message}");
        assert!(events.iter().any(|e| e.kind == "job_failed"));
        assert!(claim(&engine, &owner(ALICE), "w1", "fallback-llm", 1).await.is_empty());
    }

    async fn a_certification_for_an_old_contract_or_a_failed_latest_run_does_not_count(db) {
        let engine = db.engine();
        let old_hash = certify(&engine, ALICE, "fallback-llm").await;
        let new_schema = json!({"type": "object", "required": ["text", "tokens"]});
        let new_hash = engine.register_contract(ALICE, "generate", &new_schema).await.unwrap();
        assert_ne!(old_hash, new_hash, "a new schema gives a new hash");
        let job = engine.job(&owner(ALICE), engine.submit(ALICE, "a", &llm_job(json!({}), quick_options())).await.unwrap().job.id).await.unwrap();
        assert_eq!(code_of(&engine.create_attempt(&owner(ALICE), job.id, 0, "fallback-llm").await), "attempt_in_flight");
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "no", false)).await.unwrap();
        assert_eq!(engine.job(&owner(ALICE), job.id).await.unwrap().status, JobStatus::Failed, "the old certification does not count");

        // Certified for the new hash, then a later failing run: the latest counts.
        engine.record_certification(ALICE, "generate", "fallback-llm", &new_hash, true, json!({})).await.unwrap();
        engine.record_certification(ALICE, "generate", "fallback-llm", &new_hash, false, json!({"failed": "case 2"})).await.unwrap();
        let job = engine.submit(ALICE, "b", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "no", false)).await.unwrap();
        assert_eq!(engine.job(&owner(ALICE), job.id).await.unwrap().status, JobStatus::Failed);

        // A passing run after that restores failover.
        engine.record_certification(ALICE, "generate", "fallback-llm", &new_hash, true, json!({})).await.unwrap();
        let job = engine.submit(ALICE, "c", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "no", false)).await.unwrap();
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.activities[0].attempts[1].provider, "fallback-llm");
    }

    async fn an_owners_certification_never_unlocks_another_owners_failover(db) {
        let engine = db.engine();
        // Alice and bob hold the same contract for `generate` (one schema, one hash);
        // only bob certified `fallback-llm` against it.
        let bobs = certify(&engine, "bob", "fallback-llm").await;
        let alices = engine.register_contract(ALICE, "generate", &text_schema()).await.unwrap();
        assert_eq!(alices, bobs, "the same contract");
        let job = engine.submit(ALICE, "automatic", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "bad request", false)).await.unwrap();
        let failed = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!((failed.status, failed.error.as_ref().map(|e| e.code.as_str())), (JobStatus::Failed, Some("providers_exhausted")));
        assert_eq!(failed.activities[0].attempts.len(), 1, "no attempt at bob's certified provider");
        let events = engine.job_events(&owner(ALICE), job.id).await.unwrap();
        let skipped = events.iter().find(|e| e.kind == "failover_skipped").expect("failover_skipped is logged");
        assert_eq!(skipped.data["provider"], json!("fallback-llm"));
        assert!(!events.iter().any(|e| e.kind == "failover"), "{events:?}");
        // Nor by hand.
        let mut manual = quick_options();
        manual.failover = Failover::Manual;
        let waiting = engine.submit(ALICE, "manual", &llm_job(json!({}), manual)).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "bad request", false)).await.unwrap();
        assert_eq!(code_of(&engine.create_attempt(&owner(ALICE), waiting.id, 0, "fallback-llm").await), "provider_not_certified");
        assert!(claim(&engine, &owner(ALICE), "w1", "fallback-llm", 1).await.is_empty());

        // Alice's own certification is what opens the fallback to her jobs.
        engine.record_certification(ALICE, "generate", "fallback-llm", &alices, true, json!({})).await.unwrap();
        let created = engine.create_attempt(&owner(ALICE), waiting.id, 0, "fallback-llm").await.unwrap();
        assert_eq!(created.provider, "fallback-llm");
        let job = engine.submit(ALICE, "after", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        assert_eq!(first.job_id, job.id);
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "bad request", false)).await.unwrap();
        let view = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(view.activities[0].attempts[1].provider, "fallback-llm");
    }

    async fn platform_contracts_and_certifications_serve_every_owner(db) {
        let engine = db.engine();
        certify(&engine, "*", "fallback-llm").await;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "no", false)).await.unwrap();
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.activities[0].attempts[1].provider, "fallback-llm");
        // The platform contract is enforced on alice's results too.
        let next = claim_one(&engine, "fallback-llm").await;
        assert_eq!(code_of(&engine.complete(&Scope::AllOwners, next.attempt_id, &result_of(&next, json!(1))).await), "contract_violation");
    }

    async fn an_attempt_nobody_started_in_time_expires_and_fails_over(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let mut options = quick_options();
        options.schedule_to_start_timeout_s = Some(1);
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), options)).await.unwrap().job;
        wait_for("the schedule-to-start deadline to pass", Duration::from_secs(10), || async {
            engine.reap().await.unwrap().expired == 1
        }).await;
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        let attempts = &job.activities[0].attempts;
        assert_eq!(attempts[0].status, AttemptStatus::Expired);
        assert_eq!((attempts[1].provider.as_str(), attempts[1].status), ("fallback-llm", AttemptStatus::Scheduled));
        assert!(claim(&engine, &owner(ALICE), "w1", "primary-llm", 1).await.is_empty(), "the expired attempt is never handed out");
        let events = event_types(&engine, job.id).await;
        assert!(events.ends_with(&["attempt_expired".to_owned(), "failover".to_owned()]), "{events:?}");
    }

    async fn with_manual_failover_the_activity_waits_for_a_person(db) {
        let engine = db.engine();
        certify(&engine, ALICE, "fallback-llm").await;
        let mut options = quick_options();
        options.failover = Failover::Manual;
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), options)).await.unwrap().job;
        let first = claim_one(&engine, "primary-llm").await;
        engine.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "rate limited", true)).await.unwrap();
        let waiting = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(waiting.activities[0].status, ActivityStatus::Waiting);
        assert_eq!(waiting.activities[0].attempts.len(), 1, "nothing automatic, not even a retry");

        let created = engine.create_attempt(&owner(ALICE), job.id, 0, "fallback-llm").await.unwrap();
        assert_eq!((created.number, created.status), (2, AttemptStatus::Scheduled));
        let task = claim_one(&engine, "fallback-llm").await;
        assert_eq!(task.attempt_id, created.id);
        engine.complete(&Scope::AllOwners, task.attempt_id, &result_of(&task, json!({"text": "chosen by hand"}))).await.unwrap();
        assert_eq!(engine.job(&owner(ALICE), job.id).await.unwrap().status, JobStatus::Succeeded);
    }

    async fn a_skewed_engine_cannot_reorder_a_certifications_pass_and_fail(db) {
        // Two engines whose hosts' clocks are an hour fast and an hour slow.
        let fast = db.engine().with_clock_offset(chrono::Duration::hours(1));
        let slow = db.engine().with_clock_offset(-chrono::Duration::hours(1));
        let hash = fast.register_contract(ALICE, "generate", &text_schema()).await.unwrap();
        let record = |engine: &onceflow_engine::Engine, provider: &'static str, passed: bool| {
            let (engine, hash) = (engine.clone(), hash.clone());
            async move {
                engine.record_certification(ALICE, "generate", provider, &hash, passed, json!({"passed": passed})).await.unwrap()
            }
        };
        // fallback-llm fails on the fast engine, then passes on the slow one: the pass is later.
        let fail = record(&fast, "fallback-llm", false).await;
        let pass = record(&slow, "fallback-llm", true).await;
        // backup-llm passes on the fast engine, then fails on the slow one: the fail is later.
        let earlier_pass = record(&fast, "backup-llm", true).await;
        let later_fail = record(&slow, "backup-llm", false).await;
        let stamped_in_order = |first: &Certification, then: &Certification| first.created_at < then.created_at;
        assert!(stamped_in_order(&fail, &pass), "stamped by the database's clock: {fail:?} then {pass:?}");
        assert!(stamped_in_order(&earlier_pass, &later_fail), "stamped by the database's clock: {earlier_pass:?} then {later_fail:?}");

        // The contracts view shows the later run of each provider.
        let contracts = db.engine().contracts(&owner(ALICE)).await.unwrap();
        let current: Vec<_> = contracts[0].certifications.iter().map(|c| (c.provider.as_str(), c.passed)).collect();
        assert_eq!(current, vec![("backup-llm", false), ("fallback-llm", true)]);

        // And failover goes by it: fallback-llm is certified.
        let job = db.engine().submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        let first = claim_one(&fast, "primary-llm").await;
        slow.complete(&Scope::AllOwners, first.attempt_id, &error_of(&first, "bad request", false)).await.unwrap();
        let job = db.engine().job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.status, JobStatus::Running, "{:?}", job.error);
        assert_eq!(job.activities[0].attempts[1].provider, "fallback-llm");
    }
}
