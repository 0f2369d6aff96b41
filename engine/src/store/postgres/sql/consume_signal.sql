-- Hands a signal to the wait at a workflow position.
-- A signal is consumed once, by one wait (and signals_one_per_wait: a wait takes one).
UPDATE signals SET consumed_by = $4, consumed_at = now()
WHERE owner_id = $1 AND job_id = $2 AND seq = $3 AND consumed_by IS NULL
