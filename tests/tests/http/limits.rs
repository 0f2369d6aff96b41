//! The listener's limits, over plain HTTP and over TLS, with raw connections: a request
//! head (or a TLS handshake) that does not arrive within the header-read timeout closes
//! the connection; above the connection cap a new connection waits, unanswered, until
//! one of the others closes.

use std::sync::Arc;
use std::time::Duration;

use onceflow_engine::http::{ServerConfig, ServerTls};
use onceflow_tests::server::TestServer;
use onceflow_tests::tls::TestCa;
use onceflow_tests::{Backend, TestDb};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest any step may take before the test fails: a guard, never the assertion.
const GUARD: Duration = Duration::from_secs(20);

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A server on a fresh SQLite database, and how to open raw connections to it.
struct Target {
    server: TestServer,
    /// Set for a TLS server: a client that trusts its CA.
    tls: Option<tokio_rustls::TlsConnector>,
    _ca: TestCa,
    _db: TestDb,
}

impl Target {
    async fn start(
        tls: bool,
        header_read_timeout: Duration,
        max_http_connections: usize,
    ) -> Target {
        let ca = TestCa::new("onceflow test CA");
        let db = TestDb::new(Backend::Sqlite).await;
        let mut config = ServerConfig {
            header_read_timeout,
            max_http_connections,
            ..ServerConfig::default()
        };
        let (server, connector) = if tls {
            let cert = ca.issue("server");
            config.tls =
                Some(ServerTls::from_pem_files(&cert.cert_path, &cert.key_path).expect("identity"));
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_file(ca.ca_path()).expect("the CA's PEM"))
                .expect("the CA is a root");
            let client = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
            (
                TestServer::start_tls(&db, config, &ca.ca_path()).await,
                Some(tokio_rustls::TlsConnector::from(Arc::new(client))),
            )
        } else {
            (TestServer::start_with(&db, config).await, None)
        };
        Target {
            server,
            tls: connector,
            _ca: ca,
            _db: db,
        }
    }

    /// A TCP connection, with the TLS handshake done for a TLS server.
    async fn open(&self) -> Box<dyn Stream> {
        let tcp = TcpStream::connect(self.server.addr())
            .await
            .expect("connect");
        match &self.tls {
            None => Box::new(tcp),
            Some(connector) => Box::new(
                connector
                    .connect(ServerName::try_from("localhost").expect("name"), tcp)
                    .await
                    .expect("TLS handshake"),
            ),
        }
    }
}

/// Reads until the server closes the connection, within the guard. What the server sent
/// before closing, if anything.
async fn read_until_closed(stream: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(GUARD, stream.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open for {GUARD:?}"),
            Ok(Ok(0)) => return received,
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            // A TLS connection closed without close_notify, or a reset: closed all the same.
            Ok(Err(_)) => return received,
        }
    }
}

/// `GET /healthz` on a keep-alive connection: its status line, once the whole response
/// (head and `Content-Length` body) has arrived.
async fn healthz(stream: &mut (impl AsyncRead + AsyncWrite + Unpin)) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("send the request");
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await.expect("read the response");
        assert!(n > 0, "closed before the response: {received:?}");
        received.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().expect("a length"))
                })
                .expect("a Content-Length");
            if received.len() >= end + 4 + length {
                return text.lines().next().unwrap_or_default().to_owned();
            }
        }
    }
}

async fn request_heads_that_stop_arriving_are_disconnected(tls: bool) {
    let target = Target::start(tls, Duration::from_millis(500), 4096).await;
    // Nothing at all after connecting (for TLS: after the handshake).
    let mut silent = target.open().await;
    assert!(read_until_closed(&mut silent).await.is_empty());
    // Half a request head, then nothing.
    let mut partial = target.open().await;
    partial
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: local")
        .await
        .expect("send half a head");
    let answer = read_until_closed(&mut partial).await;
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    // A keep-alive connection idle after its response: closed once the next head is late.
    let mut idle = target.open().await;
    assert_eq!(healthz(&mut idle).await, "HTTP/1.1 200 OK");
    assert!(read_until_closed(&mut idle).await.is_empty());
    // A client that sends its request in time is served.
    assert_eq!(healthz(&mut target.open().await).await, "HTTP/1.1 200 OK");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_heads_that_stop_arriving_are_disconnected_after_the_header_read_timeout() {
    onceflow_tests::time_limit(async {
        request_heads_that_stop_arriving_are_disconnected(false).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_request_heads_that_stop_arriving_are_disconnected_after_the_header_read_timeout()
{
    onceflow_tests::time_limit(async {
        request_heads_that_stop_arriving_are_disconnected(true).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_handshake_that_never_comes_is_disconnected_after_the_header_read_timeout() {
    onceflow_tests::time_limit(async {
        let target = Target::start(true, Duration::from_millis(500), 4096).await;
        let mut tcp = TcpStream::connect(target.server.addr())
            .await
            .expect("connect");
        assert!(read_until_closed(&mut tcp).await.is_empty());
        // Half a ClientHello record, then nothing.
        let mut tcp = TcpStream::connect(target.server.addr())
            .await
            .expect("connect");
        tcp.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .await
            .expect("send a partial handshake");
        assert!(read_until_closed(&mut tcp).await.is_empty());
    })
    .await;
}

async fn connections_above_the_cap_wait_until_one_closes(tls: bool) {
    const CAP: usize = 2;
    // Idle connections must outlive the test's wait: the header-read timeout is long.
    let target = Arc::new(Target::start(tls, Duration::from_secs(60), CAP).await);
    let mut held = Vec::new();
    for _ in 0..CAP {
        let mut connection = target.open().await;
        assert_eq!(healthz(&mut connection).await, "HTTP/1.1 200 OK");
        held.push(connection); // idle, keep-alive
    }
    let waiting = {
        let target = target.clone();
        tokio::spawn(async move {
            let mut connection = target.open().await;
            healthz(&mut connection).await
        })
    };
    // While the cap's connections stay open, the next one is not served.
    let mut waiting = waiting;
    let early = tokio::time::timeout(Duration::from_millis(1500), &mut waiting).await;
    assert!(early.is_err(), "answered above the cap: {early:?}");
    // One of them closes: the waiting connection is accepted and answered.
    drop(held.pop());
    let answered = tokio::time::timeout(GUARD, waiting)
        .await
        .expect("answered once a connection closed")
        .expect("the waiting client's task");
    assert_eq!(answered, "HTTP/1.1 200 OK");
    // The connection still held was never disturbed.
    assert_eq!(healthz(&mut held[0]).await, "HTTP/1.1 200 OK");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_above_the_cap_wait_unanswered_until_one_closes() {
    onceflow_tests::time_limit(async {
        connections_above_the_cap_wait_until_one_closes(false).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_connections_above_the_cap_wait_unanswered_until_one_closes() {
    onceflow_tests::time_limit(async {
        connections_above_the_cap_wait_until_one_closes(true).await;
    })
    .await;
}
