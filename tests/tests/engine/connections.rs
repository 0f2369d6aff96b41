//! The PostgreSQL store's connections: a connection in steady use is handed out without a
//! check, and one the server dropped while it sat idle is replaced before it is used.

use std::sync::Arc;

use onceflow_engine::store::postgres::{PgStore, PING_AFTER_IDLE};
use onceflow_engine::Engine;
use onceflow_tests::{llm_job, quick_options, Backend, TestDb, ALICE};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_server_dropped_while_idle_are_replaced_before_use() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = PgStore::connect(&db.url(), 2).await.expect("connect the engine's pool");
    let engine = Engine::new(Arc::new(store));
    let submit = |key: String| {
        let engine = engine.clone();
        async move { engine.submit(ALICE, &key, &llm_job(json!({}), quick_options())).await }
    };
    // Both pooled connections in use once.
    let (a, b) = tokio::join!(submit("before-1".into()), submit("before-2".into()));
    a.expect("submitted");
    b.expect("submitted");
    // The server drops every other session of this database (a restart, a proxy
    // timeout, an operator's pg_terminate_backend).
    let dropped = db
        .count(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()) t",
        )
        .await;
    assert!(dropped >= 1, "the engine's sessions were dropped");
    // The pool's connections are now idle long enough to be checked before use.
    tokio::time::sleep(PING_AFTER_IDLE + std::time::Duration::from_millis(200)).await;
    let after: Vec<_> = futures::future::join_all((0..4).map(|i| submit(format!("after-{i}")))).await;
    for (i, submitted) in after.into_iter().enumerate() {
        let submitted = submitted.unwrap_or_else(|e| panic!("submission {i} after the server dropped the connections: {e}"));
        assert!(!submitted.replayed);
    }
    assert_eq!(db.count("SELECT count(*) FROM jobs").await, 6);
}
