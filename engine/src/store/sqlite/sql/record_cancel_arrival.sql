-- Records when (in the job's arrival order) the owner's cancel arrived.
-- An outcome arrives once.
UPDATE jobs SET wf_cancel_arrival = ?
WHERE owner_id = ? AND id = ? AND wf_cancel_arrival IS NULL AND wf_cancel_requested_at IS NOT NULL
