//! Client endpoints: submit (the double-click), read, list, cancel, manual attempts.

use futures::future::join_all;
use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::json;

fn llm(input: serde_json::Value) -> serde_json::Value {
    json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"], "input": input,
           "options": {"heartbeat_timeout_s": 1}})
}

rules! {
    async fn fifty_concurrent_identical_posts_answer_one_201_and_49_200_with_one_id(db) {
        let server = TestServer::start(db).await;
        let body = llm(json!({"prompt": "double click"}));
        let replies = join_all((0..50).map(|_| {
            let api = server.api.clone();
            let (token, body) = (server.tokens.client.clone(), body.clone());
            async move { api.submit(&token, "click-1", &body).await }
        }))
        .await;
        let created: Vec<_> = replies.iter().filter(|r| r.status == StatusCode::CREATED).collect();
        let replayed: Vec<_> = replies.iter().filter(|r| r.status == StatusCode::OK).collect();
        assert_eq!((created.len(), replayed.len()), (1, 49));
        let id = created[0].body["id"].as_str().unwrap().to_owned();
        assert!(replies.iter().all(|r| r.body["id"] == json!(id)), "one id for all fifty");
        assert_eq!(created[0].headers["location"], format!("/v1/jobs/{id}").as_str());
        assert!(created[0].headers.get("idempotent-replayed").is_none());
        assert!(replayed.iter().all(|r| r.headers["idempotent-replayed"] == "true"));
    }

    async fn a_reused_key_with_another_body_answers_409_naming_the_job(db) {
        let server = TestServer::start(db).await;
        let first = server.api.submit(&server.tokens.client, "k", &llm(json!({"amount": 1}))).await;
        assert_eq!(first.status, StatusCode::CREATED);
        let reused = server.api.submit(&server.tokens.client, "k", &llm(json!({"amount": 2}))).await;
        assert_eq!((reused.status, reused.code()), (StatusCode::CONFLICT, "idempotency_key_reused"));
        assert_eq!(reused.body["error"]["details"]["job_id"], first.body["id"]);
        let list = server.api.get("/v1/jobs", &server.tokens.client).await;
        assert_eq!(list.body["jobs"].as_array().unwrap().len(), 1, "nothing created");
        // Same intent spelled differently is a replay, not a conflict.
        let spelled = server
            .api
            .send_raw(Method::POST, "/v1/jobs", Some(&server.tokens.client), &[("Idempotency-Key", "k"), ("Content-Type", "text/plain")],
                br#"{ "options": {"heartbeat_timeout_s": 1.0}, "input": {"amount": 1.0}, "providers": ["primary-llm", "fallback-llm"], "activity": "generate" }"#.to_vec())
            .await;
        assert_eq!(spelled.status, StatusCode::OK);
    }

    async fn the_idempotency_key_header_is_required_and_checked(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens.client;
        let body = llm(json!({}));
        let missing = server.api.send(Method::POST, "/v1/jobs", Some(t), &[], Some(&body)).await;
        assert_eq!((missing.status, missing.code()), (StatusCode::BAD_REQUEST, "missing_idempotency_key"));
        let empty = server.api.submit(t, "", &body).await;
        assert_eq!(empty.code(), "missing_idempotency_key");
        for bad in ["has space", &"x".repeat(256)] {
            let reply = server.api.submit(t, bad, &body).await;
            assert_eq!((reply.status, reply.code()), (StatusCode::BAD_REQUEST, "invalid_idempotency_key"), "{bad}");
        }
        let bytes = server
            .api
            .send_raw(Method::POST, "/v1/jobs", Some(t), &[("Idempotency-Key", "caf\u{e9}")], serde_json::to_vec(&body).unwrap())
            .await;
        assert_eq!(bytes.code(), "invalid_idempotency_key");
        assert!(server.api.get("/v1/jobs", t).await.body["jobs"].as_array().unwrap().is_empty());
    }

    async fn missing_or_wrong_typed_fields_answer_400_naming_the_field(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens.client;
        for (body, field) in [
            (json!({"activity": "generate"}), "providers"),
            (json!({"activity": "generate", "providers": "primary"}), "providers"),
            (json!({"activity": "generate", "providers": ["p"], "options": {"retry": {"multiplier": "fast"}}}), "options.retry.multiplier"),
            (json!({"input": {}}), "workflow"),
            (json!({"workflow": 5}), "workflow"),
        ] {
            let reply = server.api.submit(t, "k", &body).await;
            assert_eq!((reply.status, reply.code()), (StatusCode::BAD_REQUEST, "invalid_request"), "{body}");
            assert!(reply.body["error"]["message"].as_str().unwrap().contains(field), "{body}: {:?}", reply.body);
            assert_eq!(reply.body["error"]["details"], json!({}));
        }
    }

    async fn jobs_are_read_listed_and_paged(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens.client;
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(server.api.submit(t, &format!("k{i}"), &llm(json!({"i": i}))).await.body["id"].as_str().unwrap().to_owned());
        }
        let job = server.api.get(&format!("/v1/jobs/{}", ids[0]), t).await;
        assert_eq!(job.status, StatusCode::OK);
        for field in ["id", "owner", "idempotency_key", "kind", "workflow", "activity", "task_queue", "input", "status",
                      "version", "result", "error", "created_at", "updated_at", "finished_at", "activities"] {
            assert!(job.body.get(field).is_some(), "job field {field}");
        }
        let attempt = &job.body["activities"][0]["attempts"][0];
        for field in ["id", "number", "provider", "status", "created_at", "started_at", "heartbeat_at", "lease_expires_at",
                      "finished_at", "error", "cancelled_by", "cancel_reason"] {
            assert!(attempt.get(field).is_some(), "attempt field {field}");
        }
        let page = server.api.get("/v1/jobs?limit=2", t).await;
        assert_eq!(page.body["jobs"].as_array().unwrap().len(), 2);
        assert_eq!(page.body["jobs"][0]["id"], json!(ids[2]), "newest first");
        let next = page.body["next"].as_str().unwrap();
        let rest = server.api.get(&format!("/v1/jobs?limit=2&after={next}"), t).await;
        assert_eq!(rest.body["jobs"][0]["id"], json!(ids[0]));
        assert_eq!(rest.body["next"], json!(null));
        assert_eq!(server.api.get("/v1/jobs?limit=0", t).await.code(), "invalid_request");
        assert_eq!(server.api.get("/v1/jobs?limit=many", t).await.code(), "invalid_request");
        assert_eq!(server.api.get("/v1/jobs?status=bogus", t).await.code(), "invalid_request");
        let events = server.api.get(&format!("/v1/jobs/{}/events", ids[0]), t).await;
        assert_eq!(events.body["events"][0]["type"], json!("job_created"));
        assert_eq!(events.body["events"][0]["seq"], json!(1));
        let unknown = server.api.get(&format!("/v1/jobs/{}", uuid::Uuid::now_v7()), t).await;
        assert_eq!((unknown.status, unknown.code()), (StatusCode::NOT_FOUND, "not_found"));
        assert_eq!(server.api.get("/v1/jobs/not-a-uuid", t).await.code(), "not_found");
    }

    async fn cancelling_a_job_answers_202_and_a_finished_job_409(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens.client;
        let id = server.api.submit(t, "k", &llm(json!({}))).await.body["id"].as_str().unwrap().to_owned();
        for _ in 0..2 {
            let reply = server.api.send(Method::POST, &format!("/v1/jobs/{id}/cancel"), Some(t), &[], None).await;
            assert_eq!(reply.status, StatusCode::ACCEPTED);
            assert_eq!(reply.body["status"], json!("cancelled"));
        }
        let manual = server.api.post(&format!("/v1/jobs/{id}/activities/0/attempts"), t, &json!({"provider": "primary-llm"})).await;
        assert_eq!((manual.status, manual.code()), (StatusCode::CONFLICT, "activity_completed"));

        let done = server.api.submit(t, "done", &llm(json!({}))).await.body["id"].as_str().unwrap().to_owned();
        let task = server.api.poll(&server.tokens.worker, "primary-llm", 1000).await.remove(0);
        let won = server.api.post(&format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap()), &server.tokens.worker,
            &json!({"lease_token": task["lease_token"], "read_version": task["read_version"], "result": {"text": "ok"}})).await;
        assert_eq!(won.body["outcome"], json!("won"));
        let finished = server.api.send(Method::POST, &format!("/v1/jobs/{done}/cancel"), Some(t), &[], None).await;
        assert_eq!((finished.status, finished.code()), (StatusCode::CONFLICT, "job_finished"));
    }

    async fn manual_attempts_answer_201_or_the_409_of_api_md(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens.client;
        let body = json!({"activity": "generate", "providers": ["primary-llm", "fallback-llm"], "input": {},
                          "options": {"failover": "manual"}});
        let id = server.api.submit(t, "k", &body).await.body["id"].as_str().unwrap().to_owned();
        let path = format!("/v1/jobs/{id}/activities/0/attempts");
        let in_flight = server.api.post(&path, t, &json!({"provider": "fallback-llm"})).await;
        assert_eq!((in_flight.status, in_flight.code()), (StatusCode::CONFLICT, "attempt_in_flight"));
        assert_eq!(in_flight.body["error"]["details"]["status"], json!("scheduled"));
        assert!(in_flight.body["error"]["details"]["attempt_id"].is_string());

        let task = server.api.poll(&server.tokens.worker, "primary-llm", 1000).await.remove(0);
        server.api.post(&format!("/v1/worker/attempts/{}/complete", task["attempt_id"].as_str().unwrap()), &server.tokens.worker,
            &json!({"lease_token": task["lease_token"], "error": {"message": "down", "retryable": false}})).await;
        let uncertified = server.api.post(&path, t, &json!({"provider": "fallback-llm"})).await;
        assert_eq!((uncertified.status, uncertified.code()), (StatusCode::CONFLICT, "provider_not_certified"));
        let missing = server.api.post(&path, t, &json!({})).await;
        assert_eq!(missing.code(), "invalid_request");
        let created = server.api.post(&path, t, &json!({"provider": "primary-llm"})).await;
        assert_eq!(created.status, StatusCode::CREATED);
        assert_eq!((created.body["number"].clone(), created.body["status"].clone()), (json!(2), json!("scheduled")));
        let wrong_seq = server.api.post(&format!("/v1/jobs/{id}/activities/x/attempts"), t, &json!({"provider": "primary-llm"})).await;
        assert_eq!(wrong_seq.code(), "not_found");
    }
}
