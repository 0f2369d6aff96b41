//! Worker endpoints: the long-poll, heartbeats with cancellation, many servers at once.

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::http::ServerConfig;
use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

rules! {
    async fn a_long_poll_is_woken_as_soon_as_work_is_scheduled(db) {
        // No periodic re-check within the poll's wait: only the wake-up can deliver the task.
        let config = ServerConfig { poll_recheck: Duration::from_secs(600), ..ServerConfig::default() };
        let server = TestServer::start_with(db, config).await;
        let api = server.api.clone();
        let worker = server.tokens.worker.clone();
        let poll = tokio::spawn(async move { api.poll(&worker, "primary-llm", 30_000).await });
        // Give the poll time to find nothing and start waiting.
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm"]})).await;
        let tasks = tokio::time::timeout(Duration::from_secs(25), poll).await.expect("the poll returned before its wait").unwrap();
        assert_eq!(tasks.len(), 1, "woken with the task, not at the end of wait_ms");
    }

    async fn a_long_poll_with_nothing_to_do_returns_an_empty_list(db) {
        let server = TestServer::start(db).await;
        assert!(server.api.poll(&server.tokens.worker, "primary-llm", 200).await.is_empty());
        let too_long = server.api.post("/v1/worker/poll", &server.tokens.worker, &json!({"worker_id": "w", "wait_ms": 60_001})).await;
        assert_eq!((too_long.status, too_long.code()), (StatusCode::BAD_REQUEST, "invalid_request"));
        let no_worker = server.api.post("/v1/worker/poll", &server.tokens.worker, &json!({"wait_ms": 0})).await;
        assert_eq!(no_worker.code(), "invalid_request");
        let too_many = server.api.post("/v1/worker/poll", &server.tokens.worker, &json!({"worker_id": "w", "max_tasks": 101, "providers": [{"activity": "a", "provider": "p"}]})).await;
        assert_eq!(too_many.code(), "invalid_request");
    }

    async fn a_cancelled_attempt_tells_its_worker_through_the_heartbeat(db) {
        let server = TestServer::start(db).await;
        let id = server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm"]})).await.body["id"].as_str().unwrap().to_owned();
        let task = server.api.poll(&server.tokens.worker, "primary-llm", 2000).await.remove(0);
        let cancel = server.api.send(Method::POST, &format!("/v1/jobs/{id}/cancel"), Some(&server.tokens.client), &[], None).await;
        assert_eq!(cancel.status, StatusCode::ACCEPTED);
        let hb = server.api.post(&format!("/v1/worker/attempts/{}/heartbeat", task["attempt_id"].as_str().unwrap()), &server.tokens.worker,
            &json!({"lease_token": task["lease_token"]})).await;
        assert_eq!((hb.status, hb.body.clone()), (StatusCode::OK, json!({"cancel_requested": true})));
        let late = server.api.post(&format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap()), &server.tokens.worker,
            &json!({"lease_token": task["lease_token"], "result": {"text": "late"}})).await;
        assert_eq!(late.body, json!({"outcome": "lost"}));
    }

    async fn several_servers_on_one_database_hand_each_attempt_out_once(db) {
        let first = TestServer::start(db).await;
        let second = TestServer::start_engine(db.engine(), first.tokens.clone(), ServerConfig { reaper_interval: Duration::from_millis(50), ..ServerConfig::default() }).await;
        let n = 40;
        for i in 0..n {
            let server = if i % 2 == 0 { &first } else { &second };
            let reply = server.api.submit(&first.tokens.client, &format!("k{i}"), &json!({"activity": "generate", "providers": ["primary-llm"], "input": {"i": i}})).await;
            assert_eq!(reply.status, StatusCode::CREATED);
        }
        let pollers = (0..8).map(|p| {
            let api = if p % 2 == 0 { first.api.clone() } else { second.api.clone() };
            let token = first.tokens.worker.clone();
            async move {
                let mut mine = Vec::new();
                loop {
                    let got = api.poll(&token, "primary-llm", 300).await;
                    if got.is_empty() {
                        return mine;
                    }
                    mine.extend(got.into_iter().map(|t| t["attempt_id"].as_str().unwrap().to_owned()));
                }
            }
        });
        let all: Vec<String> = join_all(pollers).await.into_iter().flatten().collect();
        let unique: HashSet<_> = all.iter().collect();
        assert_eq!((all.len(), unique.len()), (n, n), "every attempt handed out exactly once across both servers");
    }
}
