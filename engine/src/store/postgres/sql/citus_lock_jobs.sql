-- Retention on Citus: locks the jobs `$2` of owner `$1` (one shard) that are still
-- finished, in id order, without waiting.
-- A job another transaction holds (a replay, an operator) waits for a later pass.
SELECT id FROM jobs
WHERE owner_id = $1 AND id = ANY($2) AND status IN ('succeeded', 'failed', 'cancelled')
ORDER BY id
FOR UPDATE SKIP LOCKED
