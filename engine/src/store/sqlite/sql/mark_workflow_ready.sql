-- Marks a workflow job ready for its next task, numbers the outcome that woke it, and wakes pollers.
-- Arrival order: one writer at a time orders the increments, one number per outcome.
UPDATE jobs SET wf_ready = 1, wf_arrivals = wf_arrivals + 1, updated_at = ?
WHERE owner_id = ? AND id = ? AND kind = 'workflow' AND status IN ('queued', 'running')
RETURNING wf_arrivals
