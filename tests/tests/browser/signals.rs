//! Signals in the web UI: a workflow job's page lists its signals and their events.

use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::story::Browser;

rules! {
    async fn a_workflow_jobs_page_lists_its_signals_in_the_order_recorded(db) {
        let server = TestServer::start(db).await;
        let client = &server.tokens.client;
        let id = server.api.submit(client, "expense-7", &json!({"workflow": "approval", "input": {}})).await.body["id"].as_str().unwrap().to_owned();
        for (key, name, by) in [("c1", "approve", "ann"), ("c2", "escalate", "bob")] {
            let sent = server.api.send(Method::POST, &format!("/v1/jobs/{id}/signals"), Some(client), &[("Idempotency-Key", key)],
                Some(&json!({"name": name, "payload": {"by": by}}))).await;
            assert_eq!(sent.status, StatusCode::ACCEPTED, "{:?}", sent.body);
        }
        let browser = Browser::start().await;
        browser.client.goto(&format!("{}/ui/#/jobs/{id}", server.api.url)).await.expect("open the UI");
        browser.sign_in(client, "alice · client").await;
        browser.wait_text("#signals tr[data-signal='1']", &["approve", "waiting for the workflow", "\"by\":\"ann\""]).await;
        browser.wait_text("#signals tr[data-signal='2']", &["escalate", "\"by\":\"bob\""]).await;
        browser.wait_text("#events", &["signal_received"]).await;
    }
}
