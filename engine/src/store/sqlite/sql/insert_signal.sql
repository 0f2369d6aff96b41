-- Records a signal as its job's next (one writer at a time, so seq is strictly
-- increasing), unless the job already has a signal under its key.
-- Invariant 9: one signal per (job, idempotency key).
INSERT INTO signals (owner_id, job_id, seq, id, name, idempotency_key, fingerprint, payload,
    received_at)
SELECT ?1, ?2, coalesce(max(seq), 0) + 1, ?3, ?4, ?5, ?6, ?7, ?8
FROM signals WHERE owner_id = ?1 AND job_id = ?2
ON CONFLICT DO NOTHING
RETURNING seq, id, name, idempotency_key, fingerprint, payload, received_at, arrival, consumed_at, consumed_by
