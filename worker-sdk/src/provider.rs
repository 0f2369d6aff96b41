//! Providers: typed async functions registered for an (activity, provider) pair, their
//! output contract (derived from the output type), and certification cases.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::context::ActivityContext;
use crate::error::{ActivityError, SdkError};

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A handler with its types erased to JSON.
pub(crate) trait ErasedHandler: Send + Sync {
    fn call(&self, ctx: ActivityContext, input: Value) -> BoxFuture<Result<Value, ActivityError>>;
}

struct Typed<F, I, O> {
    f: F,
    _types: PhantomData<fn(I) -> O>,
}

impl<F, Fut, I, O> ErasedHandler for Typed<F, I, O>
where
    F: Fn(ActivityContext, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ActivityError>> + Send + 'static,
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
{
    fn call(&self, ctx: ActivityContext, input: Value) -> BoxFuture<Result<Value, ActivityError>> {
        let input: I = match serde_json::from_value(input) {
            Ok(i) => i,
            Err(e) => {
                let error = ActivityError::fatal(format!(
                    "the input does not match the handler's input type: {e}"
                ));
                return Box::pin(async move { Err(error) });
            }
        };
        let running = (self.f)(ctx, input);
        Box::pin(async move {
            let output = running.await?;
            serde_json::to_value(output)
                .map_err(|e| ActivityError::fatal(format!("the output does not serialize: {e}")))
        })
    }
}

/// A business rule on a provider's output, checked during certification.
pub(crate) type OutputCheck = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// Sample inputs a provider must handle at start-up, and an optional business check.
#[derive(Clone, Default)]
pub(crate) struct Certify {
    pub cases: Vec<Value>,
    pub check: Option<OutputCheck>,
}

/// One registered provider.
#[derive(Clone)]
pub(crate) struct Registration {
    pub activity: String,
    pub provider: String,
    pub handler: Arc<dyn ErasedHandler>,
    pub output_schema: Value,
    pub certify: Option<Certify>,
}

impl Registration {
    pub(crate) fn new<F, Fut, I, O>(activity: &str, provider: &str, handler: F) -> Self
    where
        F: Fn(ActivityContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ActivityError>> + Send + 'static,
        I: DeserializeOwned + Send + 'static,
        O: Serialize + JsonSchema + Send + 'static,
    {
        Registration {
            activity: activity.to_owned(),
            provider: provider.to_owned(),
            handler: Arc::new(Typed {
                f: handler,
                _types: PhantomData,
            }),
            output_schema: output_contract::<O>(),
            certify: None,
        }
    }
}

/// The output contract derived from a handler's output type: its JSON Schema.
pub fn output_contract<O: JsonSchema>() -> Value {
    schemars::schema_for!(O).to_value()
}

/// An output contract compiled for local checks.
pub(crate) struct LocalContract {
    validator: jsonschema::Validator,
}

impl LocalContract {
    pub(crate) fn compile(schema: &Value) -> Result<Self, SdkError> {
        let validator = jsonschema::validator_for(schema).map_err(|e| {
            SdkError::Config(format!(
                "the output type's JSON Schema does not compile: {e}"
            ))
        })?;
        Ok(LocalContract { validator })
    }

    /// Every way `output` fails the contract (empty when it satisfies it).
    pub(crate) fn violations(&self, output: &Value) -> Vec<String> {
        self.validator
            .iter_errors(output)
            .take(20)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect()
    }
}

/// Serializes certification cases of any input type to JSON.
pub(crate) fn cases_to_json<I: Serialize>(
    cases: impl IntoIterator<Item = I>,
) -> Result<Vec<Value>, SdkError> {
    cases
        .into_iter()
        .map(|c| {
            serde_json::to_value(c)
                .map_err(|e| SdkError::Config(format!("certification case: {e}")))
        })
        .collect()
}

/// Wraps a typed business check of the output.
pub(crate) fn typed_check<O, V>(check: V) -> OutputCheck
where
    O: DeserializeOwned,
    V: Fn(&O) -> Result<(), String> + Send + Sync + 'static,
{
    Arc::new(move |value: &Value| {
        let output: O = serde_json::from_value(value.clone())
            .map_err(|e| format!("the output does not read back: {e}"))?;
        check(&output)
    })
}
