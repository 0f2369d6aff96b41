//! The one HTTP client of onceflow's programs: the SDK's [`Worker`](crate::Worker) and
//! [`Client`](crate::Client), and the `onceflow` command line (operator commands, bench).
//!
//! It speaks `http://` and `https://` (rustls, no OpenSSL). Over `https://` it trusts the
//! system's root certificates plus, when given, the CA certificates of one PEM file: the
//! file named by [`CA_CERT_ENV`] (`ONCEFLOW_CA_CERT`), or one passed explicitly
//! ([`WorkerBuilder::ca_cert`](crate::WorkerBuilder::ca_cert),
//! [`Client::with_ca_cert`](crate::Client::with_ca_cert)). A server certificate is always
//! verified, host name included; there is no switch to turn verification off.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::SdkError;

/// The environment variable naming a PEM file of CA certificates to trust besides the
/// system's roots (for a server whose certificate a private CA signed).
pub const CA_CERT_ENV: &str = "ONCEFLOW_CA_CERT";

/// How long establishing a connection (TCP, and TLS for `https://`) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A pooled connection idle this long is closed by the client: before the engine's
/// default header-read timeout (10 s) closes it from the other side, so a request is
/// seldom sent on a connection the server is closing at that moment.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where an extra CA certificate file came from: said in every error about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CaCert {
    /// Given in code (an SDK option).
    Explicit(PathBuf),
    /// Read from [`CA_CERT_ENV`].
    FromEnv(PathBuf),
}

impl CaCert {
    /// The file named by [`CA_CERT_ENV`], if the variable is set and not empty.
    pub(crate) fn from_env() -> Option<CaCert> {
        std::env::var_os(CA_CERT_ENV)
            .filter(|v| !v.is_empty())
            .map(|v| CaCert::FromEnv(PathBuf::from(v)))
    }

    fn path(&self) -> &Path {
        match self {
            CaCert::Explicit(p) | CaCert::FromEnv(p) => p,
        }
    }

    /// A configuration error about this file that names where it came from.
    fn error(&self, what: impl std::fmt::Display) -> SdkError {
        match self {
            CaCert::Explicit(p) => {
                SdkError::Config(format!("CA certificate file {}: {what}", p.display()))
            }
            CaCert::FromEnv(p) => SdkError::Config(format!(
                "{CA_CERT_ENV}={}: {what} ({CA_CERT_ENV} must name a PEM file of CA certificates)",
                p.display()
            )),
        }
    }
}

/// The HTTP client, trusting the system's roots and, over `https://`, the CA certificates
/// of the PEM file `ca_cert` too.
///
/// Fails, never panics, with [`SdkError::Config`] naming the file when it cannot be read
/// or holds no PEM certificate.
pub fn http_client(ca_cert: Option<&Path>) -> Result<reqwest::Client, SdkError> {
    build(ca_cert.map(|p| CaCert::Explicit(p.to_owned())).as_ref())
}

/// The HTTP client, trusting the system's roots and the CA certificates of the PEM file
/// named by `ONCEFLOW_CA_CERT` ([`CA_CERT_ENV`]) when that variable is set and not empty.
///
/// Fails, never panics, with [`SdkError::Config`] naming the variable and the file when
/// the file cannot be read or holds no PEM certificate.
pub fn http_client_from_env() -> Result<reqwest::Client, SdkError> {
    build(CaCert::from_env().as_ref())
}

/// Builds the client (see [`http_client`]).
pub(crate) fn build(ca_cert: Option<&CaCert>) -> Result<reqwest::Client, SdkError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT);
    if let Some(ca) = ca_cert {
        let pem = std::fs::read(ca.path()).map_err(|e| ca.error(format!("cannot read it: {e}")))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| ca.error(format!("not a PEM file of certificates: {e}")))?;
        if certs.is_empty() {
            return Err(ca.error("holds no PEM certificate (no `BEGIN CERTIFICATE` block)"));
        }
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(|e| match ca_cert {
        Some(ca) => ca.error(format!("the HTTP client refused it: {e}")),
        None => SdkError::Config(format!("HTTP client: {e}")),
    })
}

/// An error with its causes, `outer: cause: root cause`: reqwest's own message alone
/// ("error sending request") hides the reason (a refused certificate, say).
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
