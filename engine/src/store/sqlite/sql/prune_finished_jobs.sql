-- Retention: deletes at most `limit` jobs that finished (`succeeded`, `failed` or `cancelled`)
-- more than `retention` ago by the database clock and have no live attempt, with everything
-- they own (activities, attempts, events, timers), oldest first, only jobs whose id is above
-- `after` when given (where the previous batch of the same pass stopped, so a pass does not
-- walk again what it already passed). A job another transaction holds is left for a later
-- pass. Once a job is gone its idempotency key is free: submitting it again creates a new job.
-- Retention: only a job finished longer ago than the retention, and none of whose
-- attempts is live (a late completion of a live attempt still finds its job).
SELECT j.owner_id, j.id FROM jobs j
WHERE j.id < ? AND (? IS NULL OR j.id > ?)
  AND j.finished_at < ? AND j.status IN ('succeeded', 'failed', 'cancelled')
  AND NOT EXISTS (
      SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
      WHERE ac.owner_id = j.owner_id AND ac.job_id = j.id AND a.status IN ('scheduled', 'started', 'unknown'))
ORDER BY j.id LIMIT ?
