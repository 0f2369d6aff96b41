//! Service endpoints, limits and the generic rejections.

use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::http::ServerConfig;
use onceflow_engine::store::postgres::PgStore;
use onceflow_engine::store::sqlite::SqliteStore;
use onceflow_engine::store::Store;
use onceflow_engine::Engine;
use onceflow_tests::server::{TestServer, Tokens};
use onceflow_tests::{rules, Backend};
use reqwest::{Method, StatusCode};
use serde_json::json;

rules! {
    async fn healthz_and_readyz_answer_while_the_database_does(db) {
        let server = TestServer::start(db).await;
        assert_eq!(server.api.send(Method::GET, "/healthz", None, &[], None).await.status, StatusCode::OK);
        assert_eq!(server.api.send(Method::GET, "/readyz", None, &[], None).await.status, StatusCode::OK);
    }

    async fn readyz_answers_503_when_the_database_does_not(db) {
        let tokens = Tokens::mint(&db.engine()).await;
        // A store of this variant's kind whose database does not answer.
        let store: Arc<dyn Store> = match db.backend() {
            // A server that is not there: nothing listens on port 1.
            Backend::Postgres => {
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .acquire_timeout(Duration::from_millis(500))
                    .connect_lazy("postgres://postgres@127.0.0.1:1/nowhere")
                    .unwrap();
                Arc::new(PgStore::new(pool))
            }
            // The test's own database file, through a store whose connections are gone:
            // every call is refused before it reaches the file (sqlx's `PoolClosed`).
            Backend::Sqlite => {
                let store = SqliteStore::connect(&db.url(), 2).await.expect("open the SQLite test database");
                store.pool().close().await;
                Arc::new(store)
            }
        };
        let server = TestServer::start_engine(Engine::new(store), tokens, ServerConfig::default()).await;
        assert_eq!(server.api.send(Method::GET, "/healthz", None, &[], None).await.status, StatusCode::OK);
        let ready = server.api.send(Method::GET, "/readyz", None, &[], None).await;
        assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
        // Requests that need the database fail as unavailable, not as a crash.
        let reply = server.api.get("/v1/jobs", &server.tokens.client).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(reply.code(), "unavailable");
    }

    async fn the_openapi_document_describes_every_route_of_api_md(db) {
        let server = TestServer::start(db).await;
        let doc = server.api.send(Method::GET, "/openapi.json", None, &[], None).await;
        assert_eq!(doc.status, StatusCode::OK);
        assert!(doc.body["openapi"].as_str().unwrap().starts_with("3."));
        let paths = doc.body["paths"].as_object().unwrap();
        for (path, method) in [
            ("/v1/jobs", "post"), ("/v1/jobs", "get"), ("/v1/jobs/{id}", "get"), ("/v1/jobs/{id}/events", "get"),
            ("/v1/jobs/{id}/cancel", "post"), ("/v1/jobs/{id}/activities/{seq}/attempts", "post"),
            ("/v1/worker/poll", "post"), ("/v1/worker/attempts/{id}/heartbeat", "post"),
            ("/v1/worker/attempts/{id}/complete", "post"), ("/v1/worker/contracts", "post"),
            ("/v1/worker/certifications", "post"), ("/v1/attempts", "get"), ("/v1/attempts/{id}/cancel", "post"),
            ("/v1/tokens", "post"), ("/v1/tokens/{id}", "delete"), ("/healthz", "get"), ("/readyz", "get"),
            ("/v1/schedules", "get"), ("/v1/schedules/{name}", "put"), ("/v1/schedules/{name}", "get"),
            ("/v1/schedules/{name}", "delete"), ("/v1/schedules/{name}/pause", "post"), ("/v1/schedules/{name}/resume", "post"),
            ("/v1/schedules/{name}/events", "get"), ("/v1/worker/completions", "post"),
        ] {
            assert!(paths.get(path).and_then(|p| p.get(method)).is_some(), "{method} {path} is documented");
        }
        let schemas = doc.body["components"]["schemas"].as_object().unwrap();
        for schema in ["JobView", "AttemptView", "ActivityTask", "ErrorBody", "JobRequestBody", "ScheduleView", "ScheduleRequestBody",
            "CompleteManyRequest", "CompletionAnswer"] {
            assert!(schemas.contains_key(schema), "schema {schema}");
        }
    }

    async fn unknown_routes_and_methods_answer_json_errors(db) {
        let server = TestServer::start(db).await;
        let route = server.api.send(Method::GET, "/v2/nothing", None, &[], None).await;
        assert_eq!((route.status, route.code()), (StatusCode::NOT_FOUND, "not_found"));
        let method = server.api.send(Method::PUT, "/v1/jobs", Some(&server.tokens.client), &[], None).await;
        assert_eq!((method.status, method.code()), (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"));
    }

    async fn a_body_that_is_not_json_answers_400_whatever_its_content_type(db) {
        let server = TestServer::start(db).await;
        for content_type in ["application/json", "text/plain", "application/x-www-form-urlencoded"] {
            let reply = server.api.send_raw(Method::POST, "/v1/jobs", Some(&server.tokens.client),
                &[("Idempotency-Key", "k"), ("Content-Type", content_type)], b"activity=generate".to_vec()).await;
            assert_eq!((reply.status, reply.code()), (StatusCode::BAD_REQUEST, "invalid_json"), "{content_type}");
        }
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let reply = server.api.send_raw(Method::POST, "/v1/worker/poll", Some(&server.tokens.worker), &[], deep.into_bytes()).await;
        assert_eq!(reply.code(), "invalid_json");
    }

    async fn bodies_over_the_limit_answer_413(db) {
        let server = TestServer::start(db).await;
        let big = json!({"activity": "generate", "providers": ["p"], "input": {"blob": "x".repeat(1024 * 1024 + 1)}});
        let reply = server.api.submit(&server.tokens.client, "k", &big).await;
        assert_eq!((reply.status, reply.code()), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"));
        assert!(server.api.get("/v1/jobs", &server.tokens.client).await.body["jobs"].as_array().unwrap().is_empty());
        // Just under the limit is fine.
        let fits = json!({"activity": "generate", "providers": ["p"], "input": {"blob": "x".repeat(1000 * 1000)}});
        assert_eq!(server.api.submit(&server.tokens.client, "k", &fits).await.status, StatusCode::CREATED);
    }

    async fn the_body_limit_is_configurable(db) {
        let server = TestServer::start_with(db, ServerConfig { body_limit_bytes: 256, ..ServerConfig::default() }).await;
        let reply = server.api.submit(&server.tokens.client, "k", &json!({"workflow": "w", "input": "y".repeat(300)})).await;
        assert_eq!(reply.code(), "payload_too_large");
        assert_eq!(reply.body["error"]["details"]["limit_bytes"], json!(256));
    }

    async fn a_request_over_the_time_limit_answers_a_json_503_and_a_retry_makes_one_job(db) {
        // The database is stuck behind another session's lock: the submit cannot finish
        // within the server's limit and answers 503 rather than hanging.
        let server = TestServer::start_with(db, ServerConfig { request_timeout: Duration::from_millis(300), ..ServerConfig::default() }).await;
        let job = json!({"activity": "generate", "providers": ["p"], "input": {"n": 1}});
        let lock = db.lock_writes().await;
        let reply = server.api.submit(&server.tokens.client, "slow-1", &job).await;
        assert_eq!((reply.status, reply.code()), (StatusCode::SERVICE_UNAVAILABLE, "request_timeout"));
        lock.release().await;
        // The client does not know whether it took: it sends the same key again (and again
        // while the server is still slow, as any client with a time limit would); one job.
        let resend = || async {
            for _ in 0..50 {
                let reply = server.api.submit(&server.tokens.client, "slow-1", &job).await;
                if reply.code() != "request_timeout" {
                    return reply;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("the server stayed too slow after the lock was released");
        };
        let retry = resend().await;
        assert!(retry.status == StatusCode::CREATED || retry.status == StatusCode::OK, "{:?} {}", retry.status, retry.body);
        let again = resend().await;
        assert_eq!((again.status, &again.body["id"]), (StatusCode::OK, &retry.body["id"]));
        let jobs = server.api.get("/v1/jobs", &server.tokens.client).await;
        assert_eq!(jobs.body["jobs"].as_array().map(Vec::len), Some(1));
    }
}
