-- The compensation deadlines' loop (`$1` limit): jobs whose compensation bound passed.
-- Each is taken by one engine only (SKIP LOCKED); a job held elsewhere waits for the next pass.
SELECT owner_id, id FROM jobs
WHERE wf_cancel_deadline IS NOT NULL AND wf_cancel_deadline <= now()
ORDER BY wf_cancel_deadline
LIMIT $1
FOR UPDATE SKIP LOCKED
