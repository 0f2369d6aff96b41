//! Workflows in the web UI: a workflow job's page lists its signals and their events, and
//! links a parent and its children both ways.

use std::sync::Arc;
use std::time::Duration;

use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for};
use onceflow_worker::{Client, Worker, WorkflowContext, WorkflowError};
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

    async fn a_parent_and_its_child_link_to_each_other_on_their_job_pages(db) {
        async fn parent(ctx: WorkflowContext, _input: serde_json::Value) -> Result<String, WorkflowError> {
            ctx.child_workflow::<String>("child", json!({})).await
        }
        async fn child(ctx: WorkflowContext, _input: serde_json::Value) -> Result<String, WorkflowError> {
            ctx.wait_signal::<String>("go").await
        }
        let server = TestServer::start(db).await;
        let worker = Arc::new(Worker::builder(&server.api.url, &server.tokens.worker).workflow("parent", parent).workflow("child", child).build().unwrap());
        let w = worker.clone();
        tokio::spawn(async move { w.run().await });
        let client = Client::new(&server.api.url, &server.tokens.client).unwrap();
        let id = client.submit("family", &onceflow_worker::api::JobRequestBody {
            workflow: Some("parent".into()), activity: None, providers: None, input: Some(json!({})), task_queue: None, options: None,
        }).await.unwrap().job.id;
        wait_for("the child to be started", Duration::from_secs(30), || async { !client.job(id).await.unwrap().children.is_empty() }).await;
        let child_id = client.job(id).await.unwrap().children[0].to_string();
        let browser = Browser::start().await;
        browser.client.goto(&format!("{}/ui/#/jobs/{id}", server.api.url)).await.expect("open the UI");
        browser.sign_in(&server.tokens.client, "alice · client").await;
        browser.wait_text("#job-children", &[&child_id]).await;
        browser.click(&format!("#job-children a[href='#/jobs/{child_id}']")).await;
        browser.wait_text("#job-parent", &[&id.to_string()]).await;
        worker.shutdown_token().cancel();
    }
}
