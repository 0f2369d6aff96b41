//! docs/api.md against the server: every route of `/openapi.json` is documented there, and
//! every route documented there (outside "Planned (v1.1)") is served.
//!
//! A route is documented by a heading of its own, `` ### `METHOD /path` ``, with path
//! parameters in braces as in the OpenAPI document (docs/api.md says so at its top).

use std::collections::BTreeSet;

use onceflow_tests::rules;
use onceflow_tests::server::TestServer;
use reqwest::{Method, StatusCode};

/// docs/api.md, as built into this test.
const API_MD: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"));

/// A route: its method (upper case) and its path template.
type Route = (String, String);

/// The routes docs/api.md documents: those it serves, and those it plans.
struct Documented {
    served: BTreeSet<Route>,
    planned: BTreeSet<Route>,
}

/// Reads every `` ### `METHOD /path` `` heading of `text`, by the `##` section it is in.
fn documented_routes(text: &str) -> Documented {
    let mut documented = Documented {
        served: BTreeSet::new(),
        planned: BTreeSet::new(),
    };
    let mut in_planned = false;
    for line in text.lines() {
        if let Some(section) = line.strip_prefix("## ") {
            in_planned = section.trim_start().starts_with("Planned");
            continue;
        }
        let Some(heading) = line.strip_prefix("### `") else {
            continue;
        };
        let Some((route, _)) = heading.split_once('`') else {
            continue;
        };
        let Some((method, path)) = route.split_once(' ') else {
            continue;
        };
        if !path.starts_with('/') || !method.chars().all(|c| c.is_ascii_uppercase()) {
            continue;
        }
        let route = (method.to_owned(), path.to_owned());
        let fresh = if in_planned {
            documented.planned.insert(route.clone())
        } else {
            documented.served.insert(route.clone())
        };
        assert!(
            fresh,
            "{} {} has one heading in docs/api.md, not two",
            route.0, route.1
        );
    }
    documented
}

/// Every (method, path) of an OpenAPI document.
fn openapi_routes(doc: &serde_json::Value) -> BTreeSet<Route> {
    let paths = doc["paths"]
        .as_object()
        .expect("the OpenAPI document has paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .into_iter()
                .flat_map(|methods| methods.keys())
                .filter(|m| {
                    matches!(
                        m.as_str(),
                        "get" | "put" | "post" | "delete" | "patch" | "head" | "options"
                    )
                })
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect()
}

/// `path` with each `{parameter}` replaced by a value that fits any of them (a UUID is
/// also a valid schedule name and a path under `/ui/`).
fn concrete(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => {
                out.push_str("00000000-0000-0000-0000-000000000000");
                rest = &rest[open + close + 1..];
            }
            None => {
                rest = &rest[open..];
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn api_md_documents_a_plausible_number_of_routes() {
    onceflow_tests::time_limit_blocking(|| {
        let documented = documented_routes(API_MD);
        assert!(
            documented.served.len() >= 30,
            "docs/api.md documents only {} served routes; are its headings `### `METHOD /path``?",
            documented.served.len()
        );
        assert!(documented
            .served
            .contains(&("POST".to_owned(), "/v1/jobs".to_owned())));
        assert!(documented.planned.is_disjoint(&documented.served));
    });
}

rules! {
    async fn every_route_of_openapi_is_in_api_md_and_every_route_of_api_md_is_served(db) {
        let server = TestServer::start(db).await;
        let doc = server.api.send(Method::GET, "/openapi.json", None, &[], None).await;
        assert_eq!(doc.status, StatusCode::OK);
        let in_openapi = openapi_routes(&doc.body);
        assert!(!in_openapi.is_empty());
        let documented = documented_routes(API_MD);

        let undocumented: Vec<_> = in_openapi.difference(&documented.served).collect();
        assert!(undocumented.is_empty(), "served (in /openapi.json) but not documented in docs/api.md: {undocumented:?}");

        let served_but_planned: Vec<_> = in_openapi.intersection(&documented.planned).collect();
        assert!(served_but_planned.is_empty(),
            "served, yet still under \"Planned (v1.1)\" in docs/api.md: {served_but_planned:?}");

        // Every documented route answers something other than 404 or 405 (without a token,
        // a served /v1/ route answers 401; an unknown route or method 404 or 405 whatever
        // the token), whether or not the OpenAPI document lists it.
        for (method, path) in &documented.served {
            let method = Method::from_bytes(method.as_bytes()).expect("a method");
            let reply = server.api.send(method.clone(), &concrete(path), None, &[], None).await;
            assert!(
                reply.status != StatusCode::NOT_FOUND && reply.status != StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path} is documented in docs/api.md but not served: {} {}", reply.status, reply.body
            );
        }
    }
}
