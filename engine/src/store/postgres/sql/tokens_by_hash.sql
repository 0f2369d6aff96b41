-- The unrevoked tokens with any of these hashes (in any order; a hash that no unrevoked token
-- has is left out).
-- A revoked token stops working at once: each lookup is read after its request came.
SELECT owner_id, id, role, token_hash FROM api_tokens
WHERE token_hash = ANY($1) AND revoked_at IS NULL
