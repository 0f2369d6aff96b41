-- Marks a workflow job ready for its next task, numbers the outcome that woke it, and wakes pollers.
-- Arrival order: the job's row lock orders the increments, one number per outcome.
UPDATE jobs SET wf_ready = true, wf_arrivals = wf_arrivals + 1, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND kind = 'workflow' AND status IN ('queued', 'running')
RETURNING task_queue, wf_arrivals
