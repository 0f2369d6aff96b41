-- The signal a job holds under an idempotency key.
SELECT seq, id, name, idempotency_key, fingerprint, payload, received_at, arrival, consumed_at, consumed_by
FROM signals WHERE owner_id = ? AND job_id = ? AND idempotency_key = ?
