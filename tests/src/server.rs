//! A real onceflow server for HTTP tests: in-process on a loopback port, or as a child
//! process of the real `onceflow` binary (for crash and signal tests).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use onceflow_engine::http::{serve_on, ServerConfig};
use onceflow_engine::model::Role;
use onceflow_engine::Engine;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::TestDb;

/// One token per role, for owner `alice` (and `bob` for isolation tests).
#[derive(Debug, Clone)]
pub struct Tokens {
    /// Client of alice.
    pub client: String,
    /// Client of bob.
    pub bob: String,
    /// Platform worker (owner `*`).
    pub worker: String,
    /// Operator `ops`.
    pub operator: String,
    /// Admin.
    pub admin: String,
}

impl Tokens {
    /// Mints the tokens on `engine`'s database.
    pub async fn mint(engine: &Engine) -> Tokens {
        let t = |owner: &'static str, role| {
            let engine = engine.clone();
            async move {
                engine
                    .create_token(owner, role)
                    .await
                    .expect("token mints")
                    .token
            }
        };
        Tokens {
            client: t("alice", Role::Client).await,
            bob: t("bob", Role::Client).await,
            worker: t("*", Role::Worker).await,
            operator: t("ops", Role::Operator).await,
            admin: t("root", Role::Admin).await,
        }
    }
}

/// A response: status, headers, JSON body (`Value::Null` when empty or not JSON).
#[derive(Debug)]
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body as JSON.
    pub body: Value,
}

impl Reply {
    /// The error code of a JSON error body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"]
            .as_str()
            .unwrap_or("<no error code>")
    }
}

/// Talks HTTP to a server.
#[derive(Clone)]
pub struct Api {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// The HTTP client.
    pub http: reqwest::Client,
}

impl Api {
    /// A client of the server at `url`.
    pub fn new(url: String) -> Api {
        Api {
            url,
            http: reqwest::Client::new(),
        }
    }

    /// A client of the server at `url` (`https://…`) that trusts the system's roots plus
    /// the CA certificate(s) of the PEM file `ca_cert` (the SDK's own HTTP client).
    pub fn trusting(url: String, ca_cert: &Path) -> Api {
        Api {
            url,
            http: onceflow_worker::http_client(Some(ca_cert)).expect("the HTTP client builds"),
        }
    }

    /// Sends a request with an optional token, headers and JSON body.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Reply {
        let mut request = self.http.request(method, format!("{}{}", self.url, path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        self.finish(request).await
    }

    /// Sends raw bytes as the body.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Reply {
        let mut request = self
            .http
            .request(method, format!("{}{}", self.url, path))
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        self.finish(request).await
    }

    async fn finish(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("the body arrives");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
        }
    }

    /// GET with a token.
    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.send(Method::GET, path, Some(token), &[], None).await
    }

    /// POST JSON with a token.
    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Reply {
        self.send(Method::POST, path, Some(token), &[], Some(body))
            .await
    }

    /// `POST /v1/jobs` with an idempotency key.
    pub async fn submit(&self, token: &str, key: &str, body: &Value) -> Reply {
        self.send(
            Method::POST,
            "/v1/jobs",
            Some(token),
            &[("Idempotency-Key", key)],
            Some(body),
        )
        .await
    }

    /// `POST /v1/worker/poll` for one provider of `generate`.
    pub async fn poll(&self, token: &str, provider: &str, wait_ms: u64) -> Vec<Value> {
        let reply = self
            .post(
                "/v1/worker/poll",
                token,
                &serde_json::json!({"worker_id": format!("{provider}-worker"), "providers": [{"activity": "generate", "provider": provider}], "max_tasks": 10, "wait_ms": wait_ms}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        reply.body["tasks"].as_array().cloned().unwrap_or_default()
    }
}

/// An in-process server on a loopback port, stopped when dropped.
pub struct TestServer {
    /// The HTTP client for it.
    pub api: Api,
    /// Tokens of every role.
    pub tokens: Tokens,
    /// The engine behind it (for setting up state the API has no door for).
    pub engine: Engine,
    shutdown: CancellationToken,
}

impl TestServer {
    /// Starts a server on `db` with test-friendly settings (reaper every 100 ms).
    pub async fn start(db: &TestDb) -> TestServer {
        Self::start_with(
            db,
            ServerConfig {
                reaper_interval: Duration::from_millis(100),
                ..ServerConfig::default()
            },
        )
        .await
    }

    /// Starts a server on `db` with `config` (its `bind` is ignored: a free port is used).
    pub async fn start_with(db: &TestDb, config: ServerConfig) -> TestServer {
        let engine = db.engine();
        let tokens = Tokens::mint(&engine).await;
        Self::start_engine(engine, tokens, config).await
    }

    /// Starts a server for an existing engine and tokens.
    pub async fn start_engine(engine: Engine, tokens: Tokens, config: ServerConfig) -> TestServer {
        let (addr, shutdown) = spawn_server(&engine, config).await;
        TestServer {
            api: Api::new(format!("http://{addr}")),
            tokens,
            engine,
            shutdown,
        }
    }

    /// Starts an HTTPS server on `db` with `config` (its `tls` set; its `bind` ignored);
    /// its `api` speaks `https://127.0.0.1:{port}` and trusts `ca_cert` (PEM file).
    pub async fn start_tls(db: &TestDb, config: ServerConfig, ca_cert: &Path) -> TestServer {
        assert!(config.tls.is_some(), "start_tls needs config.tls");
        let engine = db.engine();
        let tokens = Tokens::mint(&engine).await;
        let (addr, shutdown) = spawn_server(&engine, config).await;
        TestServer {
            api: Api::trusting(format!("https://{addr}"), ca_cert),
            tokens,
            engine,
            shutdown,
        }
    }

    /// The loopback address it listens on.
    pub fn addr(&self) -> SocketAddr {
        let authority = self
            .api
            .url
            .split_once("://")
            .map(|(_, rest)| rest)
            .expect("url has a scheme");
        authority.parse().expect("url is scheme://ip:port")
    }
}

/// `serve_on` on a free loopback port, on a task of its own; cancel the token to stop it.
async fn spawn_server(engine: &Engine, config: ServerConfig) -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr: SocketAddr = listener.local_addr().expect("bound");
    let shutdown = CancellationToken::new();
    tokio::spawn(serve_on(listener, engine.clone(), config, shutdown.clone()));
    (addr, shutdown)
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The `onceflow` binary, built once per test run (the test command builds it if needed,
/// so `cargo test` alone is enough on a fresh clone).
pub fn onceflow_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // A binary built otherwise (the torture run's mutants: `--features mutants`).
            if let Some(binary) = std::env::var_os("ONCEFLOW_TEST_BINARY") {
                return PathBuf::from(binary);
            }
            let exe = std::env::current_exe().expect("test executable path");
            // A test runs from target/<profile>/deps, a binary of the tests crate (the
            // torture runner) from target/<profile>.
            let dir = exe.parent().expect("the executable's directory");
            let target_profile = if dir.file_name().is_some_and(|n| n == "deps") {
                dir.parent().expect("target/<profile>")
            } else {
                dir
            };
            let target_dir = target_profile.parent().expect("target dir");
            // The same profile as these tests (`target/debug` is `dev`), so that the binary
            // is built from the same sources into the directory looked in below.
            let profile = match target_profile.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => "dev".to_owned(),
                Some(other) => other.to_owned(),
            };
            let mut build = Command::new(env!("CARGO"));
            // Without the variables cargo sets for this test process (the tests crate's
            // CARGO_MANIFEST_DIR, CARGO_PKG_NAME, …): build scripts that watch them (ring's
            // does) would see a change, and this build and the next `cargo test` would
            // each rebuild them and every crate above them.
            for (name, _) in std::env::vars_os() {
                let name = name.to_string_lossy();
                if name.starts_with("CARGO_PKG_")
                    || name.starts_with("CARGO_MANIFEST_")
                    || matches!(
                        name.as_ref(),
                        "CARGO_CRATE_NAME" | "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR"
                    )
                {
                    build.env_remove(name.as_ref());
                }
            }
            let status = build
                // The whole workspace's binaries and examples, as `.ci/run` builds them:
                // one feature resolution (the tests crate turns on the engine's `otel`), so
                // this build and the later one share every artifact instead of rebuilding
                // the dependencies for a second set of features.
                .args([
                    "build",
                    "--quiet",
                    "--profile",
                    &profile,
                    "--workspace",
                    "--bins",
                    "--examples",
                ])
                .env("CARGO_TARGET_DIR", target_dir)
                .status()
                .expect("run cargo build for the onceflow binary");
            assert!(status.success(), "building the onceflow binary failed");
            target_profile.join("onceflow")
        })
        .clone()
}

/// A `onceflow serve` child process.
pub struct ServerProcess {
    /// The HTTP client for it.
    pub api: Api,
    child: Child,
}

impl ServerProcess {
    /// Starts `onceflow serve` on `database_url` at a free loopback port and waits until
    /// it answers `/healthz`.
    pub async fn start(database_url: &str, extra: &[&str]) -> ServerProcess {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("free port")
            .local_addr()
            .expect("addr")
            .port();
        Self::start_at(database_url, port, extra).await
    }

    /// Starts `onceflow serve` on `database_url` at `port` (e.g. to restart a server where
    /// its clients expect it).
    pub async fn start_at(database_url: &str, port: u16, extra: &[&str]) -> ServerProcess {
        Self::start_with_env(database_url, port, extra, &[]).await
    }

    /// Starts `onceflow serve` with extra environment variables.
    pub async fn start_with_env(
        database_url: &str,
        port: u16,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> ServerProcess {
        let api = Api::new(format!("http://127.0.0.1:{port}"));
        Self::spawn(database_url, port, extra, env, api).await
    }

    /// Starts `onceflow serve --tls-cert cert --tls-key key` on `database_url` at a free
    /// loopback port and waits until it answers `https://…/healthz`; its `api` trusts
    /// `ca_cert` (PEM file).
    pub async fn start_tls(
        database_url: &str,
        cert: &Path,
        key: &Path,
        ca_cert: &Path,
        extra: &[&str],
    ) -> ServerProcess {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("free port")
            .local_addr()
            .expect("addr")
            .port();
        let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());
        let mut args = vec!["--tls-cert", cert.as_ref(), "--tls-key", key.as_ref()];
        args.extend_from_slice(extra);
        let api = Api::trusting(format!("https://127.0.0.1:{port}"), ca_cert);
        Self::spawn(database_url, port, &args, &[], api).await
    }

    async fn spawn(
        database_url: &str,
        port: u16,
        extra: &[&str],
        env: &[(&str, &str)],
        api: Api,
    ) -> ServerProcess {
        let child = Command::new(onceflow_binary())
            .args([
                "serve",
                "--database-url",
                database_url,
                "--bind",
                &format!("127.0.0.1:{port}"),
                "--reaper-interval-ms",
                "100",
            ])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(server_log(port))
            .spawn()
            .expect("spawn onceflow serve");
        let process = ServerProcess { api, child };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = process
                .api
                .http
                .get(format!("{}/healthz", process.api.url))
                .send()
                .await
            {
                if r.status() == StatusCode::OK {
                    return process;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "onceflow serve did not come up"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.api
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("url has a port")
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running (it has not exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends a signal (e.g. `libc::SIGKILL`, `libc::SIGTERM`).
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) with a pid we spawned and still own; no memory is touched.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0, "signal delivered");
    }

    /// Waits for the process to exit and returns its exit status.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait for onceflow serve")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a server process's stderr goes: nowhere, unless `ONCEFLOW_TEST_SERVER_LOGS`
/// names a directory, where it goes to `serve-{port}.log` (to read what a server said
/// during a failing test).
fn server_log(port: u16) -> Stdio {
    let Some(dir) = std::env::var_os("ONCEFLOW_TEST_SERVER_LOGS") else {
        return Stdio::null();
    };
    let path = PathBuf::from(dir).join(format!("serve-{port}.log"));
    match std::fs::File::create(&path) {
        Ok(file) => Stdio::from(file),
        Err(e) => {
            eprintln!("cannot write {}: {e}", path.display());
            Stdio::null()
        }
    }
}

/// Where a child test's stderr goes: nowhere, unless `ONCEFLOW_TEST_SERVER_LOGS` names a
/// directory, where it goes to `{test name}.log`.
fn child_log(test_name: &str) -> Stdio {
    let Some(dir) = std::env::var_os("ONCEFLOW_TEST_SERVER_LOGS") else {
        return Stdio::null();
    };
    let path = PathBuf::from(dir).join(format!("{}.log", test_name.replace("::", "-")));
    match std::fs::File::create(&path) {
        Ok(file) => Stdio::from(file),
        Err(e) => {
            eprintln!("cannot write {}: {e}", path.display());
            Stdio::null()
        }
    }
}

/// Re-runs this test binary as a child process running only the ignored test `test_name`
/// (a worker process, say), with `ONCEFLOW_CHILD_URL` and `ONCEFLOW_CHILD_TOKEN` set, so
/// that a test can kill a real process.
pub fn spawn_child_test(test_name: &str, url: &str, token: &str) -> Child {
    Command::new(std::env::current_exe().expect("test executable path"))
        .args([test_name, "--exact", "--ignored", "--nocapture"])
        .env("ONCEFLOW_CHILD_URL", url)
        .env("ONCEFLOW_CHILD_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(child_log(test_name))
        .spawn()
        .expect("spawn the child test process")
}
