//! Dispatch: claims hand each attempt to one worker, once, under a fresh lease.

use std::collections::HashSet;

use futures::future::join_all;
use onceflow_engine::model::{ActivityStatus, AttemptStatus, JobStatus, Scope};
use onceflow_engine::{ClaimRequest, JobListQuery, JobRequest, StuckAttemptsQuery};
use onceflow_tests::{
    claim, claim_one, code_of, llm_job, owner, quick_options, reap_until_unknown, rules, ALICE,
};
use serde_json::json;

rules! {
    async fn a_claim_starts_the_attempt_under_a_fresh_lease(db) {
        let engine = db.engine();
        let job = engine.submit(ALICE, "k", &llm_job(json!({"prompt": "hi"}), quick_options())).await.unwrap().job;
        assert_eq!(job.status, JobStatus::Queued);
        let task = claim_one(&engine, "primary-llm").await;
        assert_eq!(task.kind, "activity");
        assert_eq!((task.job_id, task.attempt_number, task.read_version), (job.id, 1, 0));
        assert_eq!(task.input, json!({"prompt": "hi"}));
        assert_eq!(task.heartbeat_timeout_ms, Some(1000));
        assert_eq!(task.start_to_close_timeout_ms, Some(300_000));
        assert_eq!(task.idempotency_key, format!("{}:0", job.id));
        let job = engine.job(&owner(ALICE), job.id).await.unwrap();
        assert_eq!(job.status, JobStatus::Running);
        assert_eq!(job.activities[0].status, ActivityStatus::Running);
        let attempt = &job.activities[0].attempts[0];
        assert_eq!(attempt.status, AttemptStatus::Started);
        assert!(attempt.lease_expires_at.unwrap() > attempt.started_at.unwrap());
        assert!(claim(&engine, &owner(ALICE), "w2", "primary-llm", 10).await.is_empty(), "handed out once");
    }

    async fn concurrent_workers_never_get_the_same_attempt(db) {
        let (engines, _turn) = db.separate_engines(8).await;
        let n = 60;
        for i in 0..n {
            engines[0].submit(ALICE, &format!("k{i}"), &llm_job(json!({"i": i}), quick_options())).await.unwrap();
        }
        let handed = join_all(engines.iter().enumerate().map(|(w, engine)| async move {
            let mut mine = Vec::new();
            loop {
                let got = claim(engine, &owner(ALICE), &format!("w{w}"), "primary-llm", 3).await;
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|t| t.attempt_id));
            }
        }))
        .await;
        let all: Vec<_> = handed.into_iter().flatten().collect();
        let unique: HashSet<_> = all.iter().collect();
        assert_eq!(all.len(), n, "every attempt handed out");
        assert_eq!(unique.len(), n, "none handed out twice");
    }

    async fn a_claim_only_takes_the_queue_and_providers_the_worker_registered(db) {
        let engine = db.engine();
        let mut other_queue = JobRequest::activity("generate", &["primary-llm"], json!({}));
        other_queue.task_queue = "gpu".into();
        engine.submit(ALICE, "a", &other_queue).await.unwrap();
        engine.submit(ALICE, "b", &JobRequest::activity("charge", &["stripe"], json!({}))).await.unwrap();
        assert!(claim(&engine, &owner(ALICE), "w", "primary-llm", 10).await.is_empty());
        let gpu = engine
            .claim(&owner(ALICE), &ClaimRequest {
                worker_id: "w".into(),
                task_queue: "gpu".into(),
                providers: vec![("generate".into(), "primary-llm".into()), ("charge".into(), "stripe".into())],
                max_tasks: 10,
            })
            .await
            .unwrap();
        assert_eq!(gpu.len(), 1, "only the gpu queue's attempt");
        let bad = engine
            .claim(&owner(ALICE), &ClaimRequest { worker_id: "w".into(), task_queue: "default".into(), providers: vec![], max_tasks: 0 })
            .await;
        assert_eq!(code_of(&bad), "invalid_request");
    }

    async fn jobs_list_newest_first_a_page_at_a_time(db) {
        let engine = db.engine();
        let mut ids = Vec::new();
        for i in 0..5 {
            ids.push(engine.submit(ALICE, &format!("k{i}"), &JobRequest::workflow("w", json!({}))).await.unwrap().job.id);
        }
        ids.reverse();
        let me = owner(ALICE);
        let first = engine.list_jobs(&me, &JobListQuery { limit: Some(2), ..Default::default() }).await.unwrap();
        let second = engine.list_jobs(&me, &JobListQuery { limit: Some(2), after: first.next.clone(), ..Default::default() }).await.unwrap();
        let third = engine.list_jobs(&me, &JobListQuery { limit: Some(2), after: second.next.clone(), ..Default::default() }).await.unwrap();
        let seen: Vec<_> = [first.jobs, second.jobs, third.jobs.clone()].concat().into_iter().map(|j| j.id).collect();
        assert_eq!(seen, ids);
        assert!(third.next.is_none());
        assert_eq!(code_of(&engine.list_jobs(&me, &JobListQuery { limit: Some(0), ..Default::default() }).await), "invalid_request");
        assert_eq!(code_of(&engine.list_jobs(&me, &JobListQuery { after: Some("nope".into()), ..Default::default() }).await), "invalid_request");
        let filtered = engine
            .list_jobs(&me, &JobListQuery { status: Some(JobStatus::Succeeded), ..Default::default() })
            .await
            .unwrap();
        assert!(filtered.jobs.is_empty());
    }

    async fn operators_list_stuck_attempts_across_owners_oldest_first(db) {
        let engine = db.engine();
        let a = engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap().job;
        engine.submit("bob", "k", &llm_job(json!({}), quick_options())).await.unwrap();
        let alice_task = claim_one(&engine, "primary-llm").await;
        let bob_task = claim(&engine, &owner("bob"), "w", "primary-llm", 1).await.remove(0);
        reap_until_unknown(&engine, a.id, alice_task.attempt_id).await;

        let unknown = engine
            .stuck_attempts(&StuckAttemptsQuery { statuses: vec![AttemptStatus::Unknown], older_than_s: 0, limit: None })
            .await
            .unwrap();
        assert!(unknown.iter().any(|s| s.attempt.id == alice_task.attempt_id && s.owner == ALICE && s.job_id == a.id));
        assert!(unknown.iter().all(|s| s.attempt.status == AttemptStatus::Unknown));
        let all = engine
            .stuck_attempts(&StuckAttemptsQuery { statuses: vec![], older_than_s: 0, limit: None })
            .await
            .unwrap();
        let ids: HashSet<_> = all.iter().map(|s| s.attempt.id).collect();
        assert!(ids.contains(&alice_task.attempt_id) && ids.contains(&bob_task.attempt_id));
        assert!(all.windows(2).all(|w| w[0].since <= w[1].since), "oldest first");
        let none = engine
            .stuck_attempts(&StuckAttemptsQuery { statuses: vec![], older_than_s: 3600, limit: None })
            .await
            .unwrap();
        assert!(none.is_empty());
        let bad = engine
            .stuck_attempts(&StuckAttemptsQuery { statuses: vec![AttemptStatus::Succeeded], older_than_s: 0, limit: None })
            .await;
        assert_eq!(code_of(&bad), "invalid_request");
        let _ = Scope::AllOwners;
    }
}
