-- Retention on Citus, first statement: lock_prunable_jobs.sql without the lock (it reads
-- every shard): up to `$2` jobs finished more than `$1` seconds ago (database clock),
-- with ids above `$3` if given, oldest first; citus_lock_jobs.sql then locks them owner
-- by owner.
SELECT j.owner_id, j.id
FROM jobs j
WHERE j.id < (lpad(to_hex((extract(epoch FROM now() - make_interval(secs => $1)) * 1000)::bigint),
                   12, '0') || '00000000000000000000')::uuid
  -- Retention: only a job finished longer ago than the retention, and none of whose
  -- attempts is live (a late completion of a live attempt still finds its job).
  AND ($3::uuid IS NULL OR j.id > $3)
  AND j.finished_at < now() - make_interval(secs => $1)
  AND j.status IN ('succeeded', 'failed', 'cancelled')
  AND NOT EXISTS (
      SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
      WHERE ac.owner_id = j.owner_id AND ac.job_id = j.id AND a.live)
ORDER BY j.id
LIMIT $2
