//! Traces: built with the `otel` feature (as the test harness builds it), `onceflow serve`
//! exports its request spans by OTLP/HTTP to the collector `OTEL_EXPORTER_OTLP_ENDPOINT`
//! names. The collector here is a real HTTP server on loopback that keeps what it gets.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use onceflow_tests::server::{ServerProcess, Tokens};
use onceflow_tests::{rules, wait_for};
use reqwest::StatusCode;

/// Every body POSTed to `/v1/traces`, as received.
async fn collector() -> (String, Arc<Mutex<Vec<Bytes>>>) {
    let received: Arc<Mutex<Vec<Bytes>>> = Arc::default();
    let keep = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let keep = keep.clone();
            async move {
                keep.lock().expect("not poisoned").push(body);
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

rules! {
    async fn request_spans_with_the_callers_owner_are_exported_by_otlp(db) {
        let tokens = Tokens::mint(&db.engine()).await;
        let (endpoint, received) = collector().await;
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
        let server = ServerProcess::start_with_env(&db.url(), port, &[],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")]).await;
        let reply = server.api.get("/v1/jobs", &tokens.client).await;
        assert_eq!(reply.status, StatusCode::OK);
        wait_for("the request's span at the collector", Duration::from_secs(20), || async {
            received.lock().expect("not poisoned").iter().any(|body| {
                contains(body, "request") && contains(body, "/v1/jobs") && contains(body, "alice") && contains(body, "onceflow")
            })
        }).await;
    }
}
