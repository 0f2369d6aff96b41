//! Real `onceflow serve` processes: killed with SIGKILL mid-lease, stopped with SIGTERM.

use std::time::Duration;

use onceflow_engine::model::Role;
use onceflow_tests::rules;
use onceflow_tests::server::ServerProcess;
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
}
