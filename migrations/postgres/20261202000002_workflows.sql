-- Workflow jobs: a workflow task is leased like an attempt, and durable timers.

-- The workflow task of a job. `wf_ready`: something happened the workflow has not seen
-- yet. A task is handed out when ready and unleased, or when its lease expired.
ALTER TABLE jobs
    ADD COLUMN wf_ready            BOOLEAN     NOT NULL DEFAULT false,
    ADD COLUMN wf_lease_token      UUID,
    ADD COLUMN wf_lease_expires_at TIMESTAMPTZ,
    ADD COLUMN wf_worker_id        TEXT,
    -- A parked workflow (e.g. non-determinism) gets no more tasks until someone acts.
    ADD COLUMN wf_parked           BOOLEAN     NOT NULL DEFAULT false;

-- Dispatch of workflow tasks: only open, unparked workflow jobs.
CREATE INDEX jobs_workflow_dispatch ON jobs (task_queue, workflow)
    WHERE kind = 'workflow' AND status IN ('queued', 'running') AND NOT wf_parked;

-- Durable timers, at positions shared with the job's activities (call order).
CREATE TABLE timers (
    owner_id   TEXT        NOT NULL,
    job_id     UUID        NOT NULL,
    seq        INTEGER     NOT NULL CHECK (seq >= 0),
    fire_at    TIMESTAMPTZ NOT NULL,
    fired_at   TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, job_id, seq),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);
-- The timer loop: unfired timers by when they are due.
CREATE INDEX timers_due ON timers (fire_at) WHERE fired_at IS NULL;
