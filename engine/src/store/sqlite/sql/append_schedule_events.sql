-- Appends events to schedule histories, in order.
-- The write transaction is the only writer, so numbering after the maximum is safe.
INSERT INTO schedule_events (owner_id, schedule_name, id, at, type, tick_at, job_id, data)
SELECT ?1, ?2, COALESCE(MAX(id), 0) + 1, ?3, ?4, ?5, ?6, ?7
FROM schedule_events WHERE owner_id = ?1 AND schedule_name = ?2
