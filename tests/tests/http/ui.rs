//! What the web UI stands on: its assets at `/ui/`, `GET /v1/whoami`, `GET /v1/contracts`,
//! and the job list's filters (owner for operators, time range).

use onceflow_engine::model::Role;
use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

async fn raw_get(server: &TestServer, path: &str) -> reqwest::Response {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    http.get(format!("{}{path}", server.api.url))
        .send()
        .await
        .expect("the server answers")
}

fn ids(reply: &Value) -> Vec<String> {
    reply["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

fn query_time(t: &Value) -> String {
    t.as_str().unwrap().replace('+', "%2B")
}

rules! {
    async fn the_ui_page_and_its_assets_are_served_without_a_token_with_their_content_types(db) {
        let server = TestServer::start(db).await;
        for (path, content_type, needle) in [
            ("/ui/", "text/html; charset=utf-8", "<script src=\"/ui/app.js\""),
            ("/ui/app.js", "text/javascript; charset=utf-8", "sessionStorage"),
            ("/ui/app.css", "text/css; charset=utf-8", "--succeeded"),
            ("/ui/jobs/some/deep/link", "text/html; charset=utf-8", "<script src=\"/ui/app.js\""),
        ] {
            let reply = raw_get(&server, path).await;
            assert_eq!(reply.status(), StatusCode::OK, "{path}");
            assert_eq!(reply.headers()["content-type"], content_type, "{path}");
            assert_eq!(reply.headers()["x-content-type-options"], "nosniff", "{path}");
            assert!(reply.text().await.unwrap().contains(needle), "{path} contains {needle}");
        }
        let page = raw_get(&server, "/ui/").await;
        assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("script-src 'self'"));
        let bare = raw_get(&server, "/ui").await;
        assert!(bare.status().is_redirection(), "{}", bare.status());
        assert_eq!(bare.headers()["location"], "/ui/");
        let doc = server.api.send(Method::GET, "/openapi.json", None, &[], None).await;
        for (path, method) in [("/ui/", "get"), ("/v1/whoami", "get"), ("/v1/contracts", "get")] {
            assert!(doc.body["paths"][path][method].is_object(), "{method} {path} is documented");
        }
    }

    async fn root_points_to_the_ui(db) {
        let server = TestServer::start(db).await;
        let root = raw_get(&server, "/").await;
        assert_eq!(root.status(), StatusCode::TEMPORARY_REDIRECT);
        assert_eq!(root.headers()["location"], "/ui/");
    }

    async fn whoami_tells_any_token_its_owner_and_role(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens;
        for (token, owner, role) in [(&t.client, "alice", "client"), (&t.worker, "*", "worker"), (&t.operator, "ops", "operator"), (&t.admin, "root", "admin")] {
            let reply = server.api.get("/v1/whoami", token).await;
            assert_eq!(reply.status, StatusCode::OK);
            assert_eq!(reply.body, json!({"owner": owner, "role": role}));
        }
        let none = server.api.send(Method::GET, "/v1/whoami", None, &[], None).await;
        assert_eq!((none.status, none.code()), (StatusCode::UNAUTHORIZED, "unauthenticated"));
        let unknown = server.api.get("/v1/whoami", "of_nope").await;
        assert_eq!(unknown.code(), "unauthenticated");
    }

    async fn contracts_list_each_providers_latest_certification_scoped_to_the_owner(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens;
        let alice_worker = server.engine.create_token("alice", Role::Worker).await.unwrap().token;
        let schema = |required: &str| json!({"type": "object", "required": [required]});
        // The platform's contract for `generate`, replaced by a newer one; certifications for both.
        let old = server.api.post("/v1/worker/contracts", &t.worker, &json!({"activity": "generate", "output_schema": schema("txt")})).await.body["contract_hash"].clone();
        let new = server.api.post("/v1/worker/contracts", &t.worker, &json!({"activity": "generate", "output_schema": schema("text")})).await.body["contract_hash"].clone();
        for (hash, provider, passed, cases) in [(&old, "fallback-llm", true, 1), (&new, "fallback-llm", false, 2), (&new, "fallback-llm", true, 3), (&new, "cheap-llm", false, 4)] {
            let reply = server.api.post("/v1/worker/certifications", &t.worker, &json!({"activity": "generate", "provider": provider,
                "contract_hash": hash, "passed": passed, "report": {"cases": cases}})).await;
            assert_eq!(reply.status, StatusCode::CREATED);
        }
        // Alice's own contract for another activity; bob has none.
        let charge = server.api.post("/v1/worker/contracts", &alice_worker, &json!({"activity": "charge", "output_schema": schema("id")})).await.body["contract_hash"].clone();
        server.api.post("/v1/worker/certifications", &alice_worker, &json!({"activity": "charge", "provider": "stripe",
            "contract_hash": charge, "passed": true})).await;

        let as_operator = server.api.get("/v1/contracts", &t.operator).await;
        assert_eq!(as_operator.status, StatusCode::OK);
        let contracts = as_operator.body["contracts"].as_array().unwrap().clone();
        assert_eq!(contracts.len(), 3, "{contracts:?}");
        let find = |hash: &Value| contracts.iter().find(|c| &c["contract_hash"] == hash).cloned().unwrap();
        let current = find(&new);
        assert_eq!((current["owner"].clone(), current["activity"].clone(), current["current"].clone()), (json!("*"), json!("generate"), json!(true)));
        assert_eq!(current["output_schema"], schema("text"));
        assert!(current["created_at"].is_string());
        let certs = current["certifications"].as_array().unwrap();
        assert_eq!(certs.len(), 2, "one per provider: the latest");
        assert_eq!((certs[0]["provider"].clone(), certs[0]["passed"].clone()), (json!("cheap-llm"), json!(false)));
        assert_eq!((certs[1]["provider"].clone(), certs[1]["passed"].clone(), certs[1]["report"].clone()), (json!("fallback-llm"), json!(true), json!({"cases": 3})));
        assert!(certs[1]["recorded_at"].is_string());
        assert_eq!(find(&old)["current"], json!(false));
        assert_eq!(find(&old)["certifications"][0]["report"], json!({"cases": 1}));

        // Alice (client or worker) sees hers and the platform's; bob only the platform's.
        for token in [&t.client, &alice_worker] {
            let reply = server.api.get("/v1/contracts", token).await;
            assert_eq!(reply.status, StatusCode::OK);
            assert_eq!(reply.body["contracts"].as_array().unwrap().len(), 3);
        }
        let bob = server.api.get("/v1/contracts", &t.bob).await;
        let bobs: Vec<_> = bob.body["contracts"].as_array().unwrap().iter().map(|c| c["owner"].as_str().unwrap().to_owned()).collect();
        assert_eq!(bobs, vec!["*", "*"]);
        let admin = server.api.get("/v1/contracts", &t.admin).await;
        assert_eq!((admin.status, admin.code()), (StatusCode::FORBIDDEN, "forbidden"));
        let none = server.api.send(Method::GET, "/v1/contracts", None, &[], None).await;
        assert_eq!(none.code(), "unauthenticated");
    }

    async fn the_job_list_filters_by_owner_for_operators_only_and_by_creation_time(db) {
        let server = TestServer::start(db).await;
        let t = &server.tokens;
        let body = json!({"activity": "generate", "providers": ["primary-llm"]});
        let mut jobs = Vec::new();
        for i in 0..3 {
            jobs.push(server.api.submit(&t.client, &format!("k{i}"), &body).await.body);
        }
        let bobs = server.api.submit(&t.bob, "k", &json!({"workflow": "summarize"})).await.body;

        // Operators narrow to one owner; a client's `owner=` changes nothing.
        assert_eq!(ids(&server.api.get("/v1/jobs?owner=bob", &t.operator).await.body), vec![bobs["id"].as_str().unwrap()]);
        assert_eq!(ids(&server.api.get("/v1/jobs?owner=alice", &t.operator).await.body).len(), 3);
        assert_eq!(ids(&server.api.get("/v1/jobs", &t.operator).await.body).len(), 4);
        assert_eq!(ids(&server.api.get("/v1/jobs?owner=bob", &t.client).await.body).len(), 3, "a client sees only its own");
        assert!(ids(&server.api.get("/v1/jobs?owner=alice", &t.bob).await.body).iter().all(|id| id == bobs["id"].as_str().unwrap()));
        assert_eq!(ids(&server.api.get("/v1/jobs?workflow=summarize", &t.operator).await.body).len(), 1);
        assert_eq!(ids(&server.api.get("/v1/jobs?activity=generate&owner=alice", &t.operator).await.body).len(), 3);

        // A time range: from the second job's creation on, and before it.
        let second = query_time(&jobs[1]["created_at"]);
        let from = ids(&server.api.get(&format!("/v1/jobs?owner=alice&created_after={second}"), &t.operator).await.body);
        assert_eq!(from, vec![jobs[2]["id"].as_str().unwrap(), jobs[1]["id"].as_str().unwrap()]);
        let before = ids(&server.api.get(&format!("/v1/jobs?created_before={second}"), &t.client).await.body);
        assert_eq!(before, vec![jobs[0]["id"].as_str().unwrap()]);
        let both = ids(&server.api.get(&format!("/v1/jobs?created_after={second}&created_before={}", query_time(&jobs[2]["created_at"])), &t.client).await.body);
        assert_eq!(both, vec![jobs[1]["id"].as_str().unwrap()]);
        // Paging keeps the filter.
        let page = server.api.get(&format!("/v1/jobs?created_after={second}&limit=1"), &t.client).await;
        let rest = server.api.get(&format!("/v1/jobs?created_after={second}&limit=1&after={}", page.body["next"].as_str().unwrap()), &t.client).await;
        assert_eq!(ids(&rest.body), vec![jobs[1]["id"].as_str().unwrap()]);
        assert_eq!(rest.body["next"], json!(null));
        for bad in ["yesterday", "2026-13-01T00:00:00Z", "1700000000"] {
            let reply = server.api.get(&format!("/v1/jobs?created_after={bad}"), &t.client).await;
            assert_eq!((reply.status, reply.code()), (StatusCode::BAD_REQUEST, "invalid_request"), "{bad}");
            assert!(reply.body["error"]["message"].as_str().unwrap().contains("created_after"));
        }
        assert_eq!(server.api.get("/v1/jobs?created_before=soon", &t.client).await.code(), "invalid_request");
    }
}
