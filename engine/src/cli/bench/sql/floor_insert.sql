-- A submission: $1 owner, $2 id, $3 idempotency key; a repeated key changes nothing.
INSERT INTO bench_floor (owner_id, id, idempotency_key, status, version) VALUES ($1, $2, $3, 'scheduled', 1)
ON CONFLICT (owner_id, idempotency_key) DO NOTHING
