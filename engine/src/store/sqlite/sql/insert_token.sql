-- Stores a new token (its hash).
INSERT INTO api_tokens (owner_id, id, role, token_hash, created_at) VALUES (?, ?, ?, ?, ?)
