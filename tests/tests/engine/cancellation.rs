//! A caller that goes away (a worker killed mid-request, a client that hangs up, an HTTP
//! timeout) drops its engine call wherever that call is. Whatever the call had begun is
//! rolled back whole, and nothing it held keeps other writers out.

use std::future::Future;

use futures::future::join_all;
use onceflow_engine::model::AttemptStatus;
use onceflow_tests::{claim, llm_job, owner, quick_options, rules, ALICE};
use serde_json::json;

/// Runs `call` until it finishes or until it has been polled after `yields` turns of the
/// runtime, whichever comes first; in the second case the call is dropped mid-flight, as
/// a handler is when its client disconnects.
async fn cut_after<F: Future>(yields: u64, call: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        out = call => Some(out),
        _ = async { for _ in 0..yields { tokio::task::yield_now().await } } => None,
    }
}

rules! {
    async fn calls_dropped_at_any_point_leave_the_store_writable_and_whole(db) {
        let engine = db.engine();
        const JOBS: usize = 20;
        for n in 0..JOBS {
            engine.submit(ALICE, &format!("k{n}"), &llm_job(json!({"n": n}), quick_options())).await.unwrap();
        }
        // Claims, heartbeats and reaper passes at once, each cut off at a different point:
        // before, inside and after their transactions.
        let mut claimed = Vec::new();
        for round in 0..60u64 {
            let outcomes = join_all((0..8u64).map(|i| {
                let engine = engine.clone();
                async move {
                    let yields = (round * 8 + i) * 7 % 300;
                    let tasks = cut_after(yields, claim(&engine, &owner(ALICE), "w1", "primary-llm", 1)).await.unwrap_or_default();
                    for task in &tasks {
                        cut_after(yields / 2, engine.heartbeat(&owner(ALICE), task.attempt_id, task.lease_token, None)).await;
                    }
                    cut_after(yields, engine.reap()).await;
                    tasks
                }
            }))
            .await;
            claimed.extend(outcomes.into_iter().flatten());
        }
        // Every later write goes through: no abandoned transaction holds the write lock
        // (on SQLite a stuck one makes these fail with `database is locked`).
        let after = engine.submit(ALICE, "after", &llm_job(json!({}), quick_options())).await.unwrap();
        engine.reap().await.unwrap();
        let rest = claim(&engine, &owner(ALICE), "w2", "primary-llm", 100).await;
        assert!(rest.iter().any(|t| t.job_id == after.job.id), "the new job is handed out");

        // Nothing was half-done or done twice: each job still has exactly one attempt,
        // started at most once, and every attempt a cut-off claim started is either one a
        // claim answered or one left started for the reaper (never a second one).
        assert_eq!(db.count("SELECT count(*) FROM jobs").await, JOBS as i64 + 1);
        assert_eq!(db.count("SELECT count(*) FROM attempts").await, JOBS as i64 + 1);
        let mut handed: Vec<_> = claimed.iter().chain(&rest).map(|t| (t.attempt_id, t.job_id)).collect();
        handed.sort();
        let before = handed.len();
        handed.dedup();
        assert_eq!(handed.len(), before, "no attempt was handed out twice");
        for (attempt_id, job_id) in handed {
            let status = onceflow_tests::attempt_view(&engine, job_id, attempt_id).await.status;
            assert!(matches!(status, AttemptStatus::Started | AttemptStatus::Unknown), "{status:?}");
        }
    }
}
