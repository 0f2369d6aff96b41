-- The unrevoked token with this hash.
-- A revoked token stops working at once.
SELECT owner_id, id, role, token_hash FROM api_tokens
WHERE token_hash = $1 AND revoked_at IS NULL
