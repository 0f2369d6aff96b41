//! Real `onceflow serve` processes: killed with SIGKILL mid-lease, stopped with SIGTERM,
//! sized with `--threads`, pruning finished jobs with `--retention`.

use std::time::Duration;

use onceflow_engine::model::Role;
use onceflow_tests::server::{onceflow_binary, ServerProcess};
use onceflow_tests::{rules, wait_for};
use reqwest::StatusCode;
use serde_json::json;

rules! {
    async fn after_sigkill_and_restart_the_same_lease_tokens_complete_the_job(db) {
        let engine = db.engine();
        let client = engine.create_token("alice", Role::Client).await.unwrap().token;
        let worker = engine.create_token("*", Role::Worker).await.unwrap().token;
        let mut server = ServerProcess::start(&db.url(), &[]).await;
        let mut jobs = Vec::new();
        for i in 0..3 {
            let reply = server.api.submit(&client, &format!("k{i}"), &json!({"activity": "generate", "providers": ["primary-llm"], "input": {"i": i}})).await;
            assert_eq!(reply.status, StatusCode::CREATED);
            jobs.push(reply.body["id"].as_str().unwrap().to_owned());
        }
        let tasks = server.api.poll(&worker, "primary-llm", 2000).await;
        assert_eq!(tasks.len(), 3, "all three attempts are leased");

        server.signal(libc::SIGKILL);
        assert!(!server.wait().success());
        let server = ServerProcess::start(&db.url(), &[]).await;

        for task in &tasks {
            let id = task["attempt_id"].as_str().unwrap();
            let hb = server.api.post(&format!("/v1/worker/attempts/{id}/heartbeat"), &worker, &json!({"lease_token": task["lease_token"]})).await;
            assert_eq!(hb.body, json!({"cancel_requested": false}), "the lease survived the crash");
            let done = server.api.post(&format!("/v1/worker/attempts/{id}/complete"), &worker,
                &json!({"lease_token": task["lease_token"], "result": {"text": "after the crash"}})).await;
            assert_eq!(done.body, json!({"outcome": "won"}));
        }
        for id in jobs {
            let job = server.api.get(&format!("/v1/jobs/{id}"), &client).await;
            assert_eq!(job.body["status"], json!("succeeded"));
            assert_eq!(job.body["activities"][0]["attempts"].as_array().unwrap().len(), 1, "nothing ran twice");
        }
    }

    async fn sigterm_finishes_in_flight_requests_then_exits(db) {
        let engine = db.engine();
        let worker = engine.create_token("*", Role::Worker).await.unwrap().token;
        let mut server = ServerProcess::start(&db.url(), &[]).await;
        let api = server.api.clone();
        let in_flight = tokio::spawn(async move { api.poll(&worker, "primary-llm", 20_000).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.signal(libc::SIGTERM);
        let answered = tokio::time::timeout(Duration::from_secs(15), in_flight).await.expect("the in-flight poll was answered").unwrap();
        assert!(answered.is_empty(), "the waiting poll got its (empty) answer rather than a dropped connection");
        let status = tokio::task::spawn_blocking(move || server.wait()).await.unwrap();
        assert!(status.success(), "a clean exit: {status:?}");
    }

    async fn serve_runs_on_the_threads_it_is_given_and_refuses_zero(db) {
        let threads_of = |server: &ServerProcess| {
            let api = server.api.clone();
            async move {
                let text = api.http.get(format!("{}/metrics", api.url)).send().await.unwrap().text().await.unwrap();
                text.lines()
                    .find_map(|l| l.strip_prefix("onceflow_runtime_threads "))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("onceflow_runtime_threads in:\n{text}"))
            }
        };
        for (given, expected) in [(["--threads", "3"], 3), (["--threads", "1"], 1)] {
            let mut server = ServerProcess::start(&db.url(), &given).await;
            assert_eq!(threads_of(&server).await, expected, "{given:?}");
            server.signal(libc::SIGTERM);
            assert!(tokio::task::spawn_blocking(move || server.wait()).await.unwrap().success());
        }
        // The environment variable does the same.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut server = ServerProcess::start_with_env(&db.url(), port, &[], &[("ONCEFLOW_THREADS", "2")]).await;
        assert_eq!(threads_of(&server).await, 2);
        server.signal(libc::SIGTERM);
        assert!(tokio::task::spawn_blocking(move || server.wait()).await.unwrap().success());

        let url = db.url();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(onceflow_binary())
                .args(["serve", "--database-url", &url, "--bind", "127.0.0.1:0", "--threads", "0"])
                .output()
                .unwrap()
        }).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("--threads"), "zero threads is refused by name: {stderr}");
    }

    async fn serve_with_retention_deletes_finished_jobs_and_keeps_open_ones(db) {
        let engine = db.engine();
        let client = engine.create_token("alice", Role::Client).await.unwrap().token;
        let worker = engine.create_token("*", Role::Worker).await.unwrap().token;
        let mut server = ServerProcess::start(&db.url(), &["--retention", "1s"]).await;
        let body = |i: u32| json!({"activity": "generate", "providers": ["primary-llm"], "input": {"i": i}});
        let done = server.api.submit(&client, "done", &body(1)).await.body["id"].as_str().unwrap().to_owned();
        let tasks = server.api.poll(&worker, "primary-llm", 2000).await;
        assert_eq!(tasks.len(), 1);
        let completed = server.api.post(&format!("/v1/worker/attempts/{}/complete", tasks[0]["attempt_id"].as_str().unwrap()), &worker,
            &json!({"lease_token": tasks[0]["lease_token"], "result": {"text": "done"}})).await;
        assert_eq!(completed.body, json!({"outcome": "won"}));
        let open = server.api.submit(&client, "open", &body(2)).await.body["id"].as_str().unwrap().to_owned();

        let api = server.api.clone();
        wait_for("retention to delete the finished job", Duration::from_secs(20), || {
            let (api, client, done) = (api.clone(), client.clone(), done.clone());
            async move { api.get(&format!("/v1/jobs/{done}"), &client).await.status == StatusCode::NOT_FOUND }
        })
        .await;
        let open_job = server.api.get(&format!("/v1/jobs/{open}"), &client).await;
        assert_eq!(open_job.status, StatusCode::OK, "a queued job is never pruned, however old");
        let metrics = server.api.http.get(format!("{}/metrics", server.api.url)).send().await.unwrap().text().await.unwrap();
        assert!(metrics.lines().any(|l| l == "onceflow_jobs_pruned_total 1"), "the pruned job is counted:\n{metrics}");
        // The key is free again: the same key is a new job.
        let again = server.api.submit(&client, "done", &body(1)).await;
        assert_eq!(again.status, StatusCode::CREATED);
        assert_ne!(again.body["id"].as_str().unwrap(), done);
        server.signal(libc::SIGTERM);
        assert!(tokio::task::spawn_blocking(move || server.wait()).await.unwrap().success());

        for bad in ["0s", "banana", "1000years"] {
            let url = db.url();
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new(onceflow_binary())
                    .args(["serve", "--database-url", &url, "--bind", "127.0.0.1:0", "--retention", bad])
                    .output()
                    .unwrap()
            }).await.unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success() && stderr.contains("--retention"), "--retention {bad} is refused by name: {stderr}");
        }
    }
}
