//! The hot statements stay on their partial indexes as finished history grows: with a
//! large history of finished jobs, PostgreSQL's plans for dispatch, the reaper and the
//! timer loop never scan `attempts`, `jobs` or `timers` sequentially. (PostgreSQL only:
//! it is the production store, where history grows without bound.)

use onceflow_engine::store::postgres::{
    CLAIM_ATTEMPTS_SQL, CLAIM_WORKFLOW_TASKS_SQL, DUE_TIMERS_SQL, EXPIRED_LEASES_SQL, OVERDUE_SCHEDULED_SQL,
};
use onceflow_tests::{llm_job, quick_options, Backend, TestDb, ALICE};
use serde_json::json;

const HISTORY: u32 = 100_000;

async fn plan(db: &TestDb, name: &str, types: &str, sql: &str, args: &str) -> String {
    // PREPARE and EXPLAIN EXECUTE must share a session.
    let mut conn = db.pg_connection().await.expect("PostgreSQL");
    sqlx::query(&format!("PREPARE {name}({types}) AS {sql}")).execute(&mut conn).await.unwrap_or_else(|e| panic!("prepare {name}: {e}"));
    let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN EXECUTE {name}({args})")).fetch_all(&mut conn).await.unwrap_or_else(|e| panic!("explain {name}: {e}"));
    lines.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_queries_stay_on_partial_indexes_as_history_grows() {
    let db = TestDb::new(Backend::Postgres).await;
    let engine = db.engine();
    // A few live jobs, and a large finished history beside them.
    for i in 0..20 {
        engine.submit(ALICE, &format!("live-{i}"), &llm_job(json!({}), quick_options())).await.unwrap();
    }
    for sql in [
        format!("INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, status, finished_at)
                 SELECT 'history', md5('j' || i)::uuid, 'h' || i, 'f', 'activity', 'generate', 'default', '{{}}', 'succeeded', now()
                 FROM generate_series(1, {HISTORY}) i"),
        // Fresh statistics, so that the foreign-key checks of the next insert use indexes.
        "ANALYZE jobs".to_owned(),
        format!("INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version)
                 SELECT 'history', md5('a' || i)::uuid, md5('j' || i)::uuid, 0, 'generate', ARRAY['p'], '{{}}', 'default', '{{}}', 'succeeded', 1
                 FROM generate_series(1, {HISTORY}) i"),
        "ANALYZE activities".to_owned(),
        format!("INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status, finished_at, lease_expires_at)
                 SELECT 'history', md5('t' || i)::uuid, md5('a' || i)::uuid, md5('j' || i)::uuid, 1, 'generate', 'default', 'p', 'succeeded', now(), NULL
                 FROM generate_series(1, {HISTORY}) i"),
        format!("INSERT INTO timers (owner_id, job_id, seq, fire_at, fired_at)
                 SELECT 'history', md5('j' || i)::uuid, 1, now(), now() FROM generate_series(1, {HISTORY}) i"),
        "ANALYZE".to_owned(),
    ] {
        db.execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let plans = [
        ("claim", plan(&db, "claim", "text, text, text[], text[], bigint, text", &CLAIM_ATTEMPTS_SQL,
            "'default', NULL, ARRAY['generate'], ARRAY['primary-llm'], 16, 'w'").await),
        ("workflow_claim", plan(&db, "wf", "text, text[], text, bigint, text, float8", &CLAIM_WORKFLOW_TASKS_SQL,
            "'default', ARRAY['summarize'], NULL, 16, 'w', 30").await),
        ("reaper", plan(&db, "reaper", "bigint", &EXPIRED_LEASES_SQL, "200").await),
        ("expiry", plan(&db, "expiry", "bigint", &OVERDUE_SCHEDULED_SQL, "200").await),
        ("timers", plan(&db, "timers", "bigint", &DUE_TIMERS_SQL, "200").await),
    ];
    for (name, plan) in &plans {
        for table in ["attempts", "jobs", "timers", "activities"] {
            assert!(!plan.contains(&format!("Seq Scan on {table}")), "{name} scans {table} sequentially:\n{plan}");
        }
    }
    let claim = &plans[0].1;
    assert!(claim.contains("attempts_dispatch"), "dispatch uses its partial index:\n{claim}");
    assert!(plans[2].1.contains("attempts_lease_expiry"), "the reaper uses its partial index:\n{}", plans[2].1);
    assert!(plans[4].1.contains("timers_due"), "the timer loop uses its partial index:\n{}", plans[4].1);
}
