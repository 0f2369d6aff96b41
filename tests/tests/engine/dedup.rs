//! Invariant 1: one job per (owner, idempotency key).

use futures::future::join_all;
use onceflow_engine::model::Scope;
use onceflow_engine::{EngineError, JobRequest};
use onceflow_tests::{code_of, event_types, llm_job, quick_options, rules, ALICE};
use serde_json::json;

async fn double_click(db: &onceflow_tests::TestDb, clicks: usize) {
    let (engines, _turn) = db.separate_engines(clicks).await;
    let request = llm_job(json!({"prompt": "summarize my inbox"}), quick_options());
    let submissions = join_all(engines.iter().map(|engine| {
        let request = request.clone();
        async move { engine.submit(ALICE, "click-1", &request).await }
    }))
    .await;
    let submissions: Vec<_> = submissions
        .into_iter()
        .map(|s| s.expect("every click is answered"))
        .collect();
    let first = submissions[0].job.id;
    assert!(
        submissions.iter().all(|s| s.job.id == first),
        "every click answers the same job id"
    );
    assert_eq!(
        submissions.iter().filter(|s| !s.replayed).count(),
        1,
        "exactly one click created the job"
    );

    let jobs = db.count("SELECT count(*) FROM jobs").await;
    let attempts = db.count("SELECT count(*) FROM attempts").await;
    assert_eq!((jobs, attempts), (1, 1), "one job, one first attempt");
    let events = event_types(&engines[0], first).await;
    assert_eq!(events.iter().filter(|e| *e == "job_created").count(), 1);
    assert_eq!(
        events.iter().filter(|e| *e == "job_replayed").count(),
        clicks - 1
    );
}

rules! {
    async fn double_click_two_concurrent_submits_make_one_job(db) {
        double_click(db, 2).await;
    }

    async fn fifty_concurrent_submits_with_one_key_make_one_job(db) {
        double_click(db, 50).await;
    }

    async fn same_key_with_different_input_is_refused_and_creates_nothing(db) {
        let engine = db.engine();
        let first = engine
            .submit(ALICE, "order-42", &llm_job(json!({"amount": 10}), quick_options()))
            .await
            .unwrap();
        let err = engine
            .submit(ALICE, "order-42", &llm_job(json!({"amount": 11}), quick_options()))
            .await
            .expect_err("a different intent under the same key is a conflict");
        match err {
            EngineError::IdempotencyKeyReused { job_id } => assert_eq!(job_id, first.job.id),
            other => panic!("expected idempotency_key_reused, got {other:?}"),
        }
        assert_eq!(code_of(&engine.submit(ALICE, "order-42", &JobRequest::workflow("w", json!({}))).await), "idempotency_key_reused");
        assert_eq!(db.count("SELECT count(*) FROM jobs").await, 1);
        let events = event_types(&engine, first.job.id).await;
        assert!(!events.iter().any(|e| e == "job_replayed"), "a refused submission writes nothing: {events:?}");
    }

    async fn key_order_and_whitespace_of_the_body_do_not_matter(db) {
        let engine = db.engine();
        let compact: serde_json::Value = serde_json::from_str(
            r#"{"activity":"generate","providers":["primary-llm"],"input":{"a":1,"b":{"c":2.0,"d":[1,2]}}}"#,
        ).unwrap();
        let spaced: serde_json::Value = serde_json::from_str(
            r#"{ "input" : { "b" : { "d" : [ 1 , 2 ] , "c" : 2 } , "a" : 1 } ,
                 "providers" : [ "primary-llm" ] ,
                 "task_queue" : "default" , "activity" : "generate" }"#,
        ).unwrap();
        let a = engine.submit(ALICE, "k", &JobRequest::from_json(&compact).unwrap()).await.unwrap();
        let b = engine.submit(ALICE, "k", &JobRequest::from_json(&spaced).unwrap()).await.unwrap();
        assert_eq!(a.job.id, b.job.id);
        assert!(!a.replayed && b.replayed);
    }

    async fn the_same_key_for_two_owners_is_two_jobs(db) {
        let engine = db.engine();
        let request = llm_job(json!({}), quick_options());
        let a = engine.submit(ALICE, "k", &request).await.unwrap();
        let b = engine.submit("bob", "k", &request).await.unwrap();
        assert_ne!(a.job.id, b.job.id);
        assert!(!a.replayed && !b.replayed);
        assert_eq!(b.job.owner, "bob");
    }

    async fn a_replay_returns_the_job_as_it_is_now(db) {
        let engine = db.engine();
        let request = llm_job(json!({"q": 1}), quick_options());
        let created = engine.submit(ALICE, "k", &request).await.unwrap();
        assert_eq!(created.job.status.as_str(), "queued");
        engine.cancel_job(&Scope::Owner(ALICE.into()), created.job.id).await.unwrap();
        let replay = engine.submit(ALICE, "k", &request).await.unwrap();
        assert!(replay.replayed);
        assert_eq!(replay.job.status.as_str(), "cancelled");
    }

    async fn a_replay_answers_every_activity_and_attempt_as_a_read_of_the_job_does(db) {
        let engine = db.engine();
        let request = llm_job(json!({"q": 2}), quick_options());
        let created = engine.submit(ALICE, "k", &request).await.unwrap();
        // Attempt 1 fails (retryable), so the activity has a second attempt.
        let task = onceflow_tests::claim_one(&engine, "primary-llm").await;
        let scope = Scope::Owner(ALICE.into());
        engine.complete(&scope, task.attempt_id, &onceflow_tests::error_of(&task, "rate limited", true)).await.unwrap();
        let read = engine.job(&scope, created.job.id).await.unwrap();
        assert!(read.activities[0].attempts.len() >= 2, "{read:?}");
        let replay = engine.submit(ALICE, "k", &request).await.unwrap();
        assert!(replay.replayed);
        assert_eq!(replay.job, read, "the replay's answer is the job as a read shows it");
        let types = onceflow_tests::event_types(&engine, created.job.id).await;
        assert_eq!(types.iter().filter(|t| *t == "job_replayed").count(), 1, "{types:?}");
    }

    async fn malformed_idempotency_keys_are_refused_before_anything_is_written(db) {
        let engine = db.engine();
        let request = llm_job(json!({}), quick_options());
        assert_eq!(code_of(&engine.submit(ALICE, "", &request).await), "missing_idempotency_key");
        assert_eq!(code_of(&engine.submit(ALICE, "has space", &request).await), "invalid_idempotency_key");
        assert_eq!(code_of(&engine.submit(ALICE, &"x".repeat(256), &request).await), "invalid_idempotency_key");
        assert_eq!(db.count("SELECT count(*) FROM jobs").await, 0);
    }

    async fn the_database_itself_refuses_a_second_job_for_a_key(db) {
        let engine = db.engine();
        engine.submit(ALICE, "k", &llm_job(json!({}), quick_options())).await.unwrap();
        let id = uuid::Uuid::now_v7();
        let sql = match db.backend() {
            onceflow_tests::Backend::Postgres => format!(
                "INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input)
                 VALUES ('alice', '{id}', 'k', 'other', 'activity', 'generate', 'default', '{{}}')"),
            onceflow_tests::Backend::Sqlite => format!(
                "INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, created_at, updated_at)
                 VALUES ('alice', '{id}', 'k', 'other', 'activity', 'generate', 'default', '{{}}', 0, 0)"),
        };
        let err = db.execute(&sql).await.expect_err("the unique constraint refuses a second job under one key");
        assert!(err.contains("jobs_one_per_idempotency_key") || err.contains("UNIQUE constraint failed: jobs.owner_id, jobs.idempotency_key"), "{err}");
    }
}
