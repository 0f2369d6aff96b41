//! The HTTP server: docs/api.md over axum. Handlers talk to the domain only through
//! [`Engine`]; every rejection is a JSON error from [`error::ApiError`].

pub mod admin;
pub mod console;
pub mod error;
pub mod extract;
pub mod jobs;
mod listen;
pub mod operator;
pub mod schedules;
pub mod service;
pub mod tls;
pub mod ui;
pub mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::Engine;
use error::ApiError;
pub use tls::{ServerTls, TlsError};

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub bind: SocketAddr,
    /// Largest accepted request body (default 1 MiB).
    pub body_limit_bytes: usize,
    /// Longest a request other than a long-poll may take (default 30 s).
    pub request_timeout: Duration,
    /// How often the lease reaper runs (default 1 s).
    pub reaper_interval: Duration,
    /// How often a waiting long-poll looks again without a wake-up (default 1 s).
    pub poll_recheck: Duration,
    /// How long finished jobs are kept before retention deletes them; `None` (the
    /// default) keeps them for ever.
    pub retention: Option<Duration>,
    /// Serve HTTPS with this identity; `None` (the default) serves plain HTTP.
    pub tls: Option<ServerTls>,
    /// How long a client may take to send a request's head (request line and headers),
    /// counted from when the server starts waiting for it: a new connection, or the end
    /// of the previous response on a keep-alive connection (so an idle keep-alive
    /// connection is closed after it too). Also bounds the TLS handshake. Past it the
    /// connection is closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// At most this many client connections at once (default 4096). The next one is not
    /// accepted until one of them closes: it waits, it is not refused.
    pub max_http_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 7380)),
            body_limit_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            reaper_interval: Duration::from_secs(1),
            poll_recheck: Duration::from_secs(1),
            retention: None,
            tls: None,
            header_read_timeout: Duration::from_secs(10),
            max_http_connections: 4096,
        }
    }
}

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The domain.
    pub engine: Engine,
    /// The server's settings.
    pub config: Arc<ServerConfig>,
    /// Cancelled when the server shuts down; long-polls return at once.
    pub shutdown: CancellationToken,
}

#[derive(OpenApi)]
#[openapi(
    info(title = "onceflow", description = "A durable workflow engine whose first promise is one job per intent. The contract, in prose: docs/api.md in the repository."),
    components(schemas(error::ErrorBody)),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(jobs::submit, jobs::list_jobs))
        .routes(routes!(jobs::get_job))
        .routes(routes!(jobs::job_events))
        .routes(routes!(jobs::cancel_job))
        .routes(routes!(jobs::resume_job))
        .routes(routes!(jobs::send_signal))
        .routes(routes!(jobs::create_attempt))
        .routes(routes!(worker::heartbeat))
        .routes(routes!(worker::complete))
        .routes(routes!(worker::complete_many))
        .routes(routes!(worker::complete_workflow_task))
        .routes(routes!(worker::workflow_history))
        .routes(routes!(worker::register_contract))
        .routes(routes!(worker::record_certification))
        .routes(routes!(operator::stuck_attempts))
        .routes(routes!(operator::cancel_attempt))
        .routes(routes!(
            schedules::put_schedule,
            schedules::get_schedule,
            schedules::delete_schedule
        ))
        .routes(routes!(schedules::list_schedules))
        .routes(routes!(schedules::pause_schedule))
        .routes(routes!(schedules::resume_schedule))
        .routes(routes!(schedules::schedule_events))
        .routes(routes!(admin::create_token))
        .routes(routes!(admin::revoke_token))
        .routes(routes!(service::healthz))
        .routes(routes!(service::readyz))
        .routes(routes!(service::metrics))
        .routes(routes!(console::whoami))
        .routes(routes!(console::list_contracts))
}

/// The OpenAPI document of the routes the server serves, generated from the handlers'
/// own annotations and types.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, mut doc) = api_routes().split_for_parts();
    let (_, poll) = OpenApiRouter::<AppState>::new()
        .routes(routes!(worker::poll))
        .split_for_parts();
    doc.merge(poll);
    let (_, ui) = OpenApiRouter::<AppState>::new()
        .routes(routes!(ui::index))
        .split_for_parts();
    doc.merge(ui);
    doc
}

/// The application: every route of docs/api.md with its limits and error handling.
pub fn router(state: AppState) -> Router {
    let timeout = state.config.request_timeout;
    let (api, _) = api_routes().split_for_parts();
    let api = api.layer(middleware::from_fn(move |req: Request, next: Next| {
        with_timeout(timeout, req, next)
    }));
    // A long-poll waits up to 60 s by design; it gets its own, longer limit.
    let poll_timeout = Duration::from_millis(onceflow_protocol::api::MAX_WAIT_MS) + timeout;
    let (poll, _) = OpenApiRouter::<AppState>::new()
        .routes(routes!(worker::poll))
        .split_for_parts();
    let poll = poll.layer(middleware::from_fn(move |req: Request, next: Next| {
        with_timeout(poll_timeout, req, next)
    }));
    let doc = Arc::new(openapi());
    Router::new()
        .merge(api)
        .merge(poll)
        .merge(ui::routes())
        .route("/openapi.json", axum::routing::get(move || { let doc = doc.clone(); async move { Json(doc.as_ref().clone()) } }))
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(state.config.body_limit_bytes))
        .layer(CatchPanicLayer::custom(|_: Box<dyn std::any::Any + Send>| ApiError::Panic.into_response()))
        // One span per request; the owner is recorded once the token is known, and the
        // engine's own lines about a job carry its job, attempt and owner.
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), owner = tracing::field::Empty)
        }))
        .with_state(state)
}

async fn with_timeout(limit: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout.into_response(),
    }
}

/// Serves the API on `listener` until `shutdown` is cancelled, with the background loops
/// (lease reaper, wake-ups for long-polls) running alongside: HTTP/1.1 with keep-alive,
/// over TLS when `config.tls` is set, within `config.header_read_timeout` and
/// `config.max_http_connections`. On shutdown it stops accepting, lets in-flight requests
/// finish (long-polls answer at once), and returns once every connection is closed.
pub async fn serve_on(
    listener: TcpListener,
    engine: Engine,
    config: ServerConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let loops = crate::background::spawn(
        &engine,
        config.reaper_interval,
        config.retention,
        shutdown.clone(),
    );
    let limits = listen::Limits {
        header_read_timeout: config.header_read_timeout,
        max_connections: config.max_http_connections,
        tls: config.tls.clone(),
    };
    let scheme = if limits.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let state = AppState {
        engine,
        config: Arc::new(config),
        shutdown: shutdown.clone(),
    };
    let app = router(state);
    tracing::info!(addr = %listener.local_addr()?, scheme, "onceflow serving");
    let served = listen::serve(listener, app, limits, shutdown.clone()).await;
    shutdown.cancel();
    for task in loops {
        let _ = task.await;
    }
    served
}
