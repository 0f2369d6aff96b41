//! Logs and traces of the `onceflow` binary. Logs are structured lines on stderr, filtered
//! by `RUST_LOG` (default `info`). Built with the `otel` feature, the same spans (one per
//! HTTP request, carrying the caller's owner; the engine's lines about a job carry its job
//! and attempt ids) are also exported by OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is
//! set (e.g. `http://collector:4318`; spans go to its `/v1/traces`).

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The environment variable naming the OTLP/HTTP collector (the OpenTelemetry standard).
pub const OTLP_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The installed logging and tracing; [`Telemetry::shutdown`] flushes exported spans.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

/// Installs the global subscriber: stderr logs, and the OTLP exporter when configured.
pub fn init() -> Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let endpoint = std::env::var(OTLP_ENDPOINT_VAR)
        .ok()
        .filter(|e| !e.trim().is_empty());
    #[cfg(feature = "otel")]
    {
        let (provider, exporter_error) = match endpoint.as_deref().map(otlp_provider) {
            Some(Ok(provider)) => (Some(provider), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        let otel = provider.as_ref().map(|p| {
            use opentelemetry::trace::TracerProvider as _;
            tracing_opentelemetry::layer().with_tracer(p.tracer("onceflow"))
        });
        tracing_subscriber::registry()
            .with(filter)
            .with(logs)
            .with(otel)
            .init();
        match (&endpoint, exporter_error) {
            (Some(e), None) => tracing::info!(endpoint = %e, "exporting spans by OTLP/HTTP"),
            (Some(e), Some(error)) => {
                tracing::warn!(endpoint = %e, %error, "cannot export spans; logging only")
            }
            _ => {}
        }
        Telemetry { provider }
    }
    #[cfg(not(feature = "otel"))]
    {
        tracing_subscriber::registry()
            .with(filter)
            .with(logs)
            .init();
        if endpoint.is_some() {
            tracing::warn!("{OTLP_ENDPOINT_VAR} is set, but this onceflow was built without the `otel` feature: no spans are exported");
        }
        Telemetry {}
    }
}

#[cfg(feature = "otel")]
fn otlp_provider(endpoint: &str) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, String> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .build()
        .map_err(|e| e.to_string())?;
    Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("onceflow")
                .build(),
        )
        .build())
}

impl Telemetry {
    /// Sends the spans not yet exported; call before the process exits.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider {
            if let Err(e) = provider.shutdown() {
                eprintln!("onceflow: flushing spans failed: {e}");
            }
        }
    }
}
