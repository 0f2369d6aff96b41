-- Long workflow histories (docs/workflows.md, "Long histories").
--
-- Sticky execution: a worker that completed a job's workflow task and kept its replayed
-- state names itself (`wf_sticky_worker`), with the highest place in the arrival order
-- that state has seen (`wf_sticky_horizon`) and the job version the task left
-- (`wf_sticky_version`). While the job is still at that version, its next task goes to
-- that worker carrying only the outcomes that arrived after the horizon; any other
-- worker, or any other version, gets the whole history.
--
-- Continue-as-new: a workflow job starts a fresh run under the same id and key. The run's
-- number (`wf_run`), its first position (`wf_run_from`: the journal of the run is the
-- positions from there on), the input it was continued with (`wf_run_input`, NULL for the
-- first run: the job's input) and when it started (`wf_run_started_at`, NULL for the
-- first run: the job's creation).
ALTER TABLE jobs ADD COLUMN wf_sticky_worker TEXT;
ALTER TABLE jobs ADD COLUMN wf_sticky_version INTEGER;
ALTER TABLE jobs ADD COLUMN wf_sticky_horizon INTEGER;
ALTER TABLE jobs ADD COLUMN wf_run INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN wf_run_from INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN wf_run_input TEXT;
ALTER TABLE jobs ADD COLUMN wf_run_started_at INTEGER;
-- A task's new part of the journal, read by arrival.
CREATE INDEX activities_by_arrival ON activities (owner_id, job_id, arrival) WHERE arrival IS NOT NULL;
CREATE INDEX timers_by_arrival ON timers (owner_id, job_id, arrival) WHERE arrival IS NOT NULL;
CREATE INDEX signals_by_arrival ON signals (owner_id, job_id, arrival) WHERE arrival IS NOT NULL;
