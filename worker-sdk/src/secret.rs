//! [`SecretToken`]: an API token whose `Debug` never shows it.

use std::fmt;

/// An API token of the engine (a bearer token) held in memory.
///
/// Guarantees: its `Debug` prints `SecretToken(<redacted>)`, never the token, so a struct
/// holding one can derive `Debug` and be logged without leaking it; it has no `Display`.
/// Only [`SecretToken::expose`] gives the token, to whoever must send it.
#[derive(Clone)]
pub struct SecretToken(String);

impl SecretToken {
    /// Holds `token`.
    pub fn new(token: impl Into<String>) -> Self {
        SecretToken(token.into())
    }

    /// The token itself, to send (e.g. as `Authorization: Bearer`). Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretToken(<redacted>)")
    }
}

impl From<String> for SecretToken {
    fn from(token: String) -> Self {
        SecretToken(token)
    }
}

impl From<&str> for SecretToken {
    fn from(token: &str) -> Self {
        SecretToken(token.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::SecretToken;
    use crate::{ActivityContext, Client, Worker};

    const TOKEN: &str = "of_s3cr3t-token-value";

    fn assert_redacted(what: &str, debug: String) {
        assert!(!debug.contains(TOKEN), "{what} shows the token: {debug}");
        assert!(
            !debug.contains("s3cr3t"),
            "{what} shows part of the token: {debug}"
        );
    }

    #[test]
    fn no_debug_output_of_a_token_holder_contains_the_token() {
        let token = SecretToken::new(TOKEN);
        assert_eq!(token.expose(), TOKEN);
        assert_redacted("SecretToken", format!("{token:?}"));
        assert_redacted("SecretToken (pretty)", format!("{token:#?}"));

        let client = Client::new("http://127.0.0.1:7380", TOKEN).expect("a client");
        assert_redacted("Client", format!("{client:?}"));
        assert_redacted("Client (pretty)", format!("{client:#?}"));

        let builder = Worker::builder("http://127.0.0.1:7380", TOKEN)
            .task_queue("q")
            .worker_id("w1")
            .provider(
                "echo",
                "local",
                |_ctx: ActivityContext, input: serde_json::Value| async move {
                    Ok::<_, crate::ActivityError>(input.to_string())
                },
            );
        assert_redacted("WorkerBuilder", format!("{builder:?}"));
        let worker = builder.build().expect("a worker");
        assert_redacted("Worker", format!("{worker:?}"));
        assert_redacted("Worker (pretty)", format!("{worker:#?}"));

        let transport = crate::transport::Transport::new(
            crate::Endpoints::parse("http://127.0.0.1:7380").expect("one URL"),
            TOKEN,
            None,
        )
        .expect("a transport");
        let task = onceflow_protocol::model::ActivityTask {
            kind: "activity".to_owned(),
            attempt_id: uuid::Uuid::nil(),
            lease_token: uuid::Uuid::nil(),
            read_version: 0,
            job_id: uuid::Uuid::nil(),
            owner: "alice".to_owned(),
            activity: "generate".to_owned(),
            provider: "primary-llm".to_owned(),
            input: serde_json::json!({}),
            attempt_number: 1,
            idempotency_key: "k".to_owned(),
            heartbeat_timeout_ms: None,
            start_to_close_timeout_ms: None,
        };
        let context = ActivityContext::new(task, Some(transport));
        assert_redacted("ActivityContext", format!("{context:?}"));
    }
}
