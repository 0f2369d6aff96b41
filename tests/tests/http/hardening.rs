//! Any bytes in (docs/api.md, Conventions): text holding U+0000 anywhere, numbers out of range,
//! opaque lease tokens, bounded provider lists and paged events. Bad input gets a clear
//! error naming the field and changes nothing; a worker's answer that cannot be stored
//! ends its attempt instead of wedging it. Never a 500.

use onceflow_tests::rules;
use onceflow_tests::server::{Reply, TestServer};
use onceflow_tests::TestDb;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// Every row the engine keeps, counted: nothing may change when a request is refused.
async fn rows(db: &TestDb) -> i64 {
    db.count(
        "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM activities) + (SELECT count(*) FROM attempts)
              + (SELECT count(*) FROM job_events) + (SELECT count(*) FROM contracts) + (SELECT count(*) FROM certifications)
              + (SELECT count(*) FROM schedules) + (SELECT count(*) FROM api_tokens)",
    )
    .await
}

fn assert_refused(reply: &Reply, status: StatusCode, code: &str, naming: &str, what: &str) {
    assert_eq!(reply.status, status, "{what}: {:?}", reply.body);
    assert_eq!(reply.code(), code, "{what}: {:?}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(naming),
        "{what}: the message names `{naming}`: {message}"
    );
}

/// Submits an activity job on its own task queue and takes its first attempt.
async fn started(server: &TestServer, key: &str, options: Value) -> Value {
    let reply = server
        .api
        .submit(
            &server.tokens.client,
            key,
            &json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"],
            "task_queue": key, "options": options}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
    let poll = server
        .api
        .post(
            "/v1/worker/poll",
            &server.tokens.worker,
            &json!({"worker_id": "w1", "task_queue": key,
            "providers": [{"activity": "generate", "provider": "primary-llm"}], "wait_ms": 2000}),
        )
        .await;
    let task = poll.body["tasks"][0].clone();
    assert!(task.is_object(), "a task: {:?}", poll.body);
    task
}

async fn job(server: &TestServer, job_id: &Value) -> Value {
    let reply = server
        .api
        .get(
            &format!("/v1/jobs/{}", job_id.as_str().unwrap_or_default()),
            &server.tokens.operator,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    reply.body
}

rules! {
    async fn text_holding_nul_anywhere_in_a_request_is_refused_naming_the_field_and_changes_nothing(db) {
        let server = TestServer::start(db).await;
        let t = server.tokens.clone();
        let before = rows(db).await;
        let plain = json!({"activity": "generate", "providers": ["primary-llm"]});
        let cases: Vec<(Method, &str, &str, Value, &str)> = vec![
            (Method::POST, "/v1/jobs", &t.client, json!({"activity": "generate", "providers": ["primary-llm"], "input": {"a": "x\u{0}y"}}), "input.a"),
            (Method::POST, "/v1/jobs", &t.client, json!({"activity": "generate", "providers": ["primary-llm"], "input": {"k\u{0}": 1}}), "input.k\\u0000"),
            (Method::POST, "/v1/jobs", &t.client, json!({"activity": "gen\u{0}", "providers": ["primary-llm"]}), "activity"),
            (Method::POST, "/v1/jobs", &t.client, json!({"activity": "generate", "providers": ["p\u{0}"]}), "providers[0]"),
            (Method::POST, "/v1/jobs", &t.client, json!({"activity": "generate", "providers": ["p"], "task_queue": "q\u{0}"}), "task_queue"),
            (Method::POST, "/v1/jobs", &t.client, json!({"workflow": "w\u{0}"}), "workflow"),
            (Method::POST, "/v1/worker/poll", &t.worker, json!({"worker_id": "w\u{0}", "providers": [{"activity": "generate", "provider": "p"}]}), "worker_id"),
            (Method::POST, "/v1/worker/poll", &t.worker, json!({"worker_id": "w", "task_queue": "q\u{0}", "providers": [{"activity": "generate", "provider": "p"}]}), "task_queue"),
            (Method::POST, "/v1/worker/poll", &t.worker, json!({"worker_id": "w", "providers": [{"activity": "gen\u{0}", "provider": "p"}]}), "providers[0].activity"),
            (Method::POST, "/v1/worker/contracts", &t.worker, json!({"activity": "gen\u{0}", "output_schema": {"type": "object"}}), "activity"),
            (Method::POST, "/v1/worker/contracts", &t.worker, json!({"activity": "generate", "output_schema": {"type": "object", "description": "\u{0}"}}), "output_schema.description"),
            (Method::POST, "/v1/worker/certifications", &t.worker, json!({"activity": "generate", "provider": "p\u{0}", "contract_hash": "x", "passed": true}), "provider"),
            (Method::POST, "/v1/worker/certifications", &t.worker, json!({"activity": "generate", "provider": "p", "contract_hash": "x\u{0}", "passed": true}), "contract_hash"),
            (Method::PUT, "/v1/schedules/nightly", &t.client, json!({"cron": "0 0 * * * *", "job": {"activity": "generate", "providers": ["p"], "input": "\u{0}"}}), "job.input"),
            (Method::POST, "/v1/tokens", &t.admin, json!({"owner": "carol\u{0}", "role": "client"}), "owner"),
        ];
        for (i, (method, path, token, body, field)) in cases.into_iter().enumerate() {
            let key = format!("nul-{i}");
            let reply = server.api.send(method.clone(), path, Some(token), &[("Idempotency-Key", &key)], Some(&body)).await;
            assert_refused(&reply, StatusCode::BAD_REQUEST, "invalid_request", field, &format!("{method} {path} {body}"));
        }
        for query in ["workflow=%00", "activity=a%00", "owner=%00", "status=%00", "after=%00", "x%00=1"] {
            let reply = server.api.get(&format!("/v1/jobs?{query}"), &t.operator).await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}: {:?}", reply.body);
            assert_eq!(reply.code(), "invalid_request", "{query}");
        }
        let reply = server.api.get("/v1/attempts?status=unknown%00", &t.operator).await;
        assert_refused(&reply, StatusCode::BAD_REQUEST, "invalid_request", "status", "a NUL in a stuck-attempts filter");
        // A key of any other bytes than visible ASCII is the key's own error.
        let reply = server.api.send_raw(Method::POST, "/v1/jobs", Some(&t.client), &[("Idempotency-Key", "clé")], serde_json::to_vec(&plain).unwrap_or_default()).await;
        assert_eq!(reply.code(), "invalid_idempotency_key");
        assert_eq!(rows(db).await, before, "a refused request changes nothing");
        // Any other Unicode is stored exactly as sent.
        let input = json!({"text": "é ✓ 🦀 \u{1}\u{7f}\u{fffd}", "ключ ✓": ["\u{200b}"]});
        let reply = server.api.submit(&t.client, "unicode", &json!({"activity": "generate", "providers": ["primary-llm"], "input": input})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        assert_eq!(job(&server, &reply.body["id"]).await["input"], input);
    }

    async fn a_result_or_error_holding_nul_ends_its_attempt_invalid_with_422_and_the_policy_moves_on(db) {
        let server = TestServer::start(db).await;
        let t = server.tokens.clone();
        let retry = json!({"retry": {"max_attempts_per_provider": 3, "initial_backoff_ms": 0, "max_backoff_ms": 0}});
        // The fallback may take over (failover needs a certification).
        let contract = server.api.post("/v1/worker/contracts", &t.worker, &json!({"activity": "generate", "output_schema": {"type": "object"}})).await;
        let certified = server.api.post("/v1/worker/certifications", &t.worker, &json!({"activity": "generate", "provider": "fallback-llm",
            "contract_hash": contract.body["contract_hash"], "passed": true})).await;
        assert!(certified.status.is_success(), "{:?}", certified.body);
        // Alone: 422 invalid_result, the attempt invalid, the fallback scheduled (as after a
        // contract violation); a repeat answers the same.
        let task = started(&server, "single", retry.clone()).await;
        let path = format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap_or_default());
        let body = json!({"lease_token": task["lease_token"], "result": {"text": "model output\u{0}"}});
        for _ in 0..2 {
            let reply = server.api.post(&path, &t.worker, &body).await;
            assert_refused(&reply, StatusCode::UNPROCESSABLE_ENTITY, "invalid_result", "result.text", "a result holding NUL");
        }
        let view = job(&server, &task["job_id"]).await;
        let attempts = view["activities"][0]["attempts"].as_array().cloned().unwrap_or_default();
        assert_eq!(attempts[0]["status"], "invalid", "{view}");
        assert_eq!(attempts[0]["error"]["code"], "invalid_result");
        assert_eq!(attempts.len(), 2, "the retry policy moved on: {view}");
        assert_eq!((attempts[1]["provider"].as_str(), attempts[1]["status"].as_str()), (Some("fallback-llm"), Some("scheduled")));
        // An error holding NUL, in a batch beside a good result: each judged on its own.
        let bad = started(&server, "batch-bad", retry.clone()).await;
        let good = started(&server, "batch-good", retry.clone()).await;
        let reply = server.api.post("/v1/worker/completions", &t.worker, &json!({"completions": [
            {"attempt_id": bad["attempt_id"], "lease_token": bad["lease_token"], "error": {"message": "boom\u{0}", "retryable": true}},
            {"attempt_id": good["attempt_id"], "lease_token": good["lease_token"], "result": {"text": "fine"}},
        ]})).await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        assert_eq!(reply.body["results"][0]["status"], 422, "{:?}", reply.body);
        assert_eq!(reply.body["results"][0]["error"]["code"], "invalid_result");
        assert_eq!(reply.body["results"][1]["outcome"], "won");
        assert_eq!(job(&server, &bad["job_id"]).await["activities"][0]["attempts"][0]["status"], "invalid");
        // Carried by a poll: the same judgement.
        let carried = started(&server, "carried", retry).await;
        let reply = server.api.post("/v1/worker/poll", &t.worker, &json!({"worker_id": "w1", "task_queue": "carried",
            "providers": [{"activity": "generate", "provider": "primary-llm"}], "completions": [
            {"attempt_id": carried["attempt_id"], "lease_token": carried["lease_token"], "result": {"\u{0}": 1}}]})).await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        assert_eq!(reply.body["completions"][0]["error"]["code"], "invalid_result", "{:?}", reply.body);
        assert_eq!(job(&server, &carried["job_id"]).await["activities"][0]["attempts"][0]["status"], "invalid");
    }

    async fn a_malformed_lease_token_is_lease_lost_and_an_unknown_attempt_not_found(db) {
        let server = TestServer::start(db).await;
        let t = server.tokens.clone();
        let task = started(&server, "tokens", json!({})).await;
        let attempt = task["attempt_id"].as_str().unwrap_or_default().to_owned();
        let missing = "01a25053-776b-710d-ac38-b7f1dcd6e806";
        for token in ["not-a-uuid", "", "\u{0}", "00000000-0000-0000-0000-000000000000", "🦀"] {
            for (path, body) in [
                ("heartbeat", json!({"lease_token": token})),
                ("complete", json!({"lease_token": token, "result": {"text": "x"}})),
            ] {
                let reply = server.api.post(&format!("/v1/worker/attempts/{attempt}/{path}"), &t.worker, &body).await;
                assert_eq!((reply.status, reply.code()), (StatusCode::CONFLICT, "lease_lost"), "{path} with {token:?}: {:?}", reply.body);
                let reply = server.api.post(&format!("/v1/worker/attempts/{missing}/{path}"), &t.worker, &body).await;
                assert_eq!((reply.status, reply.code()), (StatusCode::NOT_FOUND, "not_found"), "{path} of no attempt with {token:?}");
            }
            let reply = server.api.post("/v1/worker/completions", &t.worker, &json!({"completions": [
                {"attempt_id": attempt, "lease_token": token, "result": {"text": "x"}}]})).await;
            assert_eq!(reply.body["results"][0]["error"]["code"], "lease_lost", "{token:?}: {:?}", reply.body);
        }
        // The holder still holds it.
        let reply = server.api.post(&format!("/v1/worker/attempts/{attempt}/complete"), &t.worker,
            &json!({"lease_token": task["lease_token"], "result": {"text": "x"}})).await;
        assert_eq!(reply.body["outcome"], "won", "{:?}", reply.body);
    }

    async fn numbers_out_of_range_are_refused_naming_the_field(db) {
        let server = TestServer::start(db).await;
        let t = server.tokens.clone();
        let huge = "9223372036854775807";
        let too_big = "99999999999999999999999";
        for (path, token, field) in [
            (format!("/v1/attempts?older_than_s={huge}"), &t.operator, "older_than_s"),
            (format!("/v1/attempts?older_than_s={too_big}"), &t.operator, "older_than_s"),
            (format!("/v1/attempts?limit={huge}"), &t.operator, "limit"),
            (format!("/v1/jobs?limit={huge}"), &t.client, "limit"),
            ("/v1/jobs?limit=-1".to_owned(), &t.client, "limit"),
            (format!("/v1/jobs/01a25053-776b-710d-ac38-b7f1dcd6e806/events?limit={huge}"), &t.client, "limit"),
            (format!("/v1/jobs/01a25053-776b-710d-ac38-b7f1dcd6e806/events?after_seq={huge}0"), &t.client, "after_seq"),
        ] {
            let reply = server.api.get(&path, token).await;
            assert_refused(&reply, StatusCode::BAD_REQUEST, "invalid_request", field, &path);
        }
        let u64_max = u64::MAX;
        for (options, field) in [
            (json!({"heartbeat_timeout_s": u64_max}), "options.heartbeat_timeout_s"),
            (json!({"start_to_close_timeout_s": 1e300}), "options.start_to_close_timeout_s"),
            (json!({"schedule_to_start_timeout_s": -1}), "options.schedule_to_start_timeout_s"),
            (json!({"retry": {"max_backoff_ms": u64_max}}), "options.retry.max_backoff_ms"),
            (json!({"retry": {"max_attempts_per_provider": u64_max}}), "options.retry.max_attempts_per_provider"),
            (json!({"retry": {"multiplier": 1e308}}), "options.retry.multiplier"),
        ] {
            let reply = server.api.submit(&t.client, "numbers", &json!({"activity": "generate", "providers": ["p"], "options": options})).await;
            assert_refused(&reply, StatusCode::BAD_REQUEST, "invalid_request", field, &options.to_string());
        }
        for (body, field) in [
            (json!({"worker_id": "w", "providers": [{"activity": "a", "provider": "p"}], "wait_ms": u64_max}), "wait_ms"),
            (json!({"worker_id": "w", "providers": [{"activity": "a", "provider": "p"}], "max_tasks": u64_max}), "max_tasks"),
        ] {
            let reply = server.api.post("/v1/worker/poll", &t.worker, &body).await;
            assert_refused(&reply, StatusCode::BAD_REQUEST, "invalid_request", field, &body.to_string());
        }
    }

    async fn providers_hold_one_to_thirty_two_distinct_names(db) {
        let server = TestServer::start(db).await;
        let t = server.tokens.clone();
        let names = |n: usize| (0..n).map(|i| format!("provider-{i}")).collect::<Vec<_>>();
        let reply = server.api.submit(&t.client, "thirty-two", &json!({"activity": "generate", "providers": names(32)})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{:?}", reply.body);
        let before = rows(db).await;
        for (key, providers) in [
            ("none", json!([])),
            ("thirty-three", json!(names(33))),
            ("ten-thousand", json!(names(10_000))),
            ("twice", json!(["a", "b", "a"])),
        ] {
            let reply = server.api.submit(&t.client, key, &json!({"activity": "generate", "providers": providers})).await;
            assert_refused(&reply, StatusCode::BAD_REQUEST, "invalid_request", "providers", key);
        }
        assert_eq!(rows(db).await, before, "nothing was created");
    }

    async fn job_events_come_in_pages_after_a_seq(db) {
        let server = TestServer::start(db).await;
        let t = server.tokens.clone();
        let body = json!({"activity": "generate", "providers": ["primary-llm"]});
        let created = server.api.submit(&t.client, "paged", &body).await;
        for _ in 0..4 {
            server.api.submit(&t.client, "paged", &body).await; // each replay appends an event
        }
        let id = created.body["id"].as_str().unwrap_or_default().to_owned();
        let whole = server.api.get(&format!("/v1/jobs/{id}/events"), &t.client).await;
        assert_eq!(whole.status, StatusCode::OK);
        let all: Vec<i64> = whole.body["events"].as_array().unwrap_or(&Vec::new()).iter().filter_map(|e| e["seq"].as_i64()).collect();
        assert!(all.len() >= 6, "created, scheduled and four replays: {all:?}");
        assert_eq!(whole.body["next"], Value::Null, "one page holds them all by default");
        let mut paged: Vec<i64> = Vec::new();
        let mut after = 0;
        loop {
            let page = server.api.get(&format!("/v1/jobs/{id}/events?limit=2&after_seq={after}"), &t.client).await;
            assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
            let seqs: Vec<i64> = page.body["events"].as_array().unwrap_or(&Vec::new()).iter().filter_map(|e| e["seq"].as_i64()).collect();
            assert!(seqs.len() <= 2);
            paged.extend(&seqs);
            match page.body["next"].as_i64() {
                Some(next) => {
                    assert_eq!(Some(&next), seqs.last(), "next is the page's last seq");
                    after = next;
                }
                None => break,
            }
        }
        assert_eq!(paged, all, "the pages are the history, in order, each event once");
        for limit in ["0", "1001"] {
            let reply = server.api.get(&format!("/v1/jobs/{id}/events?limit={limit}"), &t.client).await;
            assert_refused(&reply, StatusCode::BAD_REQUEST, "invalid_request", "limit", limit);
        }
        let reply = server.api.get(&format!("/v1/jobs/{id}/events"), &t.bob).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "another owner's job is not found");
    }

    async fn a_workflow_command_holding_nul_parks_the_workflow_instead_of_failing_for_ever(db) {
        let server = TestServer::start(db).await;
        let t = server.tokens.clone();
        let created = server.api.submit(&t.client, "wf-nul", &json!({"workflow": "summarize", "input": {}})).await;
        assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
        let poll = server.api.post("/v1/worker/poll", &t.worker, &json!({"worker_id": "w1", "providers": [],
            "workflows": ["summarize"], "wait_ms": 2000})).await;
        let task = poll.body["tasks"][0].clone();
        assert_eq!(task["kind"], "workflow", "{:?}", poll.body);
        let reply = server.api.post(&format!("/v1/worker/workflow-tasks/{}/complete", task["job_id"].as_str().unwrap_or_default()), &t.worker,
            &json!({"lease_token": task["lease_token"], "read_version": task["read_version"],
                    "commands": [{"type": "complete_job", "result": {"summary": "\u{0}"}}]})).await;
        assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
        let view = job(&server, &created.body["id"]).await;
        assert_eq!(view["status"], "running", "parked, not closed: {view}");
        let events = server.api.get(&format!("/v1/jobs/{}/events", created.body["id"].as_str().unwrap_or_default()), &t.client).await;
        let failed = events.body["events"].as_array().cloned().unwrap_or_default().into_iter()
            .find(|e| e["type"] == "workflow_task_failed").expect("the task's failure is recorded");
        assert_eq!(failed["data"]["error"]["code"], "invalid_result", "{failed}");
        assert!(failed["data"]["error"]["message"].as_str().unwrap_or_default().contains("commands[0].result.summary"), "{failed}");
    }
}
