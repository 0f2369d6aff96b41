//! `GET /metrics`: Prometheus text that moves as the seed's story runs.

use std::time::Duration;

use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for};
use reqwest::Method;
use serde_json::json;

async fn metric(server: &TestServer, name: &str) -> f64 {
    let reply = server
        .api
        .http
        .get(format!("{}/metrics", server.api.url))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let text = reply.text().await.unwrap();
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in:\n{text}"))
}

rules! {
    async fn metrics_move_as_the_seed_story_runs(db) {
        let server = TestServer::start(db).await;
        let (client, worker, operator) = (&server.tokens.client, &server.tokens.worker, &server.tokens.operator);
        let text = server.api.send(Method::GET, "/metrics", None, &[], None).await;
        assert_eq!(text.status.as_u16(), 200, "no token needed");
        assert_eq!(metric(&server, "onceflow_race_lost_total").await, 0.0);

        // The double-click and a reused key.
        let body = json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"], "input": {}, "options": {"heartbeat_timeout_s": 1}});
        let id = server.api.submit(client, "k", &body).await.body["id"].as_str().unwrap().to_owned();
        server.api.submit(client, "k", &body).await;
        server.api.submit(client, "k", &json!({"workflow": "other"})).await;
        assert_eq!(metric(&server, "onceflow_jobs_created_total").await, 1.0);
        assert_eq!(metric(&server, "onceflow_jobs_replayed_total").await, 1.0);
        assert_eq!(metric(&server, "onceflow_idempotency_conflicts_total").await, 1.0);

        // The primary stalls: a heartbeat loss, an unknown attempt blocking its activity.
        let hash = server.api.post("/v1/worker/contracts", worker, &json!({"activity": "generate", "output_schema": {"type": "object"}})).await.body["contract_hash"].clone();
        server.api.post("/v1/worker/certifications", worker, &json!({"activity": "generate", "provider": "fallback-llm", "contract_hash": hash, "passed": true})).await;
        let a = server.api.poll(worker, "primary-llm", 2000).await.remove(0);
        wait_for("the heartbeat loss", Duration::from_secs(10), || async { metric(&server, "onceflow_heartbeat_lost_total").await == 1.0 }).await;
        assert_eq!(metric(&server, "onceflow_live_attempts{status=\"unknown\"}").await, 1.0);
        assert_eq!(metric(&server, "onceflow_blocked_activities").await, 1.0);

        // Operator cancel, failover, the fallback wins, the primary's late result loses.
        server.api.post(&format!("/v1/attempts/{}/cancel", a["attempt_id"].as_str().unwrap()), operator, &json!({"reason": "stuck"})).await;
        assert_eq!(metric(&server, "onceflow_failovers_total").await, 1.0);
        let b = server.api.poll(worker, "fallback-llm", 2000).await.remove(0);
        for task in [&b, &a] {
            server.api.post(&format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap()), worker,
                &json!({"lease_token": task["lease_token"], "result": {"text": "x"}})).await;
        }
        assert_eq!(metric(&server, "onceflow_race_lost_total").await, 1.0);
        assert_eq!(metric(&server, "onceflow_attempts_finished_total{status=\"succeeded\"}").await, 1.0);
        assert_eq!(metric(&server, "onceflow_live_attempts{status=\"unknown\"}").await, 0.0);
        assert!(metric(&server, "onceflow_attempt_seconds_count").await >= 2.0);
        assert!(metric(&server, "onceflow_submit_seconds_count").await >= 3.0);
        assert_eq!(server.api.get(&format!("/v1/jobs/{id}"), client).await.body["status"], json!("succeeded"));
    }
}
