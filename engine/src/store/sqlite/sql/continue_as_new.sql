-- Continue-as-new (`?1` now, `?2` owner, `?3` job, `?4` version, `?5` the new run's first position, `?6` its input):
-- the next run of the job, ready for its first task.
-- Job status and version: only an open job at the version its task left starts a run, and
-- runs only move forward (a position is never reused).
UPDATE jobs
SET wf_run = wf_run + 1, wf_run_from = ?5, wf_run_input = ?6, wf_run_started_at = ?1,
    wf_ready = 1, updated_at = ?1
WHERE owner_id = ?2 AND id = ?3 AND version = ?4 AND status IN ('queued', 'running')
  AND wf_run_from < ?5
