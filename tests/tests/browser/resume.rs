//! Resume in the web UI: on a failed job's page an operator resumes it with a reason, and
//! the page shows it `running` again.

use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use serde_json::json;

use super::story::Browser;

rules! {
    async fn an_operator_resumes_a_failed_job_from_its_page_with_a_reason(db) {
        let server = TestServer::start(db).await;
        let operator = &server.tokens.operator;
        // A failed job: its one provider refused the attempt for good.
        let id = server.api.submit(&server.tokens.client, "charge-9", &json!({"activity": "generate", "providers": ["primary-llm"]})).await
            .body["id"].as_str().unwrap().to_owned();
        let task = server.api.poll(&server.tokens.worker, "primary-llm", 2000).await.remove(0);
        let done = server.api.post(&format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap()), &server.tokens.worker,
            &json!({"lease_token": task["lease_token"], "error": {"message": "declined", "retryable": false}})).await;
        assert!(done.status.is_success(), "{:?}", done.body);
        let job = |token: String| { let api = &server.api; let path = format!("/v1/jobs/{id}"); async move { api.get(&path, &token).await.body } };
        assert_eq!(job(operator.clone()).await["status"], json!("failed"));

        let browser = Browser::start().await;
        browser.client.goto(&format!("{}/ui/#/jobs/{id}", server.api.url)).await.expect("open the UI");
        browser.sign_in(operator, "ops · operator").await;
        browser.wait_text("#job-status", &["failed"]).await;
        browser.click("#job-resume").await;
        browser.wait_text("#resume-dialog[open]", &["Resume job", "charge-9", "providers_exhausted"]).await;
        browser.click("#resume-confirm").await;
        browser.wait_text("#resume-error", &["reason is required"]).await;
        assert_eq!(job(operator.clone()).await["status"], json!("failed"), "nothing is resumed without a reason");
        browser.type_into("#resume-reason", "provider fixed").await;
        browser.click("#resume-confirm").await;
        browser.wait_text("#flash", &["resumed", "running"]).await;
        browser.wait_text("#job-status", &["running"]).await;
        browser.wait_text("#events", &["job_resumed", "operator:ops", "provider fixed"]).await;
        browser.wait_gone("#job-resume").await;
        let view = job(operator.clone()).await;
        assert_eq!(view["status"], json!("running"));
        assert_eq!(view["activities"][0]["attempts"].as_array().map(Vec::len), Some(2), "a fresh attempt: {view}");
    }
}
