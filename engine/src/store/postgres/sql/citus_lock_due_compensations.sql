-- lock_due_compensations.sql for one owner (`$1`; Citus: one shard), `$2` limit.
SELECT owner_id, id FROM jobs
WHERE owner_id = $1 AND wf_cancel_deadline IS NOT NULL AND wf_cancel_deadline <= now()
ORDER BY wf_cancel_deadline
LIMIT $2
FOR UPDATE SKIP LOCKED
