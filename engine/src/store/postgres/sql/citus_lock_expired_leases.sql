-- lock_expired_leases.sql for one owner (`$1`; Citus: one shard), `$2` limit.
SELECT a.owner_id, a.id FROM attempts a
JOIN jobs j ON j.owner_id = $1 AND j.id = a.job_id
WHERE a.owner_id = $1 AND a.status = 'started' AND a.lease_expires_at < now()
ORDER BY a.lease_expires_at
LIMIT $2
FOR UPDATE OF j, a SKIP LOCKED
