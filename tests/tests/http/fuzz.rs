//! Malformed input to every endpoint never answers 5xx, and always answers a JSON error.

use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use reqwest::Method;
use serde_json::{json, Value};

/// A small deterministic generator, so that a failure can be replayed.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }

    /// A random JSON value of bounded depth, with the field names the API uses.
    fn value(&mut self, depth: u32) -> Value {
        const KEYS: [&str; 16] = [
            "activity",
            "workflow",
            "providers",
            "input",
            "options",
            "retry",
            "lease_token",
            "result",
            "error",
            "reason",
            "provider",
            "worker_id",
            "wait_ms",
            "max_tasks",
            "output_schema",
            "owner",
        ];
        match self.next() % if depth == 0 { 6 } else { 8 } {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64),
            3 => json!(-(self.next() as f64) / 3.0),
            4 => json!(
                [
                    "",
                    "primary-llm",
                    "\u{0}",
                    "é",
                    "00000000-0000-0000-0000-000000000000",
                    "manual"
                ][(self.next() % 6) as usize]
            ),
            5 => json!(u64::MAX),
            6 => Value::Array(
                (0..self.next() % 4)
                    .map(|_| self.value(depth - 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..self.next() % 5)
                    .map(|_| (self.pick(&KEYS).to_string(), self.value(depth - 1)))
                    .collect(),
            ),
        }
    }
}

rules! {
    async fn malformed_bodies_to_every_endpoint_never_answer_5xx(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens;
        // Real ids, so that malformed bodies reach the handlers behind the id checks.
        let job = server.api.submit(&t.client, "k", &json!({"activity": "generate", "providers": ["primary-llm"]})).await;
        let job_id = job.body["id"].as_str().unwrap().to_owned();
        let task = server.api.poll(&t.worker, "primary-llm", 2000).await.remove(0);
        let attempt_id = task["attempt_id"].as_str().unwrap().to_owned();
        let endpoints: Vec<(Method, String, &str)> = vec![
            (Method::POST, "/v1/jobs".into(), &t.client),
            (Method::GET, format!("/v1/jobs/{job_id}"), &t.client),
            (Method::GET, "/v1/jobs?limit=-1&after=%zz&status=%00".into(), &t.client),
            (Method::GET, format!("/v1/jobs/{job_id}/events"), &t.client),
            (Method::POST, format!("/v1/jobs/{job_id}/cancel"), &t.bob),
            (Method::POST, format!("/v1/jobs/{job_id}/activities/0/attempts"), &t.client),
            (Method::POST, format!("/v1/jobs/{job_id}/activities/99999999999/attempts"), &t.client),
            (Method::POST, "/v1/worker/poll".into(), &t.worker),
            (Method::POST, format!("/v1/worker/attempts/{attempt_id}/heartbeat"), &t.worker),
            (Method::POST, format!("/v1/worker/attempts/{attempt_id}/complete"), &t.worker),
            (Method::POST, "/v1/worker/completions".into(), &t.worker),
            (Method::POST, "/v1/worker/contracts".into(), &t.worker),
            (Method::POST, "/v1/worker/certifications".into(), &t.worker),
            (Method::GET, "/v1/attempts?status=,,,&older_than_s=99999999999999999999".into(), &t.operator),
            (Method::POST, format!("/v1/attempts/{attempt_id}/cancel"), &t.operator),
            (Method::POST, "/v1/tokens".into(), &t.admin),
            (Method::DELETE, "/v1/tokens/zzz".into(), &t.admin),
            (Method::PUT, "/v1/schedules/fuzz".into(), &t.client),
            (Method::POST, "/v1/schedules/fuzz/pause".into(), &t.client),
            (Method::GET, "/v1/schedules/fuzz/events?limit=99999999999999999999".into(), &t.client),
        ];
        let fixed: Vec<Vec<u8>> = vec![
            vec![], b"null".to_vec(), b"[]".to_vec(), b"{".to_vec(), b"\"str\"".to_vec(), b"1e400".to_vec(),
            b"{\"a\":1,\"a\":2}".to_vec(), vec![0xff, 0xfe, 0x00], format!("{}1{}", "[".repeat(70), "]".repeat(70)).into_bytes(),
            br#"{"lease_token": "not-a-uuid", "result": 1}"#.to_vec(),
            br#"{"completions": [{"attempt_id": "00000000-0000-0000-0000-000000000000", "lease_token": "00000000-0000-0000-0000-000000000000", "result": 1}]}"#.to_vec(),
            br#"{"worker_id": "w", "wait_ms": 0, "completions": [{"attempt_id": 1, "lease_token": null}]}"#.to_vec(),
            br#"{"activity": "generate", "providers": ["p"], "options": {"heartbeat_timeout_s": -1}}"#.to_vec(),
            br#"{"activity": "generate", "providers": ["p"], "options": {"retry": {"multiplier": 1e308}}}"#.to_vec(),
            br#"{"output_schema": {"$ref": "http://127.0.0.1:1/x"}, "activity": "a"}"#.to_vec(),
            br#"{"cron": "* * * * * * * * *", "job": {"workflow": "w"}, "timezone": "\u0000"}"#.to_vec(),
            br#"{"cron": "0 0 0 31 2 * 2099", "job": {"workflow": "w"}, "catchup_window_s": 18446744073709551615}"#.to_vec(),
        ];
        let mut rng = Xorshift(0x5eed_1234_abcd_0001);
        let mut sent = 0;
        for (method, path, token) in &endpoints {
            let mut bodies = fixed.clone();
            for _ in 0..25 {
                bodies.push(serde_json::to_vec(&rng.value(4)).unwrap());
            }
            for (i, body) in bodies.into_iter().enumerate() {
                let key = format!("fuzz-{sent}");
                let content_type = if i % 3 == 0 { "text/plain" } else { "application/json" };
                let reply = server.api.send_raw(method.clone(), path, Some(token), &[("Idempotency-Key", &key), ("Content-Type", content_type)], body.clone()).await;
                assert!(reply.status.as_u16() < 500, "{method} {path} with {:?} answered {}: {}", String::from_utf8_lossy(&body), reply.status, reply.body);
                if !reply.status.is_success() {
                    assert!(reply.body["error"]["code"].is_string(), "{method} {path}: a JSON error body, got {}", reply.body);
                    assert!(reply.body["error"]["details"].is_object());
                }
                sent += 1;
            }
        }
        assert!(sent > 500);
        assert_eq!(server.api.send(Method::GET, "/readyz", None, &[], None).await.status.as_u16(), 200, "still serving");
    }
}
