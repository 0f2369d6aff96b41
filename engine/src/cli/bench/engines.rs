//! `--engines N`: N `onceflow serve` processes (this binary, re-run) on free loopback
//! ports, all on the bench's database, instead of one server in-process. The producers
//! and the workers are spread across them, so that one run compares what one database
//! does behind 1, 2 or 4 engines.

use std::time::{Duration, Instant};

use super::DatabaseArgs;

/// How long an engine process may take to answer `/healthz`.
const START: Duration = Duration::from_secs(60);

/// The engine processes of one run; killed when dropped.
pub(super) struct EngineProcesses {
    children: Vec<tokio::process::Child>,
    /// Their base URLs, `http://127.0.0.1:<port>`, in start order.
    pub(super) urls: Vec<String>,
}

impl EngineProcesses {
    /// Starts `count` engines on the (already migrated) database of `database`, each
    /// with a pool of `max_connections`, and waits until every one answers `/healthz`.
    pub(super) async fn start(
        database: &DatabaseArgs,
        count: usize,
        max_connections: u32,
        http: &reqwest::Client,
    ) -> Result<EngineProcesses, String> {
        let database_url = super::super::database_url(database)?;
        let exe =
            std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
        let mut engines = EngineProcesses {
            children: Vec::with_capacity(count),
            urls: Vec::with_capacity(count),
        };
        for _ in 0..count {
            let port = free_port()?;
            let child = tokio::process::Command::new(&exe)
                .arg("serve")
                .args(["--database-url", &database_url])
                .args(["--bind", &format!("127.0.0.1:{port}")])
                .arg("--no-migrate")
                .args(["--max-connections", &max_connections.to_string()])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start an engine process: {e}"))?;
            engines.children.push(child);
            engines.urls.push(format!("http://127.0.0.1:{port}"));
        }
        let deadline = Instant::now() + START;
        for i in 0..count {
            engines.wait_healthy(i, http, deadline).await?;
        }
        Ok(engines)
    }

    async fn wait_healthy(
        &mut self,
        i: usize,
        http: &reqwest::Client,
        deadline: Instant,
    ) -> Result<(), String> {
        let url = format!("{}/healthz", self.urls[i]);
        loop {
            if let Ok(Some(status)) = self.children[i].try_wait() {
                return Err(format!(
                    "engine process {} ({}) exited with {status} before answering",
                    i + 1,
                    self.urls[i]
                ));
            }
            if let Ok(response) = http.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "engine process {} did not answer {url} within {} s",
                    i + 1,
                    START.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops every engine; an engine that had already exited is an error (it died
    /// during the run).
    pub(super) async fn stop(mut self) -> Result<(), String> {
        let mut first_error = None;
        for (i, child) in self.children.iter_mut().enumerate() {
            if let Ok(Some(status)) = child.try_wait() {
                first_error.get_or_insert(format!(
                    "engine process {} exited during the run with {status}",
                    i + 1
                ));
                continue;
            }
            if let Err(e) = child.kill().await {
                first_error.get_or_insert(format!("cannot stop engine process {}: {e}", i + 1));
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A loopback port free a moment ago (the engine binds it right after).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free loopback port: {e}"))
}
