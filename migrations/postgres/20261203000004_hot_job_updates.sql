-- Heap-only updates of jobs.
--
-- A job row changes twice in an activity job's life (queued → running → succeeded). An
-- update is heap-only (HOT), writing no index entry, only if no indexed column changes
-- (columns named by partial indexes' predicates included) and its page has room. The
-- workflow dispatch index named `status` in its predicate, so every status change wrote
-- an entry in each of the jobs' indexes. It now names only `wf_open`, computed from the
-- row, which never changes for an activity job: both its updates are heap-only where the
-- page has room. New pages keep a fifth free for them.
ALTER TABLE jobs ADD COLUMN wf_open BOOLEAN
    GENERATED ALWAYS AS (kind = 'workflow' AND finished_at IS NULL AND NOT wf_parked) STORED;
DROP INDEX jobs_workflow_dispatch;
-- Dispatch of workflow tasks: only open, unparked workflow jobs (every move to a final
-- status sets finished_at).
CREATE INDEX jobs_workflow_dispatch ON jobs (task_queue, workflow) WHERE wf_open;
ALTER TABLE jobs SET (fillfactor = 80);
