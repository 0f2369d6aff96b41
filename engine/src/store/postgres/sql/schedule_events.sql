-- The latest `limit` events of a schedule, oldest first.
SELECT * FROM (SELECT id, at, type, tick_at, job_id, data FROM schedule_events
               WHERE owner_id = $1 AND schedule_name = $2 ORDER BY id DESC LIMIT $3) latest
ORDER BY id
