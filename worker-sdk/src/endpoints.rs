//! [`Endpoints`]: the base URLs of one engine's `serve` processes, and the rule by which a
//! request moves on from one to the next (a rolling restart, a process that is down).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::SdkError;

/// Whether a request may be sent again once it may have reached a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    /// Sending it twice changes nothing more than sending it once: a read, a submission
    /// under its `Idempotency-Key`, a cancel of a job, and every worker call (a
    /// completion or heartbeat is fenced by its lease token and a repeated one answers as
    /// the first did; a repeated poll claims nothing twice).
    Safe,
    /// Sending it twice may do something twice or answer an error for work done (a
    /// manual attempt, an attempt's cancel): it moves on only when it surely never
    /// reached a server (the connection was refused or never established).
    Unsafe,
}

/// The base URLs of one engine (`http://host:port`, `https://…`), each a `serve` process
/// (or a load balancer) on the same database, with the one a client uses now.
///
/// A client uses one URL at a time, the first at the start. A request moves on to the
/// next URL, at once, when:
/// - it could not connect (refused, unreachable, TLS handshake failed): always;
/// - for a [`Repeat::Safe`] request, also when the connection closed or was reset
///   before an answer came (a server that stopped while it was being sent), or the
///   answer is `502`, `503` or `504` (a proxy without a backend, a server draining or
///   without its database).
///
/// Each URL is tried at most once per request; when all of them failed, the last
/// outcome is the request's (and a caller that retries, as the worker does, retries
/// after its backoff). The client then stays on the URL that answered: list the URLs in
/// a different order in different processes to spread them, or put a load balancer
/// behind one URL. A timeout never moves on (the server may still be working on it).
///
/// Clones share the current URL and the count of [`Endpoints::failovers`].
#[derive(Clone, Debug)]
pub struct Endpoints {
    urls: Arc<[String]>,
    current: Arc<AtomicUsize>,
    failovers: Arc<AtomicU64>,
}

impl Endpoints {
    /// The URLs of a comma-separated list (`ONCEFLOW_URL`, `--url`): blanks around each
    /// are trimmed, a trailing `/` dropped. An empty list (or one of only commas) is an
    /// [`SdkError::Config`].
    pub fn parse(list: &str) -> Result<Endpoints, SdkError> {
        Endpoints::new(list.split(','))
    }

    /// The URLs given, in order (each may itself be a comma-separated list). At least one
    /// is needed: none is an [`SdkError::Config`].
    pub fn new<I, S>(urls: I) -> Result<Endpoints, SdkError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let urls: Vec<String> = urls
            .into_iter()
            .flat_map(|u| {
                u.as_ref()
                    .split(',')
                    .map(|one| one.trim().trim_end_matches('/').to_owned())
                    .collect::<Vec<_>>()
            })
            .filter(|u| !u.is_empty())
            .collect();
        if urls.is_empty() {
            return Err(SdkError::Config(
                "no engine URL given (one, or several separated by commas)".into(),
            ));
        }
        Ok(Endpoints {
            urls: urls.into(),
            current: Arc::new(AtomicUsize::new(0)),
            failovers: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The URLs, in the order given.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The URL the next request goes to first.
    pub fn current(&self) -> &str {
        &self.urls[self.current.load(Ordering::Relaxed) % self.urls.len()]
    }

    /// How many times a request (of this value or a clone) moved on to the next URL.
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }

    /// Sends the request that `build` makes for a base URL (without a trailing `/`),
    /// starting at the current URL and moving on as the type's doc says; the first
    /// outcome that does not move on, else the last one.
    pub async fn send<F>(
        &self,
        repeat: Repeat,
        build: F,
    ) -> Result<reqwest::Response, reqwest::Error>
    where
        F: Fn(&str) -> reqwest::RequestBuilder,
    {
        let n = self.urls.len();
        let start = self.current.load(Ordering::Relaxed) % n;
        let mut tried = 0;
        loop {
            let at = (start + tried) % n;
            let outcome = build(&self.urls[at]).send().await;
            tried += 1;
            let Some(why) = moves_on(&outcome, repeat) else {
                return outcome;
            };
            if n == 1 {
                return outcome;
            }
            // Concurrent requests that failed at the same URL move the client on once.
            let _ = self.current.compare_exchange(
                at,
                (at + 1) % n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            self.failovers.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(from = %self.urls[at], to = %self.urls[(at + 1) % n], why, "moving on to the next engine URL");
            if tried == n {
                return outcome;
            }
        }
    }
}

/// Why `outcome` moves the request on to the next URL, if it does (see [`Endpoints`]).
fn moves_on(
    outcome: &Result<reqwest::Response, reqwest::Error>,
    repeat: Repeat,
) -> Option<&'static str> {
    match outcome {
        Ok(response) => match response.status().as_u16() {
            502 if repeat == Repeat::Safe => Some("502"),
            503 if repeat == Repeat::Safe => Some("503"),
            504 if repeat == Repeat::Safe => Some("504"),
            _ => None,
        },
        // Before the timeout check: a connect timeout is both, and sent nothing.
        Err(e) if e.is_connect() => Some("cannot connect"),
        Err(e) if e.is_timeout() => None,
        Err(e) if repeat == Repeat::Safe && connection_dropped(e) => {
            Some("connection closed before an answer")
        }
        Err(_) => None,
    }
}

/// Whether the connection closed or was reset before the answer came.
fn connection_dropped(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::UnexpectedEof
            ) {
                return true;
            }
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_split_on_commas_trimmed_and_never_empty() {
        let e = Endpoints::parse(" http://a:1/ ,http://b:2,, ").expect("two URLs");
        assert_eq!(e.urls(), ["http://a:1", "http://b:2"]);
        assert_eq!(e.current(), "http://a:1");
        let e = Endpoints::new(["http://a:1,http://b:2", "http://c:3"]).expect("three URLs");
        assert_eq!(e.urls().len(), 3);
        for empty in ["", " , ,"] {
            assert!(matches!(Endpoints::parse(empty), Err(SdkError::Config(_))));
        }
    }
}
