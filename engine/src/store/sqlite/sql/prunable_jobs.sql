-- Retention, first: chooses up to `limit` jobs finished before the cutoff (`?` bounds: the id
-- bound of the cutoff, the id to start after or NULL twice, the cutoff, the limit), none
-- of whose attempts is live, oldest first. One writer: nobody else holds them.
-- Retention: only a job finished longer ago than the retention, and none of whose
-- attempts is live (a late completion of a live attempt still finds its job).
SELECT j.owner_id, j.id FROM jobs j
WHERE j.id < ? AND (? IS NULL OR j.id > ?)
  AND j.finished_at < ? AND j.status IN ('succeeded', 'failed', 'cancelled')
  AND NOT EXISTS (
      SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
      WHERE ac.owner_id = j.owner_id AND ac.job_id = j.id AND a.status IN ('scheduled', 'started', 'unknown'))
ORDER BY j.id LIMIT ?
