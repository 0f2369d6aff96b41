-- Records when (in the job's arrival order) the owner's cancel arrived.
-- An outcome arrives once.
UPDATE jobs SET wf_cancel_arrival = $3
WHERE owner_id = $1 AND id = $2 AND wf_cancel_arrival IS NULL AND wf_cancel_requested_at IS NOT NULL
