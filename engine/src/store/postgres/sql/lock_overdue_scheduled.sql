-- Schedule-to-start expiry (`$1` limit).
-- The overdue attempts are read in deadline order from their partial index and the
-- limit stops the scan; only those are joined and locked.
SELECT a.owner_id, a.id
FROM (SELECT owner_id, id FROM attempts
      WHERE status = 'scheduled' AND start_deadline_at IS NOT NULL AND start_deadline_at < now()
      ORDER BY start_deadline_at
      LIMIT $1) due
JOIN attempts a ON a.owner_id = due.owner_id AND a.id = due.id
JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
WHERE a.status = 'scheduled'
FOR UPDATE OF j, a SKIP LOCKED
