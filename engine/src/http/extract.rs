//! Extractors: the caller behind a bearer token, JSON bodies that fail as docs/api.md says,
//! query strings and path ids.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;
use uuid::Uuid;

use super::error::ApiError;
use super::AppState;
use crate::error::EngineError;
use crate::model::{Principal, Role, Scope};

/// Deepest nesting of a JSON body the server accepts.
pub const MAX_JSON_DEPTH: usize = 64;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl Caller {
    /// Refuses with 403 `forbidden` unless the caller has one of `roles`.
    pub fn require(&self, roles: &[Role]) -> Result<&Principal, ApiError> {
        if roles.contains(&self.0.role) {
            Ok(&self.0)
        } else {
            Err(EngineError::Forbidden.into())
        }
    }

    /// The owner this caller acts for.
    pub fn owner(&self) -> &str {
        &self.0.owner
    }

    /// What this caller may read: its own owner's rows, or every owner's for operators
    /// (and platform workers of owner `*`).
    pub fn read_scope(&self) -> Scope {
        match self.0.role {
            Role::Operator | Role::Admin => Scope::AllOwners,
            Role::Worker => Scope::for_worker(&self.0.owner),
            Role::Client => Scope::Owner(self.0.owner.clone()),
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(EngineError::Unauthenticated)?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or(EngineError::Unauthenticated)?;
        let principal = state.engine.authenticate(token).await?;
        tracing::Span::current().record("owner", principal.owner.as_str());
        Ok(Caller(principal))
    }
}

/// A set of roles allowed on an endpoint.
pub trait Roles: Send + Sync + 'static {
    /// The roles.
    const ALLOWED: &'static [Role];
}

/// Role `client`.
pub struct ClientRole;
/// Role `client` or `operator` (reads).
pub struct ReaderRole;
/// Role `client`, `worker` or `operator` (reads of contracts and certifications).
pub struct ContractReaderRole;
/// Any role: every valid token.
pub struct AnyRole;
/// Role `worker`.
pub struct WorkerRole;
/// Role `operator`.
pub struct OperatorRole;
/// Role `admin`.
pub struct AdminRole;

impl Roles for ClientRole {
    const ALLOWED: &'static [Role] = &[Role::Client];
}
impl Roles for ReaderRole {
    const ALLOWED: &'static [Role] = &[Role::Client, Role::Operator];
}
impl Roles for ContractReaderRole {
    const ALLOWED: &'static [Role] = &[Role::Client, Role::Worker, Role::Operator];
}
impl Roles for AnyRole {
    const ALLOWED: &'static [Role] = &[Role::Client, Role::Worker, Role::Operator, Role::Admin];
}
impl Roles for WorkerRole {
    const ALLOWED: &'static [Role] = &[Role::Worker];
}
impl Roles for OperatorRole {
    const ALLOWED: &'static [Role] = &[Role::Operator];
}
impl Roles for AdminRole {
    const ALLOWED: &'static [Role] = &[Role::Admin];
}

/// A caller with one of the roles of `R`: 401 without a valid token and 403 with the
/// wrong role, both before the body is read.
pub struct As<R: Roles>(pub Caller, std::marker::PhantomData<R>);

impl<R: Roles> FromRequestParts<AppState> for As<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.require(R::ALLOWED)?;
        Ok(As(caller, std::marker::PhantomData))
    }
}

impl<R: Roles> std::ops::Deref for As<R> {
    type Target = Caller;

    fn deref(&self) -> &Caller {
        &self.0
    }
}

/// A JSON body: any bytes that are not JSON answer 400 `invalid_json` (whatever the
/// `Content-Type`), a body over the limit 413 `payload_too_large`, a missing or
/// wrong-typed field 400 `invalid_request` naming the field, and so does a string or key
/// holding U+0000 anywhere in it (no store can hold it; see [`crate::text`]).
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let value = json_value(req, state).await?;
        refuse_nul(&value, "")?;
        from_value(value).map(JsonBody)
    }
}

/// A body that may carry workers' answers (`result` and `error`, at its top or in its
/// `completions`; a workflow task's `commands`): as [`JsonBody`], except that a U+0000
/// inside an answer is left for the engine to judge (422 `invalid_result` and the attempt
/// `invalid`; a workflow parked), so that a worker's answer that cannot be stored ends
/// its attempt instead of being retried for ever. A `lease_token` is never stored, only
/// compared: whatever it holds, a token that is not the attempt's answers `lease_lost`.
pub struct AnswerBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for AnswerBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let value = json_value(req, state).await?;
        refuse_nul_outside_answers(&value)?;
        from_value(value).map(AnswerBody)
    }
}

/// 400 `invalid_request` naming the first place in `value` (a path from `root`) where
/// text holds U+0000.
pub fn refuse_nul(value: &Value, root: &str) -> Result<(), ApiError> {
    match crate::text::nul_in_json(value, root) {
        Some(at) => Err(EngineError::invalid_request(crate::text::nul_message(&at)).into()),
        None => Ok(()),
    }
}

fn refuse_nul_outside_answers(value: &Value) -> Result<(), ApiError> {
    let Value::Object(body) = value else {
        return refuse_nul(value, "");
    };
    for (key, item) in body {
        match (key.as_str(), item) {
            ("completions", Value::Array(completions)) => {
                for (i, completion) in completions.iter().enumerate() {
                    match completion {
                        Value::Object(members) => {
                            refuse_nul_in_members(members, &format!("completions[{i}]."))?
                        }
                        other => refuse_nul(other, &format!("completions[{i}]"))?,
                    }
                }
            }
            _ => refuse_nul_in_members(std::iter::once((key, item)), "")?,
        }
    }
    Ok(())
}

/// [`refuse_nul`] for each member but the worker's answer (`result`, `error`,
/// `commands`: the engine judges those) and its lease token (opaque: one holding U+0000
/// holds no attempt, `lease_lost`).
fn refuse_nul_in_members<'a>(
    members: impl IntoIterator<Item = (&'a String, &'a Value)>,
    prefix: &str,
) -> Result<(), ApiError> {
    for (member, inner) in members {
        let at = format!("{prefix}{}", crate::text::printable(member));
        if crate::text::has_nul(member) {
            return Err(EngineError::invalid_request(crate::text::nul_message(&at)).into());
        }
        if !matches!(
            member.as_str(),
            "result" | "error" | "commands" | "lease_token"
        ) {
            refuse_nul(inner, &at)?;
        }
    }
    Ok(())
}

/// Reads a body as a JSON value, with the limits of [`JsonBody`].
pub async fn json_value(req: Request, state: &AppState) -> Result<Value, ApiError> {
    let limit = state.config.body_limit_bytes;
    let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge { limit }
        } else {
            ApiError::InvalidJson(rejection.body_text())
        }
    })?;
    if bytes.len() > limit {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    if depth(&value) > MAX_JSON_DEPTH {
        return Err(ApiError::InvalidJson(format!(
            "nested deeper than {MAX_JSON_DEPTH} levels"
        )));
    }
    Ok(value)
}

/// Deserializes a parsed body, naming the offending field on failure.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        EngineError::invalid_request(if path == "." {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        })
        .into()
    })
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The query string as key/value pairs.
pub struct QueryPairs(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryPairs {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let pairs =
            serde_urlencoded::from_str::<Vec<(String, String)>>(parts.uri.query().unwrap_or(""))
                .map_err(|e| EngineError::invalid_request(format!("query string: {e}")))?;
        if let Some((name, _)) = pairs
            .iter()
            .find(|(k, v)| crate::text::has_nul(k) || crate::text::has_nul(v))
        {
            return Err(EngineError::invalid_request(crate::text::nul_message(
                &crate::text::printable(name),
            ))
            .into());
        }
        Ok(QueryPairs(pairs))
    }
}

impl QueryPairs {
    /// The value of `name`, if given (and not empty).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// `name` parsed as an unsigned integer, if given.
    pub fn number(&self, name: &str) -> Result<Option<u64>, ApiError> {
        self.get(name)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    EngineError::invalid_request(format!("{name}: must be a non-negative integer"))
                        .into()
                })
            })
            .transpose()
    }
}

impl QueryPairs {
    /// `name` parsed as an RFC 3339 time (e.g. `2026-12-02T16:00:00Z`), if given.
    pub fn time(&self, name: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
        self.get(name)
            .map(|v| {
                chrono::DateTime::parse_from_rfc3339(v)
                    .map(|t| t.with_timezone(&chrono::Utc))
                    .map_err(|_| {
                        EngineError::invalid_request(format!("{name}: must be an RFC 3339 time"))
                            .into()
                    })
            })
            .transpose()
    }
}

/// An id from the path; one that is not a UUID cannot exist: 404 `not_found`.
pub fn path_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| EngineError::NotFound.into())
}
