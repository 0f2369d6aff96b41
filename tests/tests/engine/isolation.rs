//! Invariant 8: owners are isolated; another owner's ids are not found.

use onceflow_engine::model::Scope;
use onceflow_engine::JobListQuery;
use onceflow_tests::{claim, code_of, llm_job, owner, quick_options, result_of, rules, ALICE};
use serde_json::json;

rules! {
    async fn owners_cannot_see_or_touch_each_others_jobs(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({"secret": 1}), quick_options())).await.unwrap().job;
        let bob = owner("bob");
        assert_eq!(code_of(&engine.job(&bob, job.id).await), "not_found");
        assert_eq!(code_of(&engine.job_events(&bob, job.id).await), "not_found");
        assert_eq!(code_of(&engine.cancel_job(&bob, job.id).await), "not_found");
        assert_eq!(code_of(&engine.create_attempt(&bob, job.id, 0, "primary-llm").await), "not_found");
        assert!(engine.list_jobs(&bob, &JobListQuery::default()).await.unwrap().jobs.is_empty());
        // Bob listing "alice" as a filter still sees only his own.
        let sneaky = JobListQuery { owner: Some(ALICE.into()), ..Default::default() };
        assert!(engine.list_jobs(&bob, &sneaky).await.unwrap().jobs.is_empty());
        assert_eq!(engine.job(&owner(ALICE), job.id).await.unwrap().status.as_str(), "queued", "nothing changed");
        // Operators read across owners.
        assert_eq!(engine.job(&Scope::AllOwners, job.id).await.unwrap().owner, ALICE);
    }

    async fn a_worker_serves_only_its_owners_attempts_unless_it_is_a_platform_worker(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        assert!(claim(&engine, &owner("bob"), "bob-worker", "primary-llm", 10).await.is_empty());
        let tasks = claim(&engine, &Scope::for_worker("*"), "platform", "primary-llm", 10).await;
        assert_eq!(tasks.len(), 1);
        let task = &tasks[0];
        assert_eq!((task.job_id, task.owner.as_str()), (job.id, ALICE));
        let bob = owner("bob");
        assert_eq!(code_of(&engine.heartbeat(&bob, task.attempt_id, task.lease_token, None).await), "not_found");
        assert_eq!(code_of(&engine.complete(&bob, task.attempt_id, &result_of(task, json!({}))).await), "not_found");
    }

    async fn an_operator_lists_every_owner_and_can_narrow_to_one(db) {
        let engine = db.engine();
        engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap();
        engine.submit("bob", "k", &llm_job(json!({}), quick_options())).await.unwrap();
        let all = engine.list_jobs(&Scope::AllOwners, &JobListQuery::default()).await.unwrap();
        assert_eq!(all.jobs.len(), 2);
        let narrowed = engine
            .list_jobs(&Scope::AllOwners, &JobListQuery { owner: Some("bob".into()), ..Default::default() })
            .await
            .unwrap();
        assert_eq!(narrowed.jobs.len(), 1);
        assert_eq!(narrowed.jobs[0].owner, "bob");
    }
}
