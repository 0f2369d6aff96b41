-- Revokes a token; `false` when no unrevoked token has this id.
UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL
