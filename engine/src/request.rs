//! Job requests: parsing the body of `POST /v1/jobs` with every default filled in, and the
//! request fingerprint that tells a replay from a reused idempotency key.

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use crate::error::EngineError;
pub use onceflow_protocol::api::{ActivityOptionsBody, JobRequestBody, RetryPolicyBody};

use crate::model::ActivityOptions;
#[cfg(test)]
use crate::model::RetryPolicy;

/// What a job runs: workflow code, or one activity with an ordered provider list.
#[derive(Debug, Clone, PartialEq)]
pub enum JobTarget {
    /// A workflow job: Rust workflow code run by a worker.
    Workflow {
        /// The workflow to run.
        name: String,
    },
    /// An activity job: one activity, providers tried in order.
    Activity {
        /// The activity to run.
        name: String,
        /// Its providers in failover order; the first is the primary and needs no certification.
        providers: Vec<String>,
        /// Timeouts, failover mode and retry policy, every default filled in.
        options: ActivityOptions,
    },
}

/// A job submission with every default filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRequest {
    /// What the job runs.
    pub target: JobTarget,
    /// The job's input, any JSON.
    pub input: Value,
    /// The task queue its work is dispatched on.
    pub task_queue: String,
}

impl JobRequest {
    /// An activity job with default options on the `default` task queue.
    pub fn activity(name: &str, providers: &[&str], input: Value) -> Self {
        JobRequest {
            target: JobTarget::Activity {
                name: name.to_owned(),
                providers: providers.iter().map(|p| (*p).to_owned()).collect(),
                options: ActivityOptions::default(),
            },
            input,
            task_queue: "default".to_owned(),
        }
    }

    /// A workflow job on the `default` task queue.
    pub fn workflow(name: &str, input: Value) -> Self {
        JobRequest {
            target: JobTarget::Workflow {
                name: name.to_owned(),
            },
            input,
            task_queue: "default".to_owned(),
        }
    }

    /// Replaces the activity options (no effect on a workflow job).
    pub fn with_options(mut self, new: ActivityOptions) -> Self {
        if let JobTarget::Activity { options, .. } = &mut self.target {
            *options = new;
        }
        self
    }

    /// Parses a `POST /v1/jobs` body. Missing fields get docs/api.md's defaults, field by
    /// field; `null` for a timeout means none. Errors name the offending field.
    pub fn from_json(body: &Value) -> Result<Self, EngineError> {
        // Numbers are compared by value: `30.0` is as good as `30` for an integer option.
        let mut body = body.clone();
        if let Some(options) = body.get_mut("options") {
            integral_floats_to_integers(options);
        }
        let raw: JobRequestBody = serde_path_to_error::deserialize(&body).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                EngineError::invalid_request(inner.to_string())
            } else {
                EngineError::invalid_request(format!("{path}: {inner}"))
            }
        })?;
        let target = match (raw.workflow, raw.activity) {
            (Some(_), Some(_)) => {
                return Err(EngineError::invalid_request(
                    "exactly one of `workflow` or `activity` is allowed, not both",
                ))
            }
            (None, None) => {
                return Err(EngineError::invalid_request(
                    "one of `workflow` or `activity` is required",
                ))
            }
            (Some(name), None) => {
                if raw.providers.is_some() || raw.options.is_some() {
                    return Err(EngineError::invalid_request(
                        "`providers` and `options` belong to activity jobs, not workflow jobs",
                    ));
                }
                JobTarget::Workflow { name }
            }
            (None, Some(name)) => {
                let providers = raw.providers.ok_or_else(|| {
                    EngineError::invalid_request("providers: required for an activity job")
                })?;
                let options = raw.options.unwrap_or_default().resolve();
                JobTarget::Activity {
                    name,
                    providers,
                    options,
                }
            }
        };
        let request = JobRequest {
            target,
            input: raw.input.unwrap_or(Value::Null),
            task_queue: raw.task_queue.unwrap_or_else(|| "default".to_owned()),
        };
        request.validate()?;
        Ok(request)
    }

    /// Checks the rules serde cannot: names, provider lists and option ranges.
    pub fn validate(&self) -> Result<(), EngineError> {
        check_name("task_queue", &self.task_queue)?;
        if let Some(at) = crate::text::nul_in_json(&self.input, "input") {
            return Err(EngineError::invalid_request(crate::text::nul_message(&at)));
        }
        match &self.target {
            JobTarget::Workflow { name } => check_name("workflow", name),
            JobTarget::Activity {
                name,
                providers,
                options,
            } => {
                check_name("activity", name)?;
                if providers.is_empty() || providers.len() > MAX_PROVIDERS {
                    return Err(EngineError::invalid_request(format!(
                        "providers: must hold 1 to {MAX_PROVIDERS} distinct providers"
                    )));
                }
                let mut seen = std::collections::HashSet::with_capacity(providers.len());
                for (i, provider) in providers.iter().enumerate() {
                    check_name(&format!("providers[{i}]"), provider)?;
                    if !seen.insert(provider.as_str()) {
                        return Err(EngineError::invalid_request(format!(
                            "providers[{i}]: `{provider}` is listed twice"
                        )));
                    }
                }
                for (field, value) in [
                    ("options.heartbeat_timeout_s", options.heartbeat_timeout_s),
                    (
                        "options.start_to_close_timeout_s",
                        options.start_to_close_timeout_s,
                    ),
                    (
                        "options.schedule_to_start_timeout_s",
                        options.schedule_to_start_timeout_s,
                    ),
                ] {
                    if let Some(v) = value {
                        if v == 0 || v > MAX_TIMEOUT_S {
                            return Err(EngineError::invalid_request(format!(
                                "{field}: must be between 1 and {MAX_TIMEOUT_S}, or null for none"
                            )));
                        }
                    }
                }
                let retry = &options.retry;
                if retry.max_attempts_per_provider == 0 || retry.max_attempts_per_provider > 1000 {
                    return Err(EngineError::invalid_request(
                        "options.retry.max_attempts_per_provider: must be between 1 and 1000",
                    ));
                }
                if retry.max_backoff_ms > MAX_TIMEOUT_S * 1000 {
                    return Err(EngineError::invalid_request(format!(
                        "options.retry.max_backoff_ms: must be at most {}",
                        MAX_TIMEOUT_S * 1000
                    )));
                }
                if retry.initial_backoff_ms > retry.max_backoff_ms {
                    return Err(EngineError::invalid_request(
                        "options.retry.initial_backoff_ms: must not exceed max_backoff_ms",
                    ));
                }
                if !retry.multiplier.is_finite() || !(1.0..=100.0).contains(&retry.multiplier) {
                    return Err(EngineError::invalid_request(
                        "options.retry.multiplier: must be between 1.0 and 100.0",
                    ));
                }
                Ok(())
            }
        }
    }

    /// The request fingerprint: SHA-256 of the canonical form of the whole request with
    /// every default filled in (keys sorted, numbers compared by value). Key order,
    /// whitespace, `2` versus `2.0` and spelled-out defaults never change it.
    pub fn fingerprint(&self) -> String {
        // The canonical text of the object {activity, input, options, providers,
        // task_queue} (or {input, task_queue, workflow}), written in its sorted key order
        // without building it: stored jobs carry fingerprints of exactly this text.
        let mut text = Vec::with_capacity(512);
        match &self.target {
            JobTarget::Workflow { name } => {
                text.extend_from_slice(b"{\"input\":");
                write_canonical(&self.input, &mut text);
                text.extend_from_slice(b",\"task_queue\":");
                write_string(&self.task_queue, &mut text);
                text.extend_from_slice(b",\"workflow\":");
                write_string(name, &mut text);
            }
            JobTarget::Activity {
                name,
                providers,
                options,
            } => {
                text.extend_from_slice(b"{\"activity\":");
                write_string(name, &mut text);
                text.extend_from_slice(b",\"input\":");
                write_canonical(&self.input, &mut text);
                text.extend_from_slice(b",\"options\":");
                write_canonical(
                    &serde_json::to_value(options).unwrap_or_default(),
                    &mut text,
                );
                text.extend_from_slice(b",\"providers\":[");
                for (i, provider) in providers.iter().enumerate() {
                    if i > 0 {
                        text.push(b',');
                    }
                    write_string(provider, &mut text);
                }
                text.extend_from_slice(b"],\"task_queue\":");
                write_string(&self.task_queue, &mut text);
            }
        }
        text.push(b'}');
        sha256_hex(&text)
    }
}

/// Rewrites every float with no fractional part (e.g. `2.0`) as the integer it equals.
fn integral_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64() {
                if f.fract() == 0.0 && (0.0..9.007_199_254_740_992e15).contains(&f) {
                    *value = Value::from(f as u64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
}

/// The most providers an activity may list (docs/api.md, `POST /v1/jobs`).
pub const MAX_PROVIDERS: usize = 32;

/// The longest timeout accepted: one year.
const MAX_TIMEOUT_S: u64 = 365 * 24 * 3600;

fn check_name(field: &str, value: &str) -> Result<(), EngineError> {
    if value.is_empty() || value.len() > 255 || value.chars().any(|c| c.is_control()) {
        return Err(EngineError::invalid_request(format!(
            "{field}: must be 1 to 255 characters without control characters"
        )));
    }
    Ok(())
}

/// Hex SHA-256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The canonical text of a JSON value: object keys sorted, no whitespace, and numbers
/// written by value (an integral float such as `2.0` is written `2`).
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // Only JSON text and ASCII punctuation were written: valid UTF-8.
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON string literal, escaped as serde_json escapes it.
fn write_string(s: &str, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail, and a str always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::String(s) => write_string(s, out),
        Value::Number(n) => out.extend_from_slice(canonical_number(n).as_bytes()),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_canonical(&map[key], out);
            }
            out.push(b'}');
        }
    }
}

fn canonical_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    match n.as_f64() {
        // Integral floats that fit exactly are the same number as the integer.
        Some(f) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => (f as i64).to_string(),
        Some(f) => format!("{f:e}"),
        None => n.to_string(),
    }
}

/// A signal to send to a workflow job (`POST /v1/jobs/{id}/signals`), checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalRequest {
    /// What the workflow waits for: 1–255 visible ASCII characters.
    pub name: String,
    /// Anything JSON; `null` when left out.
    pub payload: Value,
}

impl SignalRequest {
    /// Parses and checks a body `{"name", "payload"}`; anything wrong is
    /// `invalid_request` naming the field, and nothing is recorded.
    pub fn from_json(body: &Value) -> Result<Self, EngineError> {
        let raw: onceflow_protocol::api::SignalRequestBody = serde_path_to_error::deserialize(body)
            .map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                if path == "." {
                    EngineError::invalid_request(inner.to_string())
                } else {
                    EngineError::invalid_request(format!("{path}: {inner}"))
                }
            })?;
        if raw.name.is_empty()
            || raw.name.len() > 255
            || !raw.name.bytes().all(|b| (b'!'..=b'~').contains(&b))
        {
            return Err(EngineError::invalid_request(
                "name: must be 1 to 255 visible ASCII characters",
            ));
        }
        if let Some(at) = crate::text::nul_in_json(&raw.payload, "payload") {
            return Err(EngineError::invalid_request(crate::text::nul_message(&at)));
        }
        Ok(SignalRequest {
            name: raw.name,
            payload: raw.payload,
        })
    }

    /// Tells a replay (the same name and payload, however spelled) from a reused key.
    pub fn fingerprint(&self) -> String {
        let mut text = Vec::with_capacity(128);
        text.extend_from_slice(b"{\"name\":");
        write_string(&self.name, &mut text);
        text.extend_from_slice(b",\"payload\":");
        write_canonical(&self.payload, &mut text);
        text.push(b'}');
        sha256_hex(&text)
    }
}

/// Checks an `Idempotency-Key`: 1–255 visible ASCII characters (`!`…`~`). Empty counts
/// as missing.
pub fn check_idempotency_key(key: &str) -> Result<(), EngineError> {
    if key.is_empty() {
        return Err(EngineError::MissingIdempotencyKey);
    }
    if key.len() > 255 || !key.bytes().all(|b| (b'!'..=b'~').contains(&b)) {
        return Err(EngineError::InvalidIdempotencyKey);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: &str) -> JobRequest {
        let value: Value = serde_json::from_str(body).expect("test body is JSON");
        JobRequest::from_json(&value).expect("test body is a valid request")
    }

    #[test]
    fn fingerprints_stay_what_stored_jobs_were_given() {
        // Jobs in the database carry fingerprints computed by earlier versions: a replay
        // of one must compute the same text, byte for byte.
        let activity = parse(
            r#"{"activity":"generate","providers":["p","q \"r\""],"task_queue":"tq",
                "input":{"b":[2.0,-1.5e300,{"é\n":"y\u0001","a":null}],"a":true,"c":12345678901234567890}}"#,
        );
        let workflow = parse(r#"{"workflow":"onboard","input":[1,"two",{"x":0.25}]}"#);
        assert_eq!(
            activity.fingerprint(),
            "a5f7c69044753de594783847f8e6c807bcd89eb89edfe4a6f93b28debd1ba10f"
        );
        assert_eq!(
            workflow.fingerprint(),
            "20ba93c9763a4ceb6825676eca7a0524f449214428dd5a2e9a8757ba01287f04"
        );
    }

    #[test]
    fn key_order_whitespace_and_number_spelling_do_not_change_the_fingerprint() {
        let a = parse(
            r#"{"activity":"generate","providers":["p"],"input":{"a":1,"b":[2.0,{"x":"y","w":3}]}}"#,
        );
        let b = parse(
            r#"{ "input" : { "b" : [ 2, { "w" : 3.0, "x" : "y" } ], "a" : 1.0 },
                 "providers" : [ "p" ], "activity" : "generate" }"#,
        );
        assert_eq!(a.fingerprint(), b.fingerprint());
    }

    #[test]
    fn spelled_out_defaults_do_not_change_the_fingerprint() {
        let short = parse(r#"{"activity":"generate","providers":["p"],"input":{}}"#);
        let long = parse(
            r#"{"activity":"generate","providers":["p"],"input":{},"task_queue":"default",
                "options":{"heartbeat_timeout_s":30.0,"start_to_close_timeout_s":300,
                "schedule_to_start_timeout_s":null,"failover":"auto",
                "retry":{"max_attempts_per_provider":3,"initial_backoff_ms":200,
                         "max_backoff_ms":30000,"multiplier":2}}}"#,
        );
        assert_eq!(short.fingerprint(), long.fingerprint());
        assert_eq!(short, long);
    }

    #[test]
    fn different_input_or_options_change_the_fingerprint() {
        let base = parse(r#"{"activity":"generate","providers":["p"],"input":{"a":1}}"#);
        let other_input = parse(r#"{"activity":"generate","providers":["p"],"input":{"a":2}}"#);
        let other_order = parse(r#"{"activity":"generate","providers":["p","q"],"input":{"a":1}}"#);
        let no_heartbeat = parse(
            r#"{"activity":"generate","providers":["p"],"input":{"a":1},"options":{"heartbeat_timeout_s":null}}"#,
        );
        assert_ne!(base.fingerprint(), other_input.fingerprint());
        assert_ne!(base.fingerprint(), other_order.fingerprint());
        assert_ne!(base.fingerprint(), no_heartbeat.fingerprint());
    }

    #[test]
    fn a_partial_retry_policy_gets_the_missing_defaults() {
        let req = parse(
            r#"{"activity":"a","providers":["p"],"options":{"retry":{"max_attempts_per_provider":5}}}"#,
        );
        let JobTarget::Activity { options, .. } = req.target else {
            panic!("activity job")
        };
        assert_eq!(options.retry.max_attempts_per_provider, 5);
        assert_eq!(options.retry.initial_backoff_ms, 200);
        assert_eq!(options.heartbeat_timeout_s, Some(30));
    }

    #[test]
    fn malformed_requests_name_the_field() {
        for (body, needle) in [
            (
                json!({"activity": "a", "providers": ["p"], "options": {"retry": {"multiplier": "x"}}}),
                "options.retry.multiplier",
            ),
            (json!({"activity": "a"}), "providers"),
            (json!({"activity": "a", "providers": []}), "providers"),
            (
                json!({"activity": "a", "providers": ["p", "p"]}),
                "providers[1]",
            ),
            (json!({"workflow": "w", "activity": "a"}), "exactly one"),
            (json!({"input": {}}), "workflow"),
            (json!({"activity": 3, "providers": ["p"]}), "activity"),
            (
                json!({"activity": "a", "providers": ["p"], "options": {"heartbeat_timeout_s": 0}}),
                "heartbeat_timeout_s",
            ),
            (json!([1, 2]), "invalid type"),
        ] {
            let err = JobRequest::from_json(&body).expect_err("must be refused");
            assert_eq!(err.code(), "invalid_request", "{body}");
            assert!(err.to_string().contains(needle), "{body}: {err}");
        }
    }

    #[test]
    fn idempotency_keys_are_visible_ascii() {
        assert!(matches!(
            check_idempotency_key(""),
            Err(EngineError::MissingIdempotencyKey)
        ));
        assert!(matches!(
            check_idempotency_key("a b"),
            Err(EngineError::InvalidIdempotencyKey)
        ));
        assert!(matches!(
            check_idempotency_key("é"),
            Err(EngineError::InvalidIdempotencyKey)
        ));
        assert!(matches!(
            check_idempotency_key(&"k".repeat(256)),
            Err(EngineError::InvalidIdempotencyKey)
        ));
        assert!(check_idempotency_key("order-42:charge/~!").is_ok());
        assert!(check_idempotency_key(&"k".repeat(255)).is_ok());
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let retry = RetryPolicy {
            max_attempts_per_provider: 5,
            initial_backoff_ms: 200,
            max_backoff_ms: 1000,
            multiplier: 2.0,
        };
        assert_eq!(retry.backoff_ms(0), 200);
        assert_eq!(retry.backoff_ms(1), 400);
        assert_eq!(retry.backoff_ms(2), 800);
        assert_eq!(retry.backoff_ms(3), 1000);
        assert_eq!(retry.backoff_ms(400), 1000);
    }
}
