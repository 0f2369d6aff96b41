-- lock_due_timers.sql for one owner (`$1`; Citus: one shard), `$2` limit.
SELECT t.owner_id, t.job_id, t.seq FROM timers t
JOIN jobs j ON j.owner_id = $1 AND j.id = t.job_id
WHERE t.owner_id = $1 AND t.fired_at IS NULL AND t.fire_at <= now()
ORDER BY t.fire_at
LIMIT $2
FOR UPDATE OF j, t SKIP LOCKED
