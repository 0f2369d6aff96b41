-- Child workflows: a workflow job may start another workflow job of the same owner (its
-- child) under the idempotency key `{parent_job_id}:child:{seq}`, so a replayed parent
-- never starts it twice. `parent_job_id` names the parent (NULL for a top-level job);
-- `parent_arrival` is the child's outcome's number in the PARENT's arrival order, set once
-- when the child reaches a final status while its parent is open. Both are plain nullable
-- columns (no table rewrite); the index names only `parent_job_id`, which never changes
-- after the insert, so updates of a job stay heap-only. Parent and child share owner_id,
-- so on Citus they live on one shard.
ALTER TABLE jobs ADD COLUMN parent_job_id UUID;
ALTER TABLE jobs ADD COLUMN parent_arrival BIGINT;
-- A parent's children (the job view, the journal, the cancel cascade).
CREATE INDEX jobs_children ON jobs (owner_id, parent_job_id) WHERE parent_job_id IS NOT NULL;
