-- Reaper: up to `?1` open children whose parent was cancelled (the cancel cascade's
-- transactions run after the parent's; this heals a crash in between). Reads only: each
-- child is cancelled on the single path.
SELECT c.owner_id, c.id FROM jobs c
JOIN jobs p ON p.owner_id = c.owner_id AND p.id = c.parent_job_id
WHERE c.parent_job_id IS NOT NULL AND c.status IN ('queued', 'running')
  AND p.status = 'cancelled'
ORDER BY c.owner_id, c.id
LIMIT ?1
