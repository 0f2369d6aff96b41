//! The domain's nouns. The wire types (statuses, views, tasks) live in
//! [`onceflow_protocol::model`] so that the server and the worker SDK share one
//! definition; this module re-exports them and adds what only the engine needs.

use uuid::Uuid;

pub use onceflow_protocol::model::*;

/// Which owners an operation may see or touch.
///
/// A client token acts for one owner; operators and worker tokens of owner `*` act across
/// owners. Anything outside the scope answers `not_found`, never `forbidden`
/// (invariant 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Only this owner's rows.
    Owner(String),
    /// Every owner's rows (operators, platform workers).
    AllOwners,
}

impl Scope {
    /// The scope a worker token of `owner` serves: `*` serves every owner.
    pub fn for_worker(owner: &str) -> Scope {
        if owner == "*" {
            Scope::AllOwners
        } else {
            Scope::Owner(owner.to_owned())
        }
    }

    /// Whether a row of `owner` is visible in this scope.
    pub fn allows(&self, owner: &str) -> bool {
        match self {
            Scope::Owner(o) => o == owner,
            Scope::AllOwners => true,
        }
    }

    /// The single owner of this scope, if it is narrowed to one.
    pub fn owner(&self) -> Option<&str> {
        match self {
            Scope::Owner(o) => Some(o),
            Scope::AllOwners => None,
        }
    }
}

/// Who is calling: the owner and role of an authenticated token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's id (never the token itself).
    pub token_id: Uuid,
    /// The owner the token acts for.
    pub owner: String,
    /// What the token may do.
    pub role: Role,
}
