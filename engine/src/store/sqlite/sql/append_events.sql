-- Appends events to job histories, in order.
-- The write transaction is the only writer, so numbering after the maximum is safe.
INSERT INTO job_events (owner_id, job_id, seq, at, type, attempt_id, actor, data)
SELECT ?1, ?2, COALESCE(MAX(seq), 0) + 1, ?3, ?4, ?5, ?6, ?7
FROM job_events WHERE owner_id = ?1 AND job_id = ?2
