-- The latest `limit` events of a schedule, oldest first.
SELECT * FROM (SELECT id, at, type, tick_at, job_id, data FROM schedule_events
               WHERE owner_id = ? AND schedule_name = ? ORDER BY id DESC LIMIT ?)
ORDER BY id
