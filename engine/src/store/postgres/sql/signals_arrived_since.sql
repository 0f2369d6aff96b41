-- A job's signals that arrived after place `$3` in its arrival order. By arrival on signals_by_arrival.
SELECT seq, id, name, idempotency_key, fingerprint, payload, received_at, arrival, consumed_at, consumed_by
FROM signals WHERE owner_id = $1 AND job_id = $2 AND arrival > $3 ORDER BY seq
