-- The compensation deadlines' loop: jobs whose compensation bound passed (`?1` the
-- store's clock, `?2` limit). The write transaction already holds the database's write lock.
SELECT owner_id, id FROM jobs
WHERE wf_cancel_deadline IS NOT NULL AND wf_cancel_deadline <= ?1
ORDER BY wf_cancel_deadline
LIMIT ?2
