//! The web UI: one page, a script and a style sheet, embedded in the binary and served
//! without auth at `/ui/`. The page's own data calls use the token its user pastes in.
//! Routing is by hash (`#/jobs`, `#/jobs/{id}`, `#/stuck`, `#/providers`, `#/schedules`), so any other
//! path under `/ui/` serves the page too.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::AppState;

/// The page.
pub const INDEX_HTML: &str = include_str!("ui/index.html");
/// The script: hash routing, the pages, the timeline.
pub const APP_JS: &str = include_str!("ui/app.js");
/// The style sheet.
pub const APP_CSS: &str = include_str!("ui/app.css");

/// Scripts and styles only from this server; no inline script, no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Assets change with the binary: always revalidate.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// The web UI's page (any path under `/ui/` that is not an asset serves it).
#[utoipa::path(get, path = "/ui/", tag = "service", security(()),
    responses((status = 200, description = "the web UI", content_type = "text/html")))]
pub async fn index() -> Response {
    let mut response = asset("text/html; charset=utf-8", INDEX_HTML);
    response
        .headers_mut()
        .insert("content-security-policy", HeaderValue::from_static(CSP));
    response
}

/// The UI's routes: `/` and `/ui` redirect to `/ui/`, the assets, and the page everywhere
/// else under `/ui/`.
pub fn routes() -> Router<AppState> {
    Router::new()
        // Someone who opens the server's address in a browser lands on the UI.
        .route("/", get(|| async { Redirect::temporary("/ui/") }))
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(index))
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/ui/{*rest}", get(index))
}
