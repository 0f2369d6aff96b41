-- lock_overdue_scheduled.sql for one owner (`$1`; Citus: one shard), `$2` limit.
SELECT a.owner_id, a.id
FROM (SELECT owner_id, id FROM attempts
      WHERE owner_id = $1 AND status = 'scheduled' AND start_deadline_at IS NOT NULL
        AND start_deadline_at < now()
      ORDER BY start_deadline_at
      LIMIT $2) due
JOIN attempts a ON a.owner_id = $1 AND a.id = due.id
JOIN jobs j ON j.owner_id = $1 AND j.id = a.job_id
WHERE a.status = 'scheduled'
FOR UPDATE OF j, a SKIP LOCKED
