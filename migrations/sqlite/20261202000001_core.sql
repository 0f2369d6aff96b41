-- onceflow schema for SQLite (the embedded default). Same tables, keys, unique and partial
-- unique indexes as PostgreSQL. Ids are TEXT (hyphenated UUIDs), JSON is TEXT, times are
-- INTEGER microseconds since the Unix epoch (UTC), booleans INTEGER 0/1.

CREATE TABLE jobs (
    owner_id            TEXT    NOT NULL,
    id                  TEXT    NOT NULL,
    idempotency_key     TEXT    NOT NULL,
    fingerprint         TEXT    NOT NULL,
    kind                TEXT    NOT NULL CHECK (kind IN ('workflow', 'activity')),
    workflow            TEXT,
    activity            TEXT,
    task_queue          TEXT    NOT NULL,
    input               TEXT    NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'queued'
                        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    version             INTEGER NOT NULL DEFAULT 1,
    result              TEXT,
    error               TEXT,
    completed_by        TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    finished_at         INTEGER,
    wf_ready            INTEGER NOT NULL DEFAULT 0,
    wf_lease_token      TEXT,
    wf_lease_expires_at INTEGER,
    wf_worker_id        TEXT,
    wf_parked           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner_id, id),
    -- Invariant 1: one job per (owner, idempotency key).
    CONSTRAINT jobs_one_per_idempotency_key UNIQUE (owner_id, idempotency_key)
);
CREATE INDEX jobs_by_id ON jobs (id);
CREATE INDEX jobs_by_owner_newest ON jobs (owner_id, id DESC);
CREATE INDEX jobs_workflow_dispatch ON jobs (task_queue, workflow)
    WHERE kind = 'workflow' AND status IN ('queued', 'running') AND wf_parked = 0;

CREATE TABLE activities (
    owner_id     TEXT    NOT NULL,
    id           TEXT    NOT NULL,
    job_id       TEXT    NOT NULL,
    seq          INTEGER NOT NULL CHECK (seq >= 0),
    name         TEXT    NOT NULL,
    providers    TEXT    NOT NULL,
    options      TEXT    NOT NULL,
    task_queue   TEXT    NOT NULL,
    input        TEXT    NOT NULL,
    status       TEXT    NOT NULL DEFAULT 'scheduled'
                 CHECK (status IN ('scheduled', 'running', 'blocked', 'waiting', 'succeeded', 'failed', 'cancelled')),
    version      INTEGER NOT NULL DEFAULT 0,
    completed_by TEXT,
    result       TEXT,
    error        TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    PRIMARY KEY (owner_id, id),
    UNIQUE (owner_id, job_id, seq),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);

CREATE TABLE attempts (
    owner_id           TEXT    NOT NULL,
    id                 TEXT    NOT NULL,
    activity_id        TEXT    NOT NULL,
    job_id             TEXT    NOT NULL,
    number             INTEGER NOT NULL CHECK (number >= 1),
    activity           TEXT    NOT NULL,
    task_queue         TEXT    NOT NULL,
    provider           TEXT    NOT NULL,
    status             TEXT    NOT NULL DEFAULT 'scheduled'
                       CHECK (status IN ('scheduled', 'started', 'succeeded', 'lost', 'failed',
                                         'invalid', 'unknown', 'expired', 'cancelled')),
    available_at       INTEGER NOT NULL,
    start_deadline_at  INTEGER,
    worker_id          TEXT,
    lease_token        TEXT,
    lease_expires_at   INTEGER,
    read_version       INTEGER,
    heartbeat_at       INTEGER,
    heartbeat_details  TEXT,
    started_at         INTEGER,
    unknown_at         INTEGER,
    finished_at        INTEGER,
    error              TEXT,
    completion_outcome TEXT CHECK (completion_outcome IN ('won', 'lost', 'recorded', 'contract_violation')),
    cancelled_by       TEXT,
    cancel_reason      TEXT,
    cancelled_at       INTEGER,
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (owner_id, id),
    UNIQUE (owner_id, activity_id, number),
    FOREIGN KEY (owner_id, activity_id) REFERENCES activities (owner_id, id) ON DELETE CASCADE
);
-- Invariant 2: at most one live attempt per activity.
CREATE UNIQUE INDEX attempts_one_live_per_activity ON attempts (owner_id, activity_id)
    WHERE status IN ('scheduled', 'started', 'unknown');
CREATE INDEX attempts_by_id ON attempts (id);
CREATE INDEX attempts_dispatch ON attempts (task_queue, available_at) WHERE status = 'scheduled';
CREATE INDEX attempts_lease_expiry ON attempts (lease_expires_at) WHERE status = 'started';
CREATE INDEX attempts_start_deadline ON attempts (start_deadline_at)
    WHERE status = 'scheduled' AND start_deadline_at IS NOT NULL;
CREATE INDEX attempts_unknown ON attempts (unknown_at) WHERE status = 'unknown';

CREATE TABLE job_events (
    owner_id   TEXT    NOT NULL,
    job_id     TEXT    NOT NULL,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    at         INTEGER NOT NULL,
    type       TEXT    NOT NULL,
    attempt_id TEXT,
    actor      TEXT    NOT NULL,
    data       TEXT    NOT NULL DEFAULT '{}',
    PRIMARY KEY (owner_id, job_id, seq),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);

CREATE TABLE api_tokens (
    owner_id   TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    role       TEXT    NOT NULL CHECK (role IN ('client', 'worker', 'operator', 'admin')),
    token_hash TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    PRIMARY KEY (owner_id, id)
);
CREATE INDEX api_tokens_by_hash ON api_tokens (token_hash) WHERE revoked_at IS NULL;

CREATE TABLE contracts (
    owner_id      TEXT    NOT NULL,
    activity      TEXT    NOT NULL,
    contract_hash TEXT    NOT NULL,
    output_schema TEXT    NOT NULL,
    registered_at INTEGER NOT NULL,
    PRIMARY KEY (owner_id, activity, contract_hash)
);
CREATE INDEX contracts_current ON contracts (owner_id, activity, registered_at DESC);

CREATE TABLE certifications (
    owner_id      TEXT    NOT NULL,
    id            TEXT    NOT NULL,
    activity      TEXT    NOT NULL,
    provider      TEXT    NOT NULL,
    contract_hash TEXT    NOT NULL,
    passed        INTEGER NOT NULL,
    report        TEXT    NOT NULL DEFAULT '{}',
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (owner_id, id)
);
CREATE INDEX certifications_latest ON certifications (owner_id, activity, provider, contract_hash, created_at DESC, id DESC);

CREATE TABLE timers (
    owner_id   TEXT    NOT NULL,
    job_id     TEXT    NOT NULL,
    seq        INTEGER NOT NULL CHECK (seq >= 0),
    fire_at    INTEGER NOT NULL,
    fired_at   INTEGER,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (owner_id, job_id, seq),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);
CREATE INDEX timers_due ON timers (fire_at) WHERE fired_at IS NULL;
