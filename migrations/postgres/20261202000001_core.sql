-- onceflow core schema (PostgreSQL).
--
-- Every table carries owner_id and every primary or unique key includes it, so the
-- schema can be distributed by owner (DESIGN.md, Scale-out). Status columns hold the
-- exact words of API.md. Times are timestamptz and always come from the database clock.

-- Jobs: the durable record of one intent.
CREATE TABLE jobs (
    owner_id        TEXT        NOT NULL,
    id              UUID        NOT NULL,
    idempotency_key TEXT        NOT NULL,
    fingerprint     TEXT        NOT NULL,
    kind            TEXT        NOT NULL CHECK (kind IN ('workflow', 'activity')),
    workflow        TEXT,
    activity        TEXT,
    task_queue      TEXT        NOT NULL,
    input           JSONB       NOT NULL,
    status          TEXT        NOT NULL DEFAULT 'queued'
                    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    version         BIGINT      NOT NULL DEFAULT 1,
    result          JSONB,
    error           JSONB,
    completed_by    UUID,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at     TIMESTAMPTZ,
    PRIMARY KEY (owner_id, id),
    -- Invariant 1: one job per (owner, idempotency key).
    CONSTRAINT jobs_one_per_idempotency_key UNIQUE (owner_id, idempotency_key),
    CHECK ((kind = 'workflow') = (workflow IS NOT NULL)),
    CHECK ((kind = 'activity') = (activity IS NOT NULL))
);
-- Operators and workers address jobs by id alone (ids are UUIDv7, unique in practice).
CREATE INDEX jobs_by_id ON jobs (id);
-- Listing an owner's jobs, newest first.
CREATE INDEX jobs_by_owner_newest ON jobs (owner_id, id DESC);

-- Activities: the durable steps of a job, each with one result slot.
CREATE TABLE activities (
    owner_id     TEXT        NOT NULL,
    id           UUID        NOT NULL,
    job_id       UUID        NOT NULL,
    seq          INTEGER     NOT NULL CHECK (seq >= 0),
    name         TEXT        NOT NULL,
    providers    TEXT[]      NOT NULL CHECK (cardinality(providers) >= 1),
    options      JSONB       NOT NULL,
    task_queue   TEXT        NOT NULL,
    input        JSONB       NOT NULL,
    status       TEXT        NOT NULL DEFAULT 'scheduled'
                 CHECK (status IN ('scheduled', 'running', 'blocked', 'waiting',
                                   'succeeded', 'failed', 'cancelled')),
    -- Moves only when the result slot is claimed or closed (invariant 4).
    version      BIGINT      NOT NULL DEFAULT 0,
    completed_by UUID,
    result       JSONB,
    error        JSONB,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at  TIMESTAMPTZ,
    PRIMARY KEY (owner_id, id),
    UNIQUE (owner_id, job_id, seq),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);

-- Attempts: one try of an activity at one provider, with a lease.
CREATE TABLE attempts (
    owner_id           TEXT        NOT NULL,
    id                 UUID        NOT NULL,
    activity_id        UUID        NOT NULL,
    job_id             UUID        NOT NULL,
    number             INTEGER     NOT NULL CHECK (number >= 1),
    -- Denormalised from the activity so that dispatch reads one table.
    activity           TEXT        NOT NULL,
    task_queue         TEXT        NOT NULL,
    provider           TEXT        NOT NULL,
    status             TEXT        NOT NULL DEFAULT 'scheduled'
                       CHECK (status IN ('scheduled', 'started', 'succeeded', 'lost', 'failed',
                                         'invalid', 'unknown', 'expired', 'cancelled')),
    -- Not handed out before this moment (retry backoff).
    available_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Expires (safe failover) when nobody has started it by then.
    start_deadline_at  TIMESTAMPTZ,
    worker_id          TEXT,
    -- Fencing token: set once when the attempt is handed out, kept for its whole life.
    lease_token        UUID,
    lease_expires_at   TIMESTAMPTZ,
    -- The activity version the attempt read when it was handed out; its CAS compares it.
    read_version       BIGINT,
    heartbeat_at       TIMESTAMPTZ,
    heartbeat_details  JSONB,
    started_at         TIMESTAMPTZ,
    unknown_at         TIMESTAMPTZ,
    finished_at        TIMESTAMPTZ,
    error              JSONB,
    -- What the first completion answered (won, lost, recorded, contract_violation);
    -- a repeated completion answers the same.
    completion_outcome TEXT CHECK (completion_outcome IN ('won', 'lost', 'recorded', 'contract_violation')),
    cancelled_by       TEXT,
    cancel_reason      TEXT,
    cancelled_at       TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, id),
    UNIQUE (owner_id, activity_id, number),
    FOREIGN KEY (owner_id, activity_id) REFERENCES activities (owner_id, id) ON DELETE CASCADE
);
-- Invariant 2: at most one live attempt per activity.
CREATE UNIQUE INDEX attempts_one_live_per_activity ON attempts (owner_id, activity_id)
    WHERE status IN ('scheduled', 'started', 'unknown');
-- Workers address attempts by id alone.
CREATE INDEX attempts_by_id ON attempts (id);
-- Dispatch: only scheduled attempts, so the index stays small as history grows.
CREATE INDEX attempts_dispatch ON attempts (task_queue, available_at)
    WHERE status = 'scheduled';
-- Reaper: started attempts by lease expiry; scheduled attempts by start deadline.
CREATE INDEX attempts_lease_expiry ON attempts (lease_expires_at)
    WHERE status = 'started';
CREATE INDEX attempts_start_deadline ON attempts (start_deadline_at)
    WHERE status = 'scheduled' AND start_deadline_at IS NOT NULL;
-- Operators: unknown attempts by how long they have been unknown.
CREATE INDEX attempts_unknown ON attempts (unknown_at)
    WHERE status = 'unknown';

-- The append-only history of each job.
CREATE TABLE job_events (
    owner_id   TEXT        NOT NULL,
    job_id     UUID        NOT NULL,
    seq        BIGINT      NOT NULL CHECK (seq >= 1),
    at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    type       TEXT        NOT NULL,
    attempt_id UUID,
    actor      TEXT        NOT NULL,
    data       JSONB       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (owner_id, job_id, seq),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);

-- API tokens: only a hash of the token is ever stored.
CREATE TABLE api_tokens (
    owner_id   TEXT        NOT NULL,
    id         UUID        NOT NULL,
    role       TEXT        NOT NULL CHECK (role IN ('client', 'worker', 'operator', 'admin')),
    token_hash TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at TIMESTAMPTZ,
    PRIMARY KEY (owner_id, id)
);
CREATE INDEX api_tokens_by_hash ON api_tokens (token_hash) WHERE revoked_at IS NULL;

-- Output contracts: the JSON Schema an activity's results must satisfy. The most recently
-- registered contract of an (owner, activity) is its current one.
CREATE TABLE contracts (
    owner_id      TEXT        NOT NULL,
    activity      TEXT        NOT NULL,
    contract_hash TEXT        NOT NULL,
    output_schema JSONB       NOT NULL,
    registered_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (owner_id, activity, contract_hash)
);
CREATE INDEX contracts_current ON contracts (owner_id, activity, registered_at DESC);

-- Certifications: recorded runs of a provider's contract tests. Only the latest for a
-- (provider, contract hash) counts.
CREATE TABLE certifications (
    owner_id      TEXT        NOT NULL,
    id            UUID        NOT NULL,
    activity      TEXT        NOT NULL,
    provider      TEXT        NOT NULL,
    contract_hash TEXT        NOT NULL,
    passed        BOOLEAN     NOT NULL,
    report        JSONB       NOT NULL DEFAULT '{}'::jsonb,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (owner_id, id)
);
CREATE INDEX certifications_latest
    ON certifications (owner_id, activity, provider, contract_hash, created_at DESC, id DESC);
