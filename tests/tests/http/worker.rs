//! Worker endpoints: the long-poll, heartbeats with cancellation, many servers at once.

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use onceflow_engine::http::ServerConfig;
use onceflow_tests::server::TestServer;
use onceflow_tests::{metric, rules, wait_for};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// Registers `generate`'s contract: an object with a string `text`.
async fn register_text_contract(server: &TestServer) {
    let contract = server.api.post("/v1/worker/contracts", &server.tokens.worker, &json!({"activity": "generate",
        "output_schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}})).await;
    assert_eq!(contract.status, StatusCode::OK);
}

/// Submits `n` jobs for `primary-llm` and takes their attempts with one poll.
async fn started_attempts(server: &TestServer, n: usize) -> Vec<Value> {
    for i in 0..n {
        let reply = server
            .api
            .submit(
                &server.tokens.client,
                &format!("k{i}"),
                &json!({"activity": "generate", "providers": ["primary-llm"]}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED);
    }
    let tasks = server
        .api
        .poll(&server.tokens.worker, "primary-llm", 2000)
        .await;
    assert_eq!(tasks.len(), n);
    tasks
}

fn result_item(task: &Value, result: Value) -> Value {
    json!({"attempt_id": task["attempt_id"], "lease_token": task["lease_token"], "read_version": task["read_version"], "result": result})
}

async fn attempt_status(server: &TestServer, task: &Value) -> Value {
    let job = server
        .api
        .get(
            &format!("/v1/jobs/{}", task["job_id"].as_str().unwrap()),
            &server.tokens.operator,
        )
        .await;
    job.body["activities"][0]["attempts"][0]["status"].clone()
}

rules! {
    async fn a_long_poll_is_woken_as_soon_as_work_is_scheduled(db) {
        // No periodic re-check within the poll's wait: only the wake-up can deliver the task.
        let config = ServerConfig { poll_recheck: Duration::from_secs(600), ..ServerConfig::default() };
        let server = TestServer::start_with(db, config).await;
        let api = server.api.clone();
        let worker = server.tokens.worker.clone();
        let poll = tokio::spawn(async move { api.poll(&worker, "primary-llm", 30_000).await });
        // The poll found nothing and waits for work (the engine counts it as waiting).
        wait_for("the poll to wait for work", Duration::from_secs(10), || async {
            metric(&server.engine, "onceflow_long_polls_waiting").await == 1.0
        })
        .await;
        server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm"]})).await;
        let tasks = tokio::time::timeout(Duration::from_secs(25), poll).await.expect("the poll returned before its wait").unwrap();
        assert_eq!(tasks.len(), 1, "woken with the task, not at the end of wait_ms");
        assert_eq!(metric(&server.engine, "onceflow_long_polls_waiting").await, 0.0, "no longer waiting");
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

    async fn completions_sent_together_are_each_judged_as_if_sent_alone(db) {
        let server = TestServer::start(db).await;
        register_text_contract(&server).await;
        let t = started_attempts(&server, 4).await;
        let unknown = uuid::Uuid::now_v7();
        let sent = json!({"completions": [
            result_item(&t[0], json!({"text": "ok"})),
            {"attempt_id": t[1]["attempt_id"], "lease_token": uuid::Uuid::now_v7(), "result": {"text": "forged"}},
            result_item(&t[2], json!({"text": 7})),
            {"attempt_id": t[3]["attempt_id"], "lease_token": t[3]["lease_token"], "error": {"message": "down", "retryable": false}},
            {"attempt_id": unknown, "lease_token": t[0]["lease_token"], "result": {"text": "?"}},
            {"attempt_id": t[1]["attempt_id"], "lease_token": t[1]["lease_token"], "result": {"text": "x"}, "error": {"message": "both", "retryable": true}},
        ]});
        let reply = server.api.post("/v1/worker/completions", &server.tokens.worker, &sent).await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        let results = reply.body["results"].as_array().unwrap().clone();
        let ids: Vec<Value> = results.iter().map(|r| r["attempt_id"].clone()).collect();
        assert_eq!(ids, vec![t[0]["attempt_id"].clone(), t[1]["attempt_id"].clone(), t[2]["attempt_id"].clone(),
            t[3]["attempt_id"].clone(), json!(unknown), t[1]["attempt_id"].clone()], "one answer per completion, in order");
        assert_eq!(results[0]["outcome"], json!("won"));
        assert_eq!((results[1]["status"].clone(), results[1]["error"]["code"].clone()), (json!(409), json!("lease_lost")));
        assert_eq!((results[2]["status"].clone(), results[2]["error"]["code"].clone()), (json!(422), json!("contract_violation")));
        assert_eq!(results[3]["outcome"], json!("recorded"));
        assert_eq!((results[4]["status"].clone(), results[4]["error"]["code"].clone()), (json!(404), json!("not_found")));
        assert_eq!((results[5]["status"].clone(), results[5]["error"]["code"].clone()), (json!(400), json!("invalid_request")));

        // Each as the engine would have left it alone: the refused ones changed nothing.
        assert_eq!(attempt_status(&server, &t[0]).await, json!("succeeded"));
        assert_eq!(attempt_status(&server, &t[1]).await, json!("started"), "a forged token and a malformed body change nothing");
        assert_eq!(attempt_status(&server, &t[2]).await, json!("invalid"));
        assert_eq!(attempt_status(&server, &t[3]).await, json!("failed"));

        // Repeating answers what the first answered, here and on the single endpoint.
        let again = server.api.post("/v1/worker/completions", &server.tokens.worker, &json!({"completions": [result_item(&t[0], json!({"text": "ok"}))]})).await;
        assert_eq!(again.body["results"][0]["outcome"], json!("won"));
        let alone = server.api.post(&format!("/v1/worker/attempts/{}/complete", t[2]["attempt_id"].as_str().unwrap()), &server.tokens.worker,
            &json!({"lease_token": t[2]["lease_token"], "result": {"text": 7}})).await;
        assert_eq!((alone.status, alone.code()), (StatusCode::UNPROCESSABLE_ENTITY, "contract_violation"));

        // The request as a whole: 1 to 100 completions, a worker token.
        let none = server.api.post("/v1/worker/completions", &server.tokens.worker, &json!({"completions": []})).await;
        assert_eq!((none.status, none.code()), (StatusCode::BAD_REQUEST, "invalid_request"));
        let many: Vec<Value> = (0..101).map(|_| result_item(&t[1], json!({"text": "x"}))).collect();
        let too_many = server.api.post("/v1/worker/completions", &server.tokens.worker, &json!({"completions": many})).await;
        assert_eq!((too_many.status, too_many.code()), (StatusCode::BAD_REQUEST, "invalid_request"));
        assert_eq!(attempt_status(&server, &t[1]).await, json!("started"), "a refused request judged none of its completions");
        let client = server.api.post("/v1/worker/completions", &server.tokens.client, &json!({"completions": [result_item(&t[1], json!({"text": "x"}))]})).await;
        assert_eq!(client.status, StatusCode::FORBIDDEN);
        assert_eq!(attempt_status(&server, &t[1]).await, json!("started"));
    }

    async fn completions_carried_by_a_poll_are_answered_without_waiting_for_work(db) {
        let server = TestServer::start(db).await;
        let t = started_attempts(&server, 2).await;
        let poll = |max_tasks: u32, completions: Vec<Value>| json!({"worker_id": "w", "providers": [{"activity": "generate", "provider": "primary-llm"}],
            "max_tasks": max_tasks, "wait_ms": 30_000, "completions": completions});

        // A poll refused as a whole judges none of the completions it carries.
        let refused = server.api.post("/v1/worker/poll", &server.tokens.worker, &poll(0, vec![result_item(&t[0], json!({"text": "a"}))])).await;
        assert_eq!((refused.status, refused.code()), (StatusCode::BAD_REQUEST, "invalid_request"));
        assert_eq!(attempt_status(&server, &t[0]).await, json!("started"));

        // Nothing to hand out, yet the poll answers at once with the completions' answers.
        let carried = tokio::time::timeout(Duration::from_secs(10),
            server.api.post("/v1/worker/poll", &server.tokens.worker, &poll(5, vec![result_item(&t[0], json!({"text": "a"})), result_item(&t[0], json!({"text": "b"}))]))).await
            .expect("a poll carrying completions does not wait for work");
        assert_eq!(carried.status, StatusCode::OK, "{:?}", carried.body);
        assert_eq!(carried.body["tasks"], json!([]));
        assert_eq!(carried.body["completions"].as_array().unwrap().iter().map(|c| c["outcome"].clone()).collect::<Vec<_>>(),
            vec![json!("won"), json!("won")], "the same attempt twice: the repeat answers what the first answered");
        let job = server.api.get(&format!("/v1/jobs/{}", t[0]["job_id"].as_str().unwrap()), &server.tokens.client).await;
        assert_eq!((job.body["status"].clone(), job.body["result"].clone()), (json!("succeeded"), json!({"text": "a"})));

        // With work waiting, the same poll hands it out as well.
        server.api.submit(&server.tokens.client, "next", &json!({"activity": "generate", "providers": ["primary-llm"]})).await;
        let both = server.api.post("/v1/worker/poll", &server.tokens.worker, &poll(5, vec![result_item(&t[1], json!({"text": "c"}))])).await;
        assert_eq!(both.body["completions"][0]["outcome"], json!("won"));
        assert_eq!(both.body["tasks"].as_array().unwrap().len(), 1);
        // A poll without completions answers no `completions` member, as before.
        let plain = server.api.post("/v1/worker/poll", &server.tokens.worker, &json!({"worker_id": "w", "wait_ms": 0, "providers": [{"activity": "generate", "provider": "primary-llm"}]})).await;
        assert_eq!(plain.body, json!({"tasks": []}));
    }
}
