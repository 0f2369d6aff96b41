//! The PostgreSQL store's connections: a connection in steady use is handed out without a
//! check, one the server dropped while it sat idle is replaced before it is used, the
//! pool never asks for more connections than the server admits nor starts below its
//! working minimum, every connection runs under the configured `statement_timeout`
//! and `idle_in_transaction_session_timeout`, and a read-only server (SQLSTATE 25006) is
//! the database away, never a 500.

use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::http::ServerConfig;
use onceflow_engine::store::postgres::{PgStore, MIN_POOL_CONNECTIONS, PING_AFTER_IDLE};
use onceflow_engine::store::Store;
use onceflow_engine::{ConnectSettings, Engine, EngineError};
use onceflow_tests::cluster::PrivateCluster;
use onceflow_tests::server::{onceflow_binary, TestServer, Tokens};
use onceflow_tests::{code_of, llm_job, quick_options, wait_for, Backend, TestDb, ALICE};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::Connection;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_server_dropped_while_idle_are_replaced_before_use() {
    onceflow_tests::time_limit(async {
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
    })
    .await;
}

/// A pool sized above the server's `max_connections` would, under load, retry refused
/// connections (`too many clients`) until its acquire timeout and answer `unavailable`
/// with idle connections to spare. The engine lowers it to the server's room instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_larger_than_the_server_admits_is_lowered_to_fit() {
    onceflow_tests::time_limit(async {
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
    })
    .await;
}

/// Settings with a short `statement_timeout`, for the tests that wait behind a lock.
fn short_statement_timeout() -> ConnectSettings {
    ConnectSettings {
        max_connections: 4,
        statement_timeout: Duration::from_millis(300),
        idle_in_transaction_timeout: Duration::from_millis(500),
    }
}

/// A value of a PostgreSQL setting, in its base unit (milliseconds for the timeouts), as
/// a connection of `pool` sees it.
async fn setting_of(pool: &sqlx::PgPool, name: &str) -> String {
    sqlx::query_scalar("SELECT setting FROM pg_settings WHERE name = $1")
        .bind(name)
        .fetch_one(pool)
        .await
        .expect("read a setting")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pooled_connection_runs_with_the_configured_timeouts() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let configured = PgStore::connect_with(&db.url(), &short_statement_timeout())
            .await
            .expect("connect with short timeouts");
        // Every connection of the pool, not only the first: hold them all at once.
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(
                configured
                    .pool()
                    .acquire()
                    .await
                    .expect("a pooled connection"),
            );
        }
        for conn in &mut held {
            let (statement, idle): (String, String) = sqlx::query_as(
                "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')",
            )
            .fetch_one(&mut **conn)
            .await
            .expect("read the timeouts");
            assert_eq!((statement.as_str(), idle.as_str()), ("300ms", "500ms"));
        }
        drop(held);
        // The defaults, as `Engine::connect(url, n)` and `onceflow serve` without flags use.
        let defaults = PgStore::connect(&db.url(), 2)
            .await
            .expect("connect with the defaults");
        assert_eq!(
            setting_of(defaults.pool(), "statement_timeout").await,
            "30000"
        );
        assert_eq!(
            setting_of(defaults.pool(), "idle_in_transaction_session_timeout").await,
            "60000"
        );
        assert_eq!(setting_of(defaults.pool(), "jit").await, "off");
        // Zero turns a timeout off.
        let off = PgStore::connect_with(
            &db.url(),
            &ConnectSettings {
                max_connections: 2,
                statement_timeout: Duration::ZERO,
                idle_in_transaction_timeout: Duration::ZERO,
            },
        )
        .await
        .expect("connect without timeouts");
        assert_eq!(setting_of(off.pool(), "statement_timeout").await, "0");
        assert_eq!(
            setting_of(off.pool(), "idle_in_transaction_session_timeout").await,
            "0"
        );
    })
    .await;
}

/// A statement stuck behind another session's lock is cancelled by `statement_timeout`
/// (SQLSTATE 57014) and answers `503 unavailable`, not `500 internal`, and not never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_blocked_behind_a_lock_past_the_statement_timeout_answers_unavailable() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let engine = Engine::connect_with(&db.url(), &short_statement_timeout())
            .await
            .expect("connect with a short statement timeout");
        let tokens = Tokens::mint(&engine).await;
        let server =
            TestServer::start_engine(engine.clone(), tokens, ServerConfig::default()).await;
        let lock = db.lock_writes().await;

        let started = std::time::Instant::now();
        let submitted = tokio::time::timeout(
            Duration::from_secs(20),
            engine.submit(ALICE, "blocked", &llm_job(json!({}), quick_options())),
        )
        .await
        .expect("the submission ends instead of waiting for the lock for ever");
        assert_eq!(code_of(&submitted), "unavailable", "{submitted:?}");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(10),
            "cut by the 300 ms statement timeout, not an HTTP or pool timeout: {took:?}"
        );

        let reply = tokio::time::timeout(
            Duration::from_secs(20),
            server.api.submit(
                &server.tokens.client,
                "blocked-over-http",
                &json!({"activity": "generate", "providers": ["primary-llm"], "input": {}}),
            ),
        )
        .await
        .expect("the request ends instead of waiting for the lock for ever");
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{:?}",
            reply.body
        );
        assert_eq!(reply.code(), "unavailable");

        lock.release().await;
        let after = server
            .api
            .submit(
                &server.tokens.client,
                "blocked-over-http",
                &json!({"activity": "generate", "providers": ["primary-llm"], "input": {}}),
            )
            .await;
        assert_eq!(after.status, StatusCode::CREATED, "{:?}", after.body);
        assert_eq!(db.count("SELECT count(*) FROM jobs").await, 1);
    })
    .await;
}

/// A transaction left open without a statement past `idle_in_transaction_session_timeout`
/// is ended by the server (SQLSTATE 25P03): its locks are released, and the call that
/// finds its session gone answers `unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_left_idle_past_its_timeout_is_ended_and_answers_unavailable() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let store = PgStore::connect_with(&db.url(), &short_statement_timeout())
            .await
            .expect("connect with a short idle-in-transaction timeout");
        let engine = Engine::new(Arc::new(store.clone()));
        let job = engine
            .submit(ALICE, "held", &llm_job(json!({}), quick_options()))
            .await
            .expect("submitted")
            .job;
        let mut tx = store.begin().await.expect("begin");
        assert!(tx
            .lock_job(ALICE, job.id)
            .await
            .expect("lock the job")
            .is_some());
        // The engine stalls with the job's lock held; the server ends the session.
        wait_for(
            "the server to end the idle transaction",
            Duration::from_secs(10),
            || async {
                db.count(
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'",
                )
                .await
                    == 0
            },
        )
        .await;
        // Its lock is gone: another transaction takes the job at once.
        let cancelled = tokio::time::timeout(
            Duration::from_secs(5),
            engine.cancel_job(&onceflow_tests::owner(ALICE), job.id),
        )
        .await
        .expect("the job's lock was released with the ended session");
        cancelled.expect("cancel the job");
        let late = tx.lock_job(ALICE, job.id).await;
        let error = match late {
            Ok(found) => panic!("a statement on the ended session succeeded: {found:?}"),
            Err(e) => EngineError::from(e),
        };
        assert_eq!(error.code(), "unavailable", "{error:?}");
    })
    .await;
}

/// Waits until the server counts `sessions` client sessions (those that closed have
/// exited, the ones opened have started), as seen from `conn`.
async fn settle_sessions(conn: &mut sqlx::PgConnection, sessions: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'",
        )
        .fetch_one(&mut *conn)
        .await
        .expect("count the sessions");
        if now == sessions {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server still counts {now} sessions, not {sessions}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A pool lowered to the server's room never goes below the engine's working minimum:
/// with less room than that, connecting (and `onceflow serve`) fails and says the room,
/// the minimum and what to do, instead of running on a pool too small to serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_room_for_the_pool_minimum_is_refused_with_the_reason() {
    onceflow_tests::time_limit(async {
        let cluster = tokio::task::spawn_blocking(|| {
            let cluster = PrivateCluster::start(&["max_connections = 10"], &[]);
            cluster.create_database("onceflow");
            cluster
        })
        .await
        .expect("start a private cluster");
        let url = cluster.url("onceflow");
        // Other clients hold 6 of the server's 10 slots: room for 4, fewer than the minimum.
        let mut held = Vec::new();
        for _ in 0..6 {
            held.push(
                sqlx::PgConnection::connect(&url)
                    .await
                    .expect("a session of another client"),
            );
        }
        settle_sessions(&mut held[0], 6).await;
        let refused = PgStore::connect(&url, 20).await;
        let message = match refused {
            Ok(store) => panic!(
                "connected with a pool of {} on a server with room for 4",
                store.pool().options().get_max_connections()
            ),
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        onceflow_engine::StoreError::PoolTooSmall {
                            room: 4,
                            minimum: MIN_POOL_CONNECTIONS
                        }
                    ),
                    "{e:?}"
                );
                e.to_string()
            }
        };
        for words in [
            "room for only 4",
            &format!("at least {MIN_POOL_CONNECTIONS}"),
            "max_connections",
            "close sessions",
        ] {
            assert!(message.contains(words), "`{words}` in: {message}");
        }
        let engine = Engine::connect(&url, 20).await;
        assert!(
            matches!(engine, Err(ref e) if e.code() == "unavailable"),
            "Engine::connect refuses it too"
        );

        // `onceflow serve` exits non-zero with the same reason.
        let serve_url = url.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(onceflow_binary())
                .args([
                    "serve",
                    "--database-url",
                    &serve_url,
                    "--bind",
                    "127.0.0.1:0",
                ])
                .output()
                .expect("run onceflow serve")
        })
        .await
        .expect("onceflow serve ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("onceflow serve said: {stderr}");
        assert!(!out.status.success(), "serve exited {:?}", out.status);
        assert!(
            stderr.contains("room for only 4") && stderr.contains("max_connections"),
            "serve says why: {stderr}"
        );

        // With room for the minimum (but not the 20 asked for), the pool is lowered to fit.
        for conn in held.split_off(2) {
            conn.close().await.expect("close a session");
        }
        settle_sessions(&mut held[0], 2).await;
        let store = PgStore::connect(&url, 20)
            .await
            .expect("room for 8 is enough");
        assert_eq!(store.pool().options().get_max_connections(), 8);
        drop(held);
        drop(cluster);
    })
    .await;
}

/// Migrations may rewrite large tables and wait for another engine's migration lock: they
/// run on a connection of their own without the pool's `statement_timeout`, however short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_not_cut_by_the_statement_timeout() {
    onceflow_tests::time_limit(async {
        let admin: sqlx::postgres::PgConnectOptions =
            onceflow_tests::admin_url().parse().expect("admin URL");
        let name = format!("onceflow_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect_with(&admin)
            .await
            .expect("connect to the admin database");
        sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("create an empty database");
        let admin_url = onceflow_tests::admin_url();
        let url = format!(
            "{}/{name}",
            &admin_url[..admin_url
                .rfind('/')
                .expect("the admin URL names a database")]
        );
        let migrated = async {
            let engine = Engine::connect_with(
                &url,
                &ConnectSettings {
                    max_connections: 2,
                    statement_timeout: Duration::from_millis(1),
                    idle_in_transaction_timeout: Duration::from_millis(1),
                },
            )
            .await
            .expect("connect with a 1 ms statement timeout");
            engine.migrate().await
        }
        .await;
        sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await
            .expect("drop the database");
        migrated.expect("every migration applies under a 1 ms statement timeout");
    })
    .await;
}

/// When the server restarts, the engine's LISTEN relay, which is always reading, sees its
/// connection go at once: from then on no call is handed a pooled connection the server
/// closed, however recently it was used (one idle for [`PING_AFTER_IDLE`] or more is
/// checked anyway). Calls made once the server is back all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_the_server_restarted_no_call_is_handed_a_connection_it_closed() {
    onceflow_tests::time_limit(async {
        let cluster = PrivateCluster::with_database("onceflow").await;
        let url = cluster.url("onceflow");
        let store = PgStore::connect(&url, 8)
            .await
            .expect("connect the engine's pool");
        let engine = Engine::new(Arc::new(store.clone()));
        engine.migrate().await.expect("migrate");
        let shutdown = tokio_util::sync::CancellationToken::new();
        let relay = {
            let (engine, shutdown) = (engine.clone(), shutdown.clone());
            tokio::spawn(async move { engine.listen_for_work(shutdown).await })
        };
        let check = sqlx::PgPool::connect(&url).await.expect("the test's pool");
        let listening = || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND state = 'idle'",
            )
            .fetch_one(&check)
            .await
            .map(|n| n == 1)
            .unwrap_or(false)
        };
        wait_for("the relay to LISTEN", Duration::from_secs(10), listening).await;
        let job = engine
            .submit(ALICE, "before", &llm_job(json!({}), quick_options()))
            .await
            .expect("submitted")
            .job;
        // Every pooled connection but the relay's in use at once, and idle again.
        let held = futures::future::join_all((0..7).map(|_| store.begin())).await;
        for tx in held {
            // Dropped: rolled back, its connection back in the pool.
            drop(tx.expect("a transaction on a connection of its own"));
        }
        let used = std::time::Instant::now();
        let restarter = cluster.clone();
        tokio::task::spawn_blocking(move || restarter.restart_fast())
            .await
            .expect("restart -m fast");
        if used.elapsed() >= PING_AFTER_IDLE {
            // Every pooled connection is checked before use anyway: nothing to see here.
            eprintln!(
                "the restart took {:?}, longer than PING_AFTER_IDLE: the rule was not exercised",
                used.elapsed()
            );
        }
        let alice = onceflow_tests::owner(ALICE);
        // At once, as many reads as there are pooled connections: none meets one the restart
        // closed.
        let reads = futures::future::join_all((0..7).map(|_| engine.job(&alice, job.id))).await;
        for (i, read) in reads.into_iter().enumerate() {
            read.unwrap_or_else(|e| panic!("read {i} once the server was back: {e}"));
        }
        engine
            .submit(ALICE, "after", &llm_job(json!({}), quick_options()))
            .await
            .expect("a submission once the server was back");
        wait_for(
            "the relay to LISTEN again",
            Duration::from_secs(10),
            listening,
        )
        .await;
        shutdown.cancel();
        relay.await.expect("the relay stops");
        let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
            .fetch_one(&check)
            .await
            .expect("count the jobs");
        assert_eq!(jobs, 2);
    })
    .await;
}

/// `onceflow serve` refuses a pool smaller than the engine's working minimum before it
/// connects, naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_pool_below_the_working_minimum() {
    onceflow_tests::time_limit(async {
        let below = (MIN_POOL_CONNECTIONS - 1).to_string();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(onceflow_binary())
                .args([
                    "serve",
                    "--database-url",
                    "postgres://nobody@127.0.0.1:1/none",
                    "--bind",
                    "127.0.0.1:0",
                    "--max-connections",
                    &below,
                ])
                .output()
                .expect("run onceflow serve")
        })
        .await
        .expect("onceflow serve ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("--max-connections"),
            "a pool of {} is refused by name: {stderr}",
            MIN_POOL_CONNECTIONS - 1
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_answers_unavailable_never_internal() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Postgres).await;
        let url = db.url();
        let name = url.rsplit('/').next().expect("a database name").to_owned();
        // Sessions opened from now on are read-only, as on a standby or on a server an
        // operator made read-only: a write fails with SQLSTATE 25006.
        db.execute(&format!(
            "ALTER DATABASE {name} SET default_transaction_read_only = on"
        ))
        .await
        .expect("make the database read-only for new sessions");
        let store = PgStore::connect(&url, 2)
            .await
            .expect("a one-host URL connects as given");
        let engine = Engine::new(Arc::new(store));
        let refused = engine
            .submit(ALICE, "read-only", &llm_job(json!({}), quick_options()))
            .await;
        assert_eq!(
            code_of(&refused),
            "unavailable",
            "a write refused by a read-only server is the database away (503), never a 500"
        );
        // With target_session_attrs=read-write, the engine does not start on it and says why.
        let refused = PgStore::connect(&format!("{url}?target_session_attrs=read-write"), 2).await;
        match refused {
            Err(e @ onceflow_engine::StoreError::NoWritableServer(_)) => {
                assert!(e.to_string().contains("read-only"), "{e}");
                assert!(e.is_unavailable(), "{e}");
            }
            other => panic!("expected no writable server, got {other:?}"),
        }
        db.execute(&format!(
            "ALTER DATABASE {name} RESET default_transaction_read_only"
        ))
        .await
        .expect("writable again");
        let store = PgStore::connect(&format!("{url}?target_session_attrs=read-write"), 2)
            .await
            .expect("a writable server is found");
        Engine::new(Arc::new(store))
            .submit(ALICE, "writable", &llm_job(json!({}), quick_options()))
            .await
            .expect("submitted on the writable server");
    })
    .await;
}
