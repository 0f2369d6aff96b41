//! The seed's story, lived through the web UI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// How long any wait for the page may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// The first of `names` on `PATH`, else the first of `paths` that exists.
fn find_program(names: &[&str], paths: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    paths.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// A chromedriver of our own (in its own process group, with the Chromium it starts) and
/// a WebDriver session on it. Dropping it kills that process group, and nothing else.
pub(super) struct Browser {
    pub(super) client: Client,
    driver: Child,
}

impl Browser {
    pub(super) async fn start() -> Browser {
        let chromium = find_program(&["chromium", "chromium-browser"], &["/usr/bin/chromium", "/usr/lib/chromium/chromium"])
            .unwrap_or_else(|| panic!("headless Chromium is not installed: the browser tests need Debian's `chromium` and `chromium-driver` \
                                       packages (`apt-get install -y chromium chromium-driver`; scripts/test installs them when run as root)"));
        let chromedriver = find_program(&["chromedriver"], &["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"])
            .unwrap_or_else(|| panic!("chromedriver is not installed: the browser tests need Debian's `chromium-driver` package \
                                       (`apt-get install -y chromium-driver`; scripts/test installs it when run as root)"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("a free port")
            .local_addr()
            .expect("addr")
            .port();
        let driver = {
            use std::os::unix::process::CommandExt;
            Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .process_group(0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()))
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "chromedriver did not listen on port {port}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".into(), json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                     "--no-first-run", "--disable-extensions", "--lang=en-US"],
        }));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "chromedriver did not start a headless Chromium session ({}): {e}",
                    chromium.display()
                )
            });
        Browser { client, driver }
    }

    /// Runs a script in the page and returns its value.
    pub(super) async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// The text of the first element matching `selector`, if there is one.
    pub(super) async fn text(&self, selector: &str) -> Option<String> {
        self.js(
            "const el = document.querySelector(arguments[0]); return el ? el.innerText : null;",
            vec![json!(selector)],
        )
        .await
        .as_str()
        .map(str::to_owned)
    }

    /// Waits, polling the DOM, until `selector` matches an element whose text contains
    /// every one of `needles`; returns that text.
    pub(super) async fn wait_text(&self, selector: &str, needles: &[&str]) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let text = self.text(selector).await;
            if let Some(t) = &text {
                if needles.iter().all(|n| t.contains(n)) {
                    return t.clone();
                }
            }
            if tokio::time::Instant::now() > deadline {
                let page = self.text("body").await.unwrap_or_default();
                panic!("timed out waiting for `{selector}` to show {needles:?}; it shows {text:?}\n--- page ---\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `selector` matches nothing.
    pub(super) async fn wait_gone(&self, selector: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.text(selector).await.is_some() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for `{selector}` to go away"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks `selector` once it is there. The live pages re-render every 2 s, so an
    /// element found just before a re-render is stale: then it is found again.
    pub(super) async fn click(&self, selector: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            self.wait_text(selector, &[]).await;
            let clicked = match self.client.find(Locator::Css(selector)).await {
                Ok(el) => el.click().await,
                Err(e) => Err(e),
            };
            match clicked {
                Ok(()) => return,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    eprintln!("click {selector}: {e}; trying again")
                }
                Err(e) => panic!("click {selector}: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(super) async fn type_into(&self, selector: &str, text: &str) {
        self.wait_text(selector, &[]).await;
        let el = self
            .client
            .find(Locator::Css(selector))
            .await
            .expect(selector);
        el.clear().await.expect("clear");
        el.send_keys(text).await.expect("type");
    }

    pub(super) async fn sign_in(&self, token: &str, expect_who: &str) {
        self.type_into("#token", token).await;
        self.click("#signin").await;
        self.wait_text("#who", &[expect_who]).await;
    }

    /// A screenshot of the whole page (the window grown to the page's height first).
    pub(super) async fn save_screenshot(&self, path: &Path) {
        let height = self
            .js("return document.documentElement.scrollHeight;", vec![])
            .await
            .as_u64()
            .unwrap_or(1000);
        self.client
            .set_window_size(1400, height.clamp(600, 4000) as u32 + 20)
            .await
            .expect("resize the window");
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::create_dir_all(path.parent().expect("a directory"))
            .expect("create the artifacts directory");
        std::fs::write(path, png).expect("write the screenshot");
        self.client
            .set_window_size(1400, 1000)
            .await
            .expect("restore the window");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group we created for chromedriver (and the
        // Chromium it started); no memory is touched.
        unsafe { libc::kill(-(self.driver.id() as i32), libc::SIGKILL) };
        let _ = self.driver.wait();
    }
}

/// `target/ui-artifacts/`, next to the profile directory this test runs from.
pub(super) fn artifacts_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    target.join("ui-artifacts")
}

fn complete(task: &Value, text: &str) -> Value {
    json!({"lease_token": task["lease_token"], "read_version": task["read_version"], "result": {"text": text}})
}

rules! {
    async fn an_operator_cancels_a_stuck_attempt_from_the_ui_and_the_fallback_wins(db) {
        let server = TestServer::start(db).await;
        let (client, worker, operator) = (&server.tokens.client, &server.tokens.worker, &server.tokens.operator);
        let browser = Browser::start().await;

        // The fallback is certified for the contract (failover needs it).
        let hash = server.api.post("/v1/worker/contracts", worker, &json!({"activity": "generate",
            "output_schema": {"type": "object", "required": ["text"]}})).await.body["contract_hash"].clone();
        let cert = server.api.post("/v1/worker/certifications", worker, &json!({"activity": "generate", "provider": "fallback-llm",
            "contract_hash": hash, "passed": true, "report": {"cases": 3}})).await;
        assert_eq!(cert.status, StatusCode::CREATED);
        // The user's intent; the primary takes it and goes silent, so its lease expires.
        let job = server.api.submit(client, "order-42", &json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"],
            "input": {"prompt": "a haiku"}, "options": {"heartbeat_timeout_s": 1}})).await;
        assert_eq!(job.status, StatusCode::CREATED);
        let job_id = job.body["id"].as_str().unwrap().to_owned();
        let a = server.api.poll(worker, "primary-llm", 5000).await.remove(0);
        let a_id = a["attempt_id"].as_str().unwrap().to_owned();

        // A client signs in: it sees its job, and its stuck attempt, but may not cancel it.
        browser.client.goto(&format!("{}/ui", server.api.url)).await.expect("open the UI");
        browser.sign_in(client, "alice · client").await;
        browser.wait_text(&format!("#jobs-table tr[data-job-id='{job_id}']"), &["order-42"]).await;
        browser.click("#nav a[data-page='stuck']").await;
        let row = format!("#stuck-table tr[data-attempt-id='{a_id}'][data-status='unknown']");
        browser.wait_text(&row, &["unknown", "primary-llm", "alice"]).await;
        browser.wait_text("#not-operator", &["only an operator can cancel"]).await;
        let disabled = browser.js("return document.querySelector(arguments[0] + ' button.cancel').disabled;", vec![json!(row)]).await;
        assert_eq!(disabled, json!(true), "Cancel… is disabled for a client token");
        browser.click("#signout").await;

        // The operator signs in, lands on the stuck attempts, and cancels it with a reason.
        browser.sign_in(operator, "ops · operator").await;
        browser.wait_text(&row, &["unknown", "primary-llm", "alice", "Cancel…"]).await;
        if db.backend() == onceflow_tests::Backend::Postgres {
            browser.save_screenshot(&artifacts_dir().join("stuck.png")).await;
        }
        browser.click(&format!("{row} button.cancel")).await;
        browser.wait_text("#cancel-dialog[open]", &["Cancel attempt", "primary-llm"]).await;
        browser.click("#cancel-confirm").await;
        browser.wait_text("#cancel-error", &["reason is required"]).await;
        assert_eq!(server.api.get(&format!("/v1/jobs/{job_id}"), operator).await.body["activities"][0]["attempts"][0]["status"], json!("unknown"),
            "nothing is cancelled without a reason");
        browser.type_into("#cancel-reason", "provider confirmed no request").await;
        browser.click("#cancel-confirm").await;
        browser.wait_text("#flash", &["cancelled by ops"]).await;
        browser.wait_gone(&format!("#stuck-table tr[data-attempt-id='{a_id}']")).await;

        // The Providers page tells why failover may use the fallback.
        browser.click("#nav a[data-page='providers']").await;
        browser.wait_text("#providers section[data-activity='generate'] tr[data-provider='fallback-llm']", &["fallback-llm", "passed", "failover may use it"]).await;
        browser.wait_text("#providers section[data-activity='generate']", &["current", "owner *"]).await;
        if db.backend() == onceflow_tests::Backend::Postgres {
            browser.save_screenshot(&artifacts_dir().join("providers.png")).await;
        }

        // The engine fails over: the fallback returns first and wins; the primary's late answer loses.
        let b = server.api.poll(worker, "fallback-llm", 5000).await.remove(0);
        let b_id = b["attempt_id"].as_str().unwrap().to_owned();
        let won = server.api.post(&format!("/v1/worker/attempts/{b_id}/complete"), worker, &complete(&b, "from the fallback")).await;
        assert_eq!(won.body, json!({"outcome": "won"}));
        let lost = server.api.post(&format!("/v1/worker/attempts/{a_id}/complete"), worker, &complete(&a, "from the primary, late")).await;
        assert_eq!(lost.body, json!({"outcome": "lost"}));

        // The job list updates by itself; the job's timeline shows who won, who lost, and why.
        browser.click("#nav a[data-page='jobs']").await;
        let job_row = format!("#jobs-table tr[data-job-id='{job_id}']");
        browser.wait_text(&job_row, &["order-42", "succeeded"]).await;
        if db.backend() == onceflow_tests::Backend::Postgres {
            browser.save_screenshot(&artifacts_dir().join("jobs.png")).await;
        }
        browser.click(&format!("{job_row} a")).await;
        browser.wait_text("#job-status", &["succeeded"]).await;
        browser.wait_text("#job-result", &["from the fallback"]).await;
        browser.wait_text(&format!(".tl-row.won[data-attempt-id='{b_id}']"), &["#2 fallback-llm", "succeeded", "★ won"]).await;
        let primary = browser.wait_text(&format!(".tl-row.lost[data-attempt-id='{a_id}']"),
            &["#1 primary-llm", "lost", "lost the race", "cancelled by ops", "provider confirmed no request"]).await;
        assert!(!primary.contains("★ won"), "{primary}");
        browser.wait_text("#events", &["attempt_heartbeat_lost", "attempt_cancelled", "failover", "attempt_succeeded", "race_lost", "operator"]).await;
        let segments = browser.js("return [...document.querySelectorAll(arguments[0] + ' .seg')].map(s => s.className);",
            vec![json!(format!(".tl-row[data-attempt-id='{a_id}']"))]).await;
        for state in ["started", "unknown", "cancelled"] {
            assert!(segments.as_array().unwrap().iter().any(|c| c.as_str().unwrap().contains(state)), "a {state} stretch in {segments}");
        }

        let name = match db.backend() { onceflow_tests::Backend::Postgres => "job.png", onceflow_tests::Backend::Sqlite => "job-sqlite.png" };
        browser.save_screenshot(&artifacts_dir().join(name)).await;
        browser.client.clone().close().await.expect("close the session");
    }
}
