//! Schedules in the web UI: a client sees its schedule fire and pauses it.

use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for};
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::story::{artifacts_dir, Browser};

rules! {
    async fn a_client_watches_a_schedule_fire_and_pauses_it_from_the_ui(db) {
        let server = TestServer::start(db).await;
        let client = &server.tokens.client;
        let put = server.api.send(Method::PUT, "/v1/schedules/digest", Some(client), &[], Some(&json!({
            "cron": "* * * * * *", "overlap": "allow", "job": {"workflow": "digest", "input": {}}}))).await;
        assert_eq!(put.status, StatusCode::CREATED);
        let browser = Browser::start().await;
        browser.client.goto(&format!("{}/ui/#/schedules", server.api.url)).await.expect("open the UI");
        browser.sign_in(client, "alice · client").await;
        browser.click("#nav a[data-page='schedules']").await;
        let row = "#schedules-table tr[data-schedule='digest']";
        browser.wait_text(row, &["digest", "* * * * * *", "UTC", "active", "allow"]).await;
        // The page is live: the fired count moves by itself as ticks fire.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let fired = browser.text(&format!("{row} td.fired")).await.and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(0);
            if fired >= 2 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "the fired count did not move: {fired}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        browser.click(&format!("{row} button.pause")).await;
        browser.wait_text("#flash", &["schedule digest paused"]).await;
        browser.wait_text("#schedules-table tr[data-schedule='digest'][data-paused='true']", &["paused", "Resume"]).await;
        let s = server.api.get("/v1/schedules/digest", client).await.body;
        assert_eq!((s["paused"].clone(), s["next_fire_at"].clone()), (json!(true), serde_json::Value::Null));
        // Its history: the ticks with their jobs, and the pause.
        browser.click(&format!("{row} td a")).await;
        browser.wait_text("#schedule-events[data-schedule='digest']", &["fired", "paused"]).await;
        if db.backend() == onceflow_tests::Backend::Postgres {
            browser.save_screenshot(&artifacts_dir().join("schedules.png")).await;
        }
        // Resumed from the UI, it fires again.
        let fired = s["fired_count"].as_u64().unwrap();
        browser.click("#schedules-table tr[data-schedule='digest'] button.resume").await;
        browser.wait_text("#flash", &["schedule digest resumed"]).await;
        wait_for("a tick after resume", std::time::Duration::from_secs(10), || async {
            server.api.get("/v1/schedules/digest", client).await.body["fired_count"].as_u64() > Some(fired)
        }).await;
        // An operator is told schedules belong to an owner.
        browser.click("#signout").await;
        browser.sign_in(&server.tokens.operator, "ops · operator").await;
        browser.click("#nav a[data-page='schedules']").await;
        browser.wait_text("#not-client", &["client token"]).await;
        browser.client.clone().close().await.expect("close the session");
    }
}
