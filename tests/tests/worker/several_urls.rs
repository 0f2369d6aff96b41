//! The SDK given several engine URLs: a URL that refuses connections or drops them is
//! skipped, at once, by requests that are safe to repeat; a request that is not safe to
//! repeat moves on only when it surely never reached a server. (The store does not
//! matter: SQLite.)

use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::model::JobStatus;
use onceflow_tests::server::TestServer;
use onceflow_tests::{Backend, TestDb};
use onceflow_worker::{
    ActivityContext, ActivityError, ActivityOptions, Client, Endpoints, SdkError, Worker,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Work {
    n: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
struct Done {
    n: u32,
}

/// A loopback URL where nothing listens: connections are refused.
fn refusing_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("free port")
        .local_addr()
        .expect("addr")
        .port();
    format!("http://127.0.0.1:{port}")
}

/// A loopback URL whose server accepts each connection, reads the request's head and
/// closes the connection without answering (a server that stopped while a request was
/// on its way): such a request may have been acted on.
async fn dropping_url() -> String {
    fake_server(None).await
}

/// A loopback URL whose server answers every request `503` with no body (a proxy
/// without a backend, say), after reading its head.
async fn unavailable_url() -> String {
    fake_server(Some(
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    ))
    .await
}

/// A loopback server that reads each request's head, then writes `answer` (if any) and
/// closes the connection.
async fn fake_server(answer: Option<&'static [u8]>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // Read until the head has come, then close unanswered.
                let mut seen = Vec::new();
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                if let Some(answer) = answer {
                    let _ = stream.write_all(answer).await;
                    let _ = stream.shutdown().await;
                }
            });
        }
    });
    url
}

fn options() -> ActivityOptions {
    ActivityOptions {
        heartbeat_timeout_s: Some(30),
        ..ActivityOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_first_url_is_skipped_by_the_client_and_the_worker() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Sqlite).await;
        let server = TestServer::start(&db).await;
        let dead = refusing_url();
        let urls = format!("{dead},{}", server.api.url);
        let worker = Arc::new(
            Worker::builder(&urls, &server.tokens.worker)
                .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move {
                    Ok::<_, ActivityError>(Done { n: w.n * 2 })
                })
                .build()
                .expect("a worker"),
        );
        let running = {
            let w = worker.clone();
            tokio::spawn(async move { w.run().await })
        };
        let client = Client::new(&urls, &server.tokens.client).expect("a client");
        assert_eq!(client.endpoints().current(), dead, "the first URL first");
        let submitted = client
            .submit_activity("k", "work", &["cpu"], &Work { n: 21 }, options())
            .await
            .expect("submitted past the dead URL, without an error");
        assert_eq!(client.endpoints().current(), server.api.url);
        assert_eq!(client.endpoints().failovers(), 1);
        let job = client
            .wait(submitted.job.id, Duration::from_secs(30))
            .await
            .expect("read");
        assert_eq!(job.status, JobStatus::Succeeded);
        assert_eq!(job.result, Some(serde_json::json!({"n": 42})));
        // The client stays on the URL that answered.
        assert_eq!(client.endpoints().failovers(), 1);
        // A request not safe to repeat moves on too when the connection was refused: it
        // never reached a server. (It is refused here for the job's state, by the server.)
        let manual = Client::with_urls([dead.as_str(), &server.api.url], &server.tokens.client)
            .expect("a client")
            .create_attempt(job.id, 0, "cpu")
            .await;
        assert_eq!(
            manual.as_ref().err().and_then(SdkError::code),
            Some("activity_completed"),
            "{manual:?}"
        );
        worker.shutdown_token().cancel();
        running
            .await
            .expect("ran")
            .expect("the worker stopped cleanly");
        assert_eq!(worker.stats().won, 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_connection_moves_on_only_a_request_safe_to_repeat() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Sqlite).await;
        let server = TestServer::start(&db).await;
        let dropping = dropping_url().await;
        let client = Client::with_urls([dropping.as_str(), &server.api.url], &server.tokens.client)
            .expect("a client");
        let id = client
            .submit_activity("k", "work", &["cpu"], &Work { n: 1 }, options())
            .await
            .expect("a keyed submission is repeated at the next URL")
            .job
            .id;
        assert_eq!(client.endpoints().current(), server.api.url);

        // The same for a request that must not be sent twice: its error, not a repeat.
        let unsafe_client =
            Client::with_urls([dropping.as_str(), &server.api.url], &server.tokens.client)
                .expect("a client");
        let manual = unsafe_client.create_attempt(id, 0, "cpu").await;
        assert!(
            matches!(manual, Err(SdkError::Transport(_))),
            "a manual attempt whose connection dropped is not sent again: {manual:?}"
        );
        assert_eq!(unsafe_client.endpoints().current(), dropping);
        assert_eq!(unsafe_client.endpoints().failovers(), 0);
        // A read, safe to repeat, moves it on.
        let job = unsafe_client.job(id).await.expect("read at the next URL");
        assert_eq!(job.id, id);
        assert_eq!(unsafe_client.endpoints().current(), server.api.url);
    })
    .await;
}

#[test]
fn no_url_is_a_configuration_error() {
    onceflow_tests::time_limit_blocking(|| {
        for list in ["", " , "] {
            assert!(matches!(
                Client::new(list, "of_whatever"),
                Err(SdkError::Config(_))
            ));
            assert!(matches!(Endpoints::parse(list), Err(SdkError::Config(_))));
        }
        let built = Worker::builder("", "of_whatever")
            .provider("work", "cpu", |_ctx: ActivityContext, w: Work| async move {
                Ok::<_, ActivityError>(Done { n: w.n })
            })
            .build();
        assert!(matches!(built, Err(SdkError::Config(_))), "{built:?}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_503_moves_on_only_a_request_safe_to_repeat() {
    onceflow_tests::time_limit(async {
        let db = TestDb::new(Backend::Sqlite).await;
        let server = TestServer::start(&db).await;
        let unavailable = unavailable_url().await;
        let urls = [unavailable.as_str(), &server.api.url];
        let client = Client::with_urls(urls, &server.tokens.client).expect("a client");
        let id = client
            .submit_activity("k", "work", &["cpu"], &Work { n: 1 }, options())
            .await
            .expect("a keyed submission answered 503 is sent to the next URL")
            .job
            .id;
        assert_eq!(client.endpoints().current(), server.api.url);

        let unsafe_client = Client::with_urls(urls, &server.tokens.client).expect("a client");
        let manual = unsafe_client.create_attempt(id, 0, "cpu").await;
        assert!(
            matches!(manual, Err(SdkError::Api { status: 503, .. })),
            "a manual attempt answered 503 returns it, not sent again: {manual:?}"
        );
        assert_eq!(unsafe_client.endpoints().failovers(), 0);
    })
    .await;
}
