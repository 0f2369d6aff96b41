//! JSON over HTTP to the engine, with docs/api.md's error bodies decoded into [`SdkError`].

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::endpoints::{Endpoints, Repeat};
use crate::error::SdkError;
use crate::http::{with_causes, CaCert};
use crate::secret::SecretToken;

/// A connection to an engine (one URL or several, see [`Endpoints`]) with one token (its
/// `Debug` shows no token).
#[derive(Clone, Debug)]
pub(crate) struct Transport {
    endpoints: Endpoints,
    token: SecretToken,
    http: reqwest::Client,
}

/// A successful answer: status, one header the SDK cares about, and the body.
pub(crate) struct Answer<T> {
    pub status: u16,
    pub replayed: bool,
    pub body: T,
}

impl Transport {
    /// A transport to `endpoints` whose client trusts the system's roots plus `ca_cert`
    /// (see [`crate::http_client`]).
    pub(crate) fn new(
        endpoints: Endpoints,
        token: impl Into<String>,
        ca_cert: Option<&CaCert>,
    ) -> Result<Self, SdkError> {
        let http = crate::http::build(ca_cert)?;
        Ok(Transport {
            endpoints,
            token: SecretToken::new(token),
            http,
        })
    }

    /// The engine's URLs, shared with every clone.
    pub(crate) fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Sends one request, moving on to the next URL as [`Endpoints`] says (`repeat`: may
    /// it be sent twice), and decodes the answer: a 2xx body, else docs/api.md's error.
    pub(crate) async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        repeat: Repeat,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<Answer<T>, SdkError> {
        // Serialized once: every URL is sent the same bytes.
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| SdkError::Config(format!("request body of {path}: {e}")))?;
        let build = |base: &str| {
            let mut request = self
                .http
                .request(method.clone(), format!("{base}{path}"))
                .bearer_auth(self.token.expose())
                .timeout(timeout);
            for (k, v) in headers {
                request = request.header(*k, *v);
            }
            if let Some(body) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
            }
            request
        };
        let response = self
            .endpoints
            .send(repeat, build)
            .await
            .map_err(|e| SdkError::Transport(with_causes(&e)))?;
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let bytes = response
            .bytes()
            .await
            .map_err(|e| SdkError::Transport(with_causes(&e)))?;
        if (200..300).contains(&status) {
            let body = if bytes.is_empty() {
                serde_json::from_value(Value::Null)
            } else {
                serde_json::from_slice(&bytes)
            }
            .map_err(|e| SdkError::Transport(format!("unexpected answer to {path}: {e}")))?;
            return Ok(Answer {
                status,
                replayed,
                body,
            });
        }
        let error: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Err(SdkError::Api {
            status,
            code: error["error"]["code"]
                .as_str()
                .unwrap_or("unknown")
                .to_owned(),
            message: error["error"]["message"]
                .as_str()
                .unwrap_or("no error body")
                .to_owned(),
            details: error["error"]["details"].clone(),
        })
    }
}
