//! API tokens: minted with a role and an owner, stored only as hashes, checked in
//! constant time.

use std::time::{Duration, Instant};

use dashmap::DashMap;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::Engine;
use crate::error::{EngineError, StoreError};
use crate::model::{IssuedToken, Principal, Role};
use crate::request::sha256_hex;
use crate::store::TokenRow;

/// Every token starts with this, so that leaked tokens are easy to spot.
const TOKEN_PREFIX: &str = "of_";

/// How long a token found in the database is trusted without looking again. A token
/// revoked through this engine stops working at once; one revoked through another engine
/// on the same database stops working here within this time.
pub(crate) const TOKEN_CACHE_TTL: Duration = Duration::from_secs(1);

/// Tokens recently found in the database, by hash. Only tokens that exist are kept (an
/// unknown token is looked up every time, so a new token works at once), and only for
/// [`TOKEN_CACHE_TTL`].
#[derive(Default)]
pub(crate) struct TokenCache {
    found: DashMap<String, (TokenRow, Instant)>,
}

impl TokenCache {
    fn fresh(&self, hash: &str) -> Option<TokenRow> {
        let entry = self.found.get(hash)?;
        let (row, at) = entry.value();
        (at.elapsed() < TOKEN_CACHE_TTL).then(|| row.clone())
    }

    fn keep(&self, row: &TokenRow) {
        // Expired entries go as new ones come, so the map holds about the tokens in use.
        if self.found.len() > 1024 {
            self.found
                .retain(|_, (_, at)| at.elapsed() < TOKEN_CACHE_TTL);
        }
        self.found
            .insert(row.token_hash.clone(), (row.clone(), Instant::now()));
    }

    fn forget(&self, token_id: Uuid) {
        self.found.retain(|_, (row, _)| row.id != token_id);
    }
}

impl Engine {
    /// Mints a token for `owner` with `role`. The token is returned this once; only its
    /// SHA-256 is stored.
    pub async fn create_token(&self, owner: &str, role: Role) -> Result<IssuedToken, EngineError> {
        if owner.is_empty()
            || owner.len() > 255
            || owner.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(EngineError::invalid_request(
                "owner: must be 1 to 255 characters without spaces",
            ));
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| {
            EngineError::Internal(StoreError::Corrupt(format!("no randomness: {e}")))
        })?;
        let token = format!(
            "{TOKEN_PREFIX}{}",
            secret
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let row = TokenRow {
            owner_id: owner.to_owned(),
            id: Uuid::now_v7(),
            role,
            token_hash: sha256_hex(token.as_bytes()),
        };
        self.store.insert_token(&row).await?;
        tracing::info!(owner, role = %role, token_id = %row.id, "token created");
        Ok(IssuedToken {
            id: row.id,
            token,
            owner: row.owner_id,
            role,
        })
    }

    /// The owner and role behind a bearer token; [`EngineError::Unauthenticated`] for a
    /// missing, unknown or revoked one.
    pub async fn authenticate(&self, token: &str) -> Result<Principal, EngineError> {
        if !token.starts_with(TOKEN_PREFIX) || token.len() > 128 {
            return Err(EngineError::Unauthenticated);
        }
        let hash = sha256_hex(token.as_bytes());
        let row = match self.tokens.fresh(&hash) {
            Some(row) => row,
            None => {
                // Concurrent requests share one lookup; each lookup starts after its
                // request came.
                let row = match self.batches.tokens.call(hash.clone()).await {
                    Some(row) => row,
                    None => self.store.token_by_hash(&hash).await?,
                }
                .ok_or(EngineError::Unauthenticated)?;
                self.tokens.keep(&row);
                row
            }
        };
        // The lookup is by hash; compare the full hash in constant time as well.
        if !bool::from(row.token_hash.as_bytes().ct_eq(hash.as_bytes())) {
            return Err(EngineError::Unauthenticated);
        }
        Ok(Principal {
            token_id: row.id,
            owner: row.owner_id,
            role: row.role,
        })
    }

    /// Revokes a token: it stops working at once on this engine, and within one second on
    /// other engines serving the same database.
    pub async fn revoke_token(&self, token_id: Uuid) -> Result<(), EngineError> {
        let revoked = self.store.revoke_token(token_id).await?;
        // Also when it was not found: it may have been revoked elsewhere a moment ago.
        self.tokens.forget(token_id);
        if revoked {
            tracing::info!(%token_id, "token revoked");
            Ok(())
        } else {
            Err(EngineError::NotFound)
        }
    }
}
