//! `onceflow dev`: the embedded default, as a real process, with no database server.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use onceflow_tests::server::{onceflow_binary, Api};
use reqwest::StatusCode;
use serde_json::json;

struct Dev {
    child: Child,
    api: Api,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_dev(dir: &std::path::Path, port: u16, demo: bool) -> Dev {
    let mut command = Command::new(onceflow_binary());
    command.args([
        "dev",
        "--dir",
        &dir.display().to_string(),
        "--bind",
        &format!("127.0.0.1:{port}"),
        "--reaper-interval-ms",
        "100",
    ]);
    if demo {
        command.arg("--demo");
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn onceflow dev");
    let api = Api::new(format!("http://127.0.0.1:{port}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = api.http.get(format!("{}/readyz", api.url)).send().await {
            if r.status() == StatusCode::OK && dir.join("tokens.env").exists() {
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "onceflow dev did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Dev { child, api }
}

fn env_var(dir: &std::path::Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join("tokens.env")).expect("tokens.env written");
    text.lines()
        .find_map(|l| {
            l.trim_start_matches("export ")
                .strip_prefix(&format!("{name}="))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("{name} in tokens.env:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn onceflow_dev_runs_on_sqlite_and_keeps_everything_across_restarts() {
    onceflow_tests::time_limit(async {
        let dir = std::env::temp_dir().join(format!("onceflow-dev-{}", uuid::Uuid::new_v4().simple()));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dev = start_dev(&dir, port, true).await;
        assert!(
            dir.join("dev.db").exists(),
            "the database is ./.onceflow/dev.db (here under --dir)"
        );
        assert_eq!(env_var(&dir, "ONCEFLOW_URL"), dev.api.url);
        let client = env_var(&dir, "ONCEFLOW_CLIENT_TOKEN");
        let body = json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"], "task_queue": "demo", "input": {"prompt": "hello"}});
        let created = dev.api.submit(&client, "try-1", &body).await;
        assert_eq!(created.status, StatusCode::CREATED);
        let id = created.body["id"].as_str().unwrap().to_owned();
        // The --demo worker runs it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let job = dev.api.get(&format!("/v1/jobs/{id}"), &client).await;
            if job.body["status"] == json!("succeeded") {
                assert_eq!(job.body["result"]["model"], json!("primary-llm"));
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the demo worker did not run the job: {}",
                job.body
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Stop it hard, start it again: the job, its history and the tokens are still there.
        drop(dev);
        let dev = start_dev(&dir, port, false).await;
        assert_eq!(
            env_var(&dir, "ONCEFLOW_CLIENT_TOKEN"),
            client,
            "working tokens are kept"
        );
        let job = dev.api.get(&format!("/v1/jobs/{id}"), &client).await;
        assert_eq!(
            (job.status, job.body["status"].clone()),
            (StatusCode::OK, json!("succeeded"))
        );
        let replay = dev.api.submit(&client, "try-1", &body).await;
        assert_eq!(
            (replay.status, replay.body["id"].clone()),
            (StatusCode::OK, json!(id)),
            "the double-click still finds its job"
        );
        let events = dev.api.get(&format!("/v1/jobs/{id}/events"), &client).await;
        assert!(events.body["events"].as_array().unwrap().len() >= 4);
        drop(dev);
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}

/// The permission bits of a file.
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("the file exists")
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_env_is_readable_by_its_owner_only_even_when_it_was_not() {
    onceflow_tests::time_limit(async {
        use std::os::unix::fs::PermissionsExt;
        let dir =
            std::env::temp_dir().join(format!("onceflow-dev-{}", uuid::Uuid::new_v4().simple()));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let env_file = dir.join("tokens.env");
        let dev = start_dev(&dir, port, false).await;
        assert_eq!(mode(&env_file), 0o600, "a new tokens.env");
        let client = env_var(&dir, "ONCEFLOW_CLIENT_TOKEN");
        drop(dev);

        // Someone widened it (or an older onceflow wrote it with the umask's mode).
        std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let dev = start_dev(&dir, port, false).await;
        assert_eq!(
            mode(&env_file),
            0o600,
            "an existing tokens.env written again"
        );
        assert_eq!(
            env_var(&dir, "ONCEFLOW_CLIENT_TOKEN"),
            client,
            "its working tokens are kept"
        );
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("tokens.env") && name != "tokens.env")
            .collect();
        assert!(
            leftovers.is_empty(),
            "no temporary file left: {leftovers:?}"
        );
        drop(dev);
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}
