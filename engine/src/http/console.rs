//! Reads the web UI (and any client) needs beyond docs/api.md's core: who a token is, and the
//! activities' contracts with their providers' certifications.

use axum::extract::State;
use axum::Json;
use onceflow_protocol::api::{ContractList, WhoAmI};

use super::error::{ApiResult, ErrorBody};
use super::extract::{AnyRole, As, ContractReaderRole};
use super::AppState;

/// The owner and role of the bearer token; any valid token may ask.
#[utoipa::path(get, path = "/v1/whoami", tag = "service",
    responses((status = 200, body = WhoAmI), (status = 401, description = "unauthenticated", body = ErrorBody)))]
pub async fn whoami(caller: As<AnyRole>) -> Json<WhoAmI> {
    Json(WhoAmI {
        owner: caller.owner().to_owned(),
        role: caller.0 .0.role,
    })
}

/// Output contracts and each provider's certification for them. A client or worker token
/// sees its owner's and those of `*` (which its jobs fall back on); an operator, and a
/// platform worker (`*`), every owner's.
#[utoipa::path(get, path = "/v1/contracts", tag = "client",
    responses((status = 200, body = ContractList), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list_contracts(
    State(state): State<AppState>,
    caller: As<ContractReaderRole>,
) -> ApiResult<Json<ContractList>> {
    Ok(Json(ContractList {
        contracts: state.engine.contracts(&caller.read_scope()).await?,
    }))
}
