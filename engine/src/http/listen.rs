//! The listener: accepts TCP connections (TLS when configured) and serves HTTP/1.1 on
//! each, keep-alive included, within two limits:
//! - at most `max_http_connections` connections at once: the next one is not accepted
//!   (it waits in the kernel's backlog) until one of them closes;
//! - `header_read_timeout`: a TLS handshake, and each request's head (request line and
//!   headers, or the wait for it on an idle keep-alive connection), must arrive within it,
//!   else the connection is closed.
//!
//! On shutdown it stops accepting, lets every connection finish the request in flight
//! (idle ones close at once), and returns once all are closed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::tls::ServerTls;

/// The listener's settings (from [`super::ServerConfig`]).
pub(crate) struct Limits {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
    pub tls: Option<ServerTls>,
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then drains (see the module
/// doc). Returns once every connection is closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> io::Result<()> {
    // A zero timeout would close every connection before its first byte.
    let header_read_timeout = limits.header_read_timeout.max(Duration::from_millis(1));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let builder = Arc::new(builder);
    let tls = limits.tls.map(|t| TlsAcceptor::from(t.config));
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let connections = TaskTracker::new();
    loop {
        // A slot first: above the cap, the next connection is not even accepted.
        let slot = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break, // never closed
            },
        };
        let stream = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e, &shutdown).await;
                    continue;
                }
            },
        };
        let connection = Connection {
            app: app.clone(),
            builder: builder.clone(),
            shutdown: shutdown.clone(),
            _slot: slot,
        };
        match &tls {
            None => connections.spawn(connection.serve(TokioIo::new(stream))),
            Some(acceptor) => connections.spawn(connection.serve_tls(
                acceptor.clone(),
                stream,
                header_read_timeout,
            )),
        };
    }
    drop(listener);
    connections.close();
    connections.wait().await;
    Ok(())
}

/// One accepted connection and what serving it needs.
struct Connection {
    app: Router,
    builder: Arc<http1::Builder>,
    shutdown: CancellationToken,
    /// Held for the connection's life: its place under the cap.
    _slot: OwnedSemaphorePermit,
}

impl Connection {
    /// The TLS handshake (within `timeout`), then HTTP over it.
    async fn serve_tls(self, acceptor: TlsAcceptor, stream: TcpStream, timeout: Duration) {
        let peer = stream.peer_addr().ok();
        let handshake = tokio::time::timeout(timeout, acceptor.accept(stream));
        let stream = tokio::select! {
            () = self.shutdown.cancelled() => return,
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(?peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(?peer, "TLS handshake timed out");
                    return;
                }
            },
        };
        self.serve(TokioIo::new(stream)).await;
    }

    /// HTTP/1.1 until the client closes, a limit closes, or shutdown drains it.
    async fn serve<I>(self, io: I)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let connection = self
            .builder
            .serve_connection(io, TowerToHyperService::new(self.app));
        let mut connection = std::pin::pin!(connection);
        let result = tokio::select! {
            result = connection.as_mut() => result,
            () = self.shutdown.cancelled() => {
                // Finish the request in flight (an idle connection closes at once).
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(e) = result {
            tracing::trace!(error = %e, "connection ended with an error");
        }
    }
}

/// After a failed `accept`: a connection that failed before it was accepted is only its
/// own problem; anything else (out of file descriptors, say) is logged and retried in a
/// second, as axum's own server does.
async fn accept_failed(e: io::Error, shutdown: &CancellationToken) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
        () = shutdown.cancelled() => {}
    }
}
