-- The signals a workflow job's run (`?3` its first position) may see: untaken, or taken in the run.
SELECT seq, id, name, idempotency_key, fingerprint, payload, received_at, arrival, consumed_at, consumed_by
FROM signals WHERE owner_id = ?1 AND job_id = ?2 AND (consumed_by IS NULL OR consumed_by >= ?3)
ORDER BY seq
