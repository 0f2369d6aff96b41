-- Child workflows: a workflow job may start another workflow job of the same owner (its
-- child) under the idempotency key `{parent_job_id}:child:{seq}`, so a replayed parent
-- never starts it twice. `parent_job_id` names the parent (NULL for a top-level job);
-- `parent_arrival` is the child's outcome's number in the PARENT's arrival order, set once
-- when the child reaches a final status while its parent is open.
ALTER TABLE jobs ADD COLUMN parent_job_id TEXT;
ALTER TABLE jobs ADD COLUMN parent_arrival INTEGER;
-- A parent's children (the job view, the journal, the cancel cascade).
CREATE INDEX jobs_children ON jobs (owner_id, parent_job_id) WHERE parent_job_id IS NOT NULL;
