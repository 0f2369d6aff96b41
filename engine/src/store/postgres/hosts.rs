//! Database failover: the servers of a libpq multi-host URL
//! (`postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`), and the search
//! for the one among them that takes writes. sqlx connects to one host only, so the
//! engine keeps the list: its pool connects to the writable server it found last, and
//! when that server goes away or turns read-only, a serving engine probes the list again,
//! in order, and points its pool at the first server that is writable (see
//! [`PgStore::follow_primary`](super::PgStore)).

use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::postgres::PgConnectOptions;
use tokio::sync::Notify;

use super::queries::SERVER_IS_WRITABLE_SQL;
use crate::error::StoreError;

/// How long one probe of one server may take (connecting and asking whether it is
/// writable): a host that does not answer is passed over rather than waited for.
pub(super) const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The first and the longest pause between two rounds of probes while no server is
/// writable (a standby being promoted). The pause doubles from the first to the longest.
pub(super) const SEARCH_PAUSES: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_millis(50),
    std::time::Duration::from_millis(500),
);

/// One server of the URL.
#[derive(Debug, Clone)]
pub(super) struct Server {
    /// `host:port`, for messages (never the password).
    pub(super) label: String,
    /// The options of a connection to it alone.
    pub(super) options: PgConnectOptions,
}

/// What a database URL names: one server the engine connects to as sqlx does, or a list
/// it must find the writable one in.
#[derive(Debug)]
pub(super) enum Target {
    /// One host, no `target_session_attrs`: connected to as given, nothing checked.
    One(Box<PgConnectOptions>),
    /// Several hosts, or `target_session_attrs=read-write` (or `primary`): the engine
    /// connects only to a server that is writable, trying them in the URL's order.
    Writable(Vec<Server>),
}

/// Parses a `postgres://` URL, with one host or a comma-separated list of
/// `host[:port]` (libpq's form). `target_session_attrs` may be `read-write` or `primary`
/// (both mean: a server that is not in recovery and not read-only); the engine writes, so
/// other values are refused, and a list of hosts without it is searched for a writable
/// server all the same. Each host's options are made by sqlx from the URL with that host
/// alone, so every other parameter (`sslmode`, `sslrootcert`, …) holds for all of them.
///
/// Fails with [`StoreError::DatabaseUrl`], saying what is wrong, for a URL sqlx refuses,
/// an empty host in the list, `host=`/`hostaddr=`/`port=` parameters beside a list (they
/// would send every connection to one server), or an unsupported `target_session_attrs`.
pub(super) fn parse_target(url: &str) -> Result<Target, StoreError> {
    let bad = |why: String| StoreError::DatabaseUrl(why);
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("the database URL has no scheme: use postgres://…".to_owned()))?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, hostlist) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    let mut attrs = None;
    let mut kept = Vec::new();
    let mut sets_host = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let key = pair.split_once('=').map_or(pair, |(k, _)| k);
        match key {
            "target_session_attrs" => {
                attrs = Some(pair.split_once('=').map_or("", |(_, v)| v).to_owned());
            }
            "host" | "hostaddr" | "port" => {
                sets_host = true;
                kept.push(pair);
            }
            _ => kept.push(pair),
        }
    }
    let hosts: Vec<&str> = hostlist.split(',').collect();
    if let Some(attrs) = &attrs {
        if !matches!(attrs.as_str(), "read-write" | "primary") {
            return Err(bad(format!(
                "target_session_attrs={attrs} is not supported: the engine writes, so it needs a \
                 writable server (`read-write`, or `primary`)"
            )));
        }
    }
    if hosts.len() == 1 && attrs.is_none() {
        return PgConnectOptions::from_str(url)
            .map(|options| Target::One(Box::new(options)))
            .map_err(|e| bad(format!("bad database URL: {e}")));
    }
    if hosts.len() > 1 && sets_host {
        return Err(bad(
            "a database URL with several hosts gives each as host:port in the list, not as \
             host=, hostaddr= or port= parameters"
                .to_owned(),
        ));
    }
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    let mut servers = Vec::with_capacity(hosts.len());
    for (n, host) in hosts.iter().enumerate() {
        if host.is_empty() {
            return Err(bad(format!(
                "host {} of the database URL's host list is empty",
                n + 1
            )));
        }
        let options =
            PgConnectOptions::from_str(&format!("{scheme}://{userinfo}{host}{path}{query}"))
                .map_err(|e| bad(format!("bad database URL at host `{host}`: {e}")))?;
        servers.push(Server {
            label: format!("{}:{}", options.get_host(), options.get_port()),
            options,
        });
    }
    Ok(Target::Writable(servers))
}

/// The servers of a [`Target::Writable`] URL, the one the pool connects to now, and the
/// wish that they be searched again.
#[derive(Debug)]
pub(super) struct Hosts {
    pub(super) servers: Vec<Server>,
    /// Index into `servers` of the one the pool connects to.
    current: AtomicUsize,
    /// Rung when the current server was seen gone or read-only.
    wanted: Notify,
}

impl Hosts {
    /// The list, the pool connecting to `servers[current]`.
    pub(super) fn new(servers: Vec<Server>, current: usize) -> Self {
        Hosts {
            servers,
            current: AtomicUsize::new(current),
            wanted: Notify::new(),
        }
    }

    /// The server the pool connects to now.
    pub(super) fn current(&self) -> &Server {
        &self.servers[self.current.load(Ordering::Acquire) % self.servers.len()]
    }

    /// Records that the pool now connects to `servers[index]`.
    pub(super) fn set_current(&self, index: usize) {
        self.current.store(index, Ordering::Release);
    }

    /// Asks for a search (kept until the follower takes it, however many ask).
    pub(super) fn want_search(&self) {
        self.wanted.notify_one();
    }

    /// Waits until a search is asked for.
    pub(super) async fn search_wanted(&self) {
        self.wanted.notified().await;
    }

    /// One round of probes in the URL's order: the index of the first writable server,
    /// or why each was passed over.
    pub(super) async fn first_writable(&self) -> Result<usize, String> {
        let mut why = Vec::new();
        for (index, server) in self.servers.iter().enumerate() {
            match probe(&server.options).await {
                Ok(()) => return Ok(index),
                Err(e) => why.push(format!("{}: {e}", server.label)),
            }
        }
        Err(why.join("; "))
    }
}

/// Connects to one server and asks whether it takes writes; closes the connection.
async fn probe(options: &PgConnectOptions) -> Result<(), String> {
    use sqlx::Connection;
    let check = async {
        let mut conn = sqlx::PgConnection::connect_with(options)
            .await
            .map_err(|e| e.to_string())?;
        let writable = is_writable(&mut conn).await.map_err(|e| e.to_string());
        conn.close().await.ok();
        match writable? {
            true => Ok(()),
            false => Err(READ_ONLY.to_owned()),
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, check)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {PROBE_TIMEOUT:?}")))
}

/// Why a server that answered was passed over.
pub(super) const READ_ONLY: &str =
    "read-only (a standby in recovery, or default_transaction_read_only is on)";

/// Whether the server behind `conn` takes writes: not in recovery, and its sessions not
/// read-only by default.
pub(super) async fn is_writable(conn: &mut sqlx::PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(SERVER_IS_WRITABLE_SQL)
        .fetch_one(conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(url: &str) -> Vec<String> {
        match parse_target(url) {
            Ok(Target::Writable(servers)) => servers.into_iter().map(|s| s.label).collect(),
            Ok(Target::One(o)) => vec![format!("one {}:{}", o.get_host(), o.get_port())],
            Err(e) => vec![format!("error {e}")],
        }
    }

    #[test]
    fn a_host_list_names_each_server_in_order() {
        assert_eq!(
            servers(
                "postgres://u:p@a:5433,b,c:7/db?sslmode=disable&target_session_attrs=read-write"
            ),
            ["a:5433", "b:5432", "c:7"]
        );
        assert_eq!(servers("postgres://u@a:1,b:2/db"), ["a:1", "b:2"]);
        assert_eq!(servers("postgres://u@a:1/db"), ["one a:1"]);
        assert_eq!(
            servers("postgres://u@a:1/db?target_session_attrs=primary"),
            ["a:1"]
        );
    }

    #[test]
    fn a_bad_host_list_is_refused_with_the_reason() {
        for (url, says) in [
            ("postgres://u@a:1,,b:2/db", "host 2"),
            ("postgres://u@a:1,b:x/db", "`b:x`"),
            (
                "postgres://u@a:1,b:2/db?target_session_attrs=any",
                "target_session_attrs=any",
            ),
            ("postgres://u@a:1,b:2/db?port=3", "host:port"),
            ("a:1,b:2", "no scheme"),
        ] {
            let got = servers(url).join(" ");
            assert!(
                got.starts_with("error") && got.contains(says),
                "{url}: {got}"
            );
        }
    }

    #[test]
    fn the_password_stays_out_of_the_labels() {
        assert_eq!(servers("postgres://u:secret@a:1,b:2/db"), ["a:1", "b:2"]);
    }
}
