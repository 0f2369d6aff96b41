-- Revokes a token; `false` when no unrevoked token has this id.
UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL
