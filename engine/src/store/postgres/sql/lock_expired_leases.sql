-- The lease reaper (`$1` limit).
SELECT a.owner_id, a.id FROM attempts a
JOIN jobs j ON j.owner_id = a.owner_id AND j.id = a.job_id
WHERE a.status = 'started' AND a.lease_expires_at < now()
ORDER BY a.lease_expires_at
LIMIT $1
FOR UPDATE OF j, a SKIP LOCKED
