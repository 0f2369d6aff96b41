//! The in-process worker of `onceflow dev --demo`: stand-in providers on the `demo` task
//! queue, so that jobs submitted by hand (curl, the UI) run without writing a worker.

use onceflow_worker::{ActivityContext, ActivityError, SdkError, Worker};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the demo `generate` providers return.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Generated {
    /// The generated text.
    pub text: String,
    /// Which provider wrote it.
    pub model: String,
}

/// What the demo `charge` provider returns.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Charged {
    /// The charge, named by the activity's idempotency key (one charge per intent).
    pub charge_id: String,
}

fn prompt_of(input: &Value) -> String {
    input
        .get("prompt")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| input.to_string())
}

/// The demo worker.
pub fn worker(url: &str, token: &str) -> Result<Worker, SdkError> {
    Worker::builder(url, token)
        .worker_id("onceflow-dev-demo")
        .task_queue("demo")
        .provider(
            "generate",
            "primary-llm",
            |_ctx: ActivityContext, input: Value| async move {
                Ok::<_, ActivityError>(Generated {
                    text: format!("primary answer to: {}", prompt_of(&input)),
                    model: "primary-llm".into(),
                })
            },
        )
        .provider(
            "generate",
            "fallback-llm",
            |_ctx: ActivityContext, input: Value| async move {
                Ok::<_, ActivityError>(Generated {
                    text: format!("fallback answer to: {}", prompt_of(&input)),
                    model: "fallback-llm".into(),
                })
            },
        )
        .certify_with([serde_json::json!({"prompt": "certification"})])
        .provider(
            "charge",
            "bank",
            |ctx: ActivityContext, _input: Value| async move {
                Ok::<_, ActivityError>(Charged {
                    charge_id: format!("ch_{}", ctx.idempotency_key()),
                })
            },
        )
        .build()
}
