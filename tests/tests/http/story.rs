//! The seed's story, over HTTP only: as a client in any language would live it.

use std::time::Duration;

use onceflow_tests::server::TestServer;
use onceflow_tests::{rules, wait_for};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn register_and_certify(server: &TestServer, provider: &str) -> String {
    let w = &server.tokens.worker;
    let contract = server.api.post("/v1/worker/contracts", w, &json!({"activity": "generate",
        "output_schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}})).await;
    assert_eq!(contract.status, StatusCode::OK);
    let hash = contract.body["contract_hash"].as_str().unwrap().to_owned();
    let cert = server
        .api
        .post(
            "/v1/worker/certifications",
            w,
            &json!({"activity": "generate", "provider": provider,
        "contract_hash": hash, "passed": true, "report": {"cases": 2}}),
        )
        .await;
    assert_eq!(cert.status, StatusCode::CREATED);
    hash
}

fn complete_body(task: &Value, result: Value) -> Value {
    json!({"lease_token": task["lease_token"], "read_version": task["read_version"], "result": result})
}

rules! {
    async fn timeout_unknown_operator_cancel_failover_and_reverse_order_finish(db) {
        let server = TestServer::start(db).await;
        let (client, worker, operator) = (&server.tokens.client, &server.tokens.worker, &server.tokens.operator);
        register_and_certify(&server, "fallback-llm").await;
        let job = server.api.submit(client, "click", &json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"],
            "input": {"prompt": "haiku"}, "options": {"heartbeat_timeout_s": 1}})).await;
        let id = job.body["id"].as_str().unwrap().to_owned();

        // The primary takes the attempt and goes silent; the server's reaper marks it unknown.
        let a = server.api.poll(worker, "primary-llm", 5000).await.remove(0);
        let a_id = a["attempt_id"].as_str().unwrap().to_owned();
        wait_for("the attempt to become unknown", Duration::from_secs(10), || async {
            server.api.get(&format!("/v1/jobs/{id}"), client).await.body["activities"][0]["attempts"][0]["status"] == json!("unknown")
        }).await;
        let blocked = server.api.get(&format!("/v1/jobs/{id}"), client).await;
        assert_eq!(blocked.body["activities"][0]["status"], json!("blocked"));

        // "Use fallback" is refused while the primary might still be working.
        let refused = server.api.post(&format!("/v1/jobs/{id}/activities/0/attempts"), client, &json!({"provider": "fallback-llm"})).await;
        assert_eq!((refused.status, refused.code()), (StatusCode::CONFLICT, "attempt_in_flight"));
        assert_eq!(refused.body["error"]["details"]["attempt_id"], json!(a_id));

        // The operator finds it and cancels it with a reason.
        let stuck = server.api.get("/v1/attempts?status=unknown&older_than_s=0", operator).await;
        assert!(stuck.body["attempts"].as_array().unwrap().iter().any(|s| s["id"] == json!(a_id) && s["job_id"] == json!(id) && s["owner"] == json!("alice")));
        let no_reason = server.api.post(&format!("/v1/attempts/{a_id}/cancel"), operator, &json!({})).await;
        assert_eq!((no_reason.status, no_reason.code()), (StatusCode::BAD_REQUEST, "invalid_request"));
        let cancelled = server.api.post(&format!("/v1/attempts/{a_id}/cancel"), operator, &json!({"reason": "provider confirmed no request"})).await;
        assert_eq!(cancelled.status, StatusCode::OK);
        assert_eq!((cancelled.body["status"].clone(), cancelled.body["cancelled_by"].clone()), (json!("cancelled"), json!("ops")));

        // Failover to the certified fallback; it returns first and wins.
        let b = server.api.poll(worker, "fallback-llm", 5000).await.remove(0);
        assert_eq!(b["attempt_number"], json!(2));
        assert_eq!(b["idempotency_key"], a["idempotency_key"]);
        let b_done = server.api.post(&format!("/v1/worker/attempts/{}/complete", b["attempt_id"].as_str().unwrap()), worker,
            &complete_body(&b, json!({"text": "fallback"}))).await;
        assert_eq!(b_done.body, json!({"outcome": "won"}));
        // The primary's late answer, with its own (still valid) lease token, loses.
        let a_done = server.api.post(&format!("/v1/worker/attempts/{a_id}/complete"), worker, &complete_body(&a, json!({"text": "primary"}))).await;
        assert_eq!((a_done.status, a_done.body.clone()), (StatusCode::OK, json!({"outcome": "lost"})));
        let again = server.api.post(&format!("/v1/worker/attempts/{a_id}/complete"), worker, &complete_body(&a, json!({"text": "primary"}))).await;
        assert_eq!(again.body, json!({"outcome": "lost"}), "a repeat answers the same");

        let done = server.api.get(&format!("/v1/jobs/{id}"), client).await;
        assert_eq!(done.body["status"], json!("succeeded"));
        assert_eq!(done.body["result"], json!({"text": "fallback"}));
        let events = server.api.get(&format!("/v1/jobs/{id}/events"), client).await;
        let types: Vec<_> = events.body["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect();
        for expected in ["job_created", "attempt_started", "attempt_heartbeat_lost", "attempt_cancelled", "failover", "attempt_succeeded", "job_succeeded", "race_lost"] {
            assert!(types.contains(&expected.to_owned()), "{expected} in {types:?}");
        }
        let not_cancellable = server.api.post(&format!("/v1/attempts/{}/cancel", b["attempt_id"].as_str().unwrap()), operator, &json!({"reason": "late"})).await;
        assert_eq!((not_cancellable.status, not_cancellable.code()), (StatusCode::CONFLICT, "attempt_not_cancellable"));
    }

    async fn a_wrong_lease_token_answers_409_lease_lost(db) {
        let server = TestServer::start(db).await;
        let w = &server.tokens.worker;
        server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm"]})).await;
        let task = server.api.poll(w, "primary-llm", 2000).await.remove(0);
        let id = task["attempt_id"].as_str().unwrap();
        let forged = json!({"lease_token": uuid::Uuid::new_v4(), "result": {"text": "x"}});
        let reply = server.api.post(&format!("/v1/worker/attempts/{id}/complete"), w, &forged).await;
        assert_eq!((reply.status, reply.code()), (StatusCode::CONFLICT, "lease_lost"));
        let hb = server.api.post(&format!("/v1/worker/attempts/{id}/heartbeat"), w, &json!({"lease_token": uuid::Uuid::new_v4()})).await;
        assert_eq!((hb.status, hb.code()), (StatusCode::CONFLICT, "lease_lost"));
        let ok = server.api.post(&format!("/v1/worker/attempts/{id}/heartbeat"), w, &json!({"lease_token": task["lease_token"], "details": {"pct": 50}})).await;
        assert_eq!((ok.status, ok.body.clone()), (StatusCode::OK, json!({"cancel_requested": false})));
        let unknown = server.api.post(&format!("/v1/worker/attempts/{}/heartbeat", uuid::Uuid::now_v7()), w, &json!({"lease_token": task["lease_token"]})).await;
        assert_eq!((unknown.status, unknown.code()), (StatusCode::NOT_FOUND, "not_found"));
        let both = server.api.post(&format!("/v1/worker/attempts/{id}/complete"), w,
            &json!({"lease_token": task["lease_token"], "result": {}, "error": {"message": "x"}})).await;
        assert_eq!(both.code(), "invalid_request");
    }

    async fn a_result_violating_the_contract_answers_422_every_time(db) {
        let server = TestServer::start(db).await;
        let w = &server.tokens.worker;
        register_and_certify(&server, "fallback-llm").await;
        let id = server.api.submit(&server.tokens.client, "k", &json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"]})).await
            .body["id"].as_str().unwrap().to_owned();
        let task = server.api.poll(w, "primary-llm", 2000).await.remove(0);
        let path = format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap());
        for _ in 0..2 {
            let reply = server.api.post(&path, w, &complete_body(&task, json!({"txt": 1}))).await;
            assert_eq!((reply.status, reply.code()), (StatusCode::UNPROCESSABLE_ENTITY, "contract_violation"));
            assert!(!reply.body["error"]["details"]["errors"].as_array().unwrap().is_empty());
        }
        let job = server.api.get(&format!("/v1/jobs/{id}"), &server.tokens.client).await;
        assert_eq!(job.body["activities"][0]["attempts"][0]["status"], json!("invalid"));
        assert_eq!(job.body["activities"][0]["attempts"][1]["provider"], json!("fallback-llm"));
        let bad_schema = server.api.post("/v1/worker/contracts", w, &json!({"activity": "generate", "output_schema": {"type": 12}})).await;
        assert_eq!(bad_schema.code(), "invalid_request");
    }
}
