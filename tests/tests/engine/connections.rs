//! The PostgreSQL store's connections: a connection in steady use is handed out without a
//! check, one the server dropped while it sat idle is replaced before it is used, and the
//! pool never asks for more connections than the server admits.

use std::sync::Arc;

use onceflow_engine::store::postgres::{PgStore, PING_AFTER_IDLE};
use onceflow_engine::Engine;
use onceflow_tests::{llm_job, quick_options, Backend, TestDb, ALICE};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_server_dropped_while_idle_are_replaced_before_use() {
    let db = TestDb::new(Backend::Postgres).await;
    let store = PgStore::connect(&db.url(), 2)
        .await
        .expect("connect the engine's pool");
    let engine = Engine::new(Arc::new(store));
    let submit = |key: String| {
        let engine = engine.clone();
        async move {
            engine
                .submit(ALICE, &key, &llm_job(json!({}), quick_options()))
                .await
        }
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
    let after: Vec<_> =
        futures::future::join_all((0..4).map(|i| submit(format!("after-{i}")))).await;
    for (i, submitted) in after.into_iter().enumerate() {
        let submitted = submitted.unwrap_or_else(|e| {
            panic!("submission {i} after the server dropped the connections: {e}")
        });
        assert!(!submitted.replayed);
    }
    assert_eq!(db.count("SELECT count(*) FROM jobs").await, 6);
}

/// A pool sized above the server's `max_connections` would, under load, retry refused
/// connections (`too many clients`) until its acquire timeout and answer `unavailable`
/// with idle connections to spare. The engine lowers it to the server's room instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_larger_than_the_server_admits_is_lowered_to_fit() {
    let db = TestDb::new(Backend::Postgres).await;
    let server_limit = db
        .count("SELECT current_setting('max_connections')::bigint")
        .await;
    let store = PgStore::connect(&db.url(), 1_000_000)
        .await
        .expect("connect with an oversized pool");
    let size = i64::from(store.pool().options().get_max_connections());
    assert!(size >= 1, "the pool keeps at least one connection");
    assert!(
        size <= server_limit,
        "a pool of {size} connections against a server that admits {server_limit}"
    );
    // The lowered pool works as any other.
    let engine = Engine::new(Arc::new(store));
    let submitted: Vec<_> = futures::future::join_all((0..8).map(|i| {
        let engine = engine.clone();
        async move {
            engine
                .submit(
                    ALICE,
                    &format!("fits-{i}"),
                    &llm_job(json!({}), quick_options()),
                )
                .await
        }
    }))
    .await;
    for (i, s) in submitted.into_iter().enumerate() {
        s.unwrap_or_else(|e| panic!("submission {i} on the lowered pool: {e}"));
    }
    assert_eq!(db.count("SELECT count(*) FROM jobs").await, 8);
}
