-- Continue-as-new (`$1` owner, `$2` job, `$3` version, `$4` the new run's first position, `$5` its input):
-- the next run of the job, ready for its first task.
-- Job status and version: only an open job at the version its task left starts a run, and
-- runs only move forward (a position is never reused).
UPDATE jobs
SET wf_run = wf_run + 1, wf_run_from = $4, wf_run_input = $5, wf_run_started_at = now(),
    wf_ready = true, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND version = $3 AND status IN ('queued', 'running')
  AND wf_run_from < $4
