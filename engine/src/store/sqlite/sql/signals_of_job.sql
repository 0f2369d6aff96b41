-- A job's signals in the order they were recorded.
SELECT seq, id, name, idempotency_key, fingerprint, payload, received_at, arrival, consumed_at, consumed_by
FROM signals WHERE owner_id = ? AND job_id = ? ORDER BY seq
