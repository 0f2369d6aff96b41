-- A completion whose result or error cannot be stored as sent (U+0000) ends its attempt
-- `invalid` and answers `invalid_result`; a repeat answers the same. SQLite cannot alter a
-- CHECK constraint, so the table is rebuilt with the same columns, keys and indexes (no
-- table refers to attempts).
CREATE TABLE attempts_rebuilt (
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
    completion_outcome TEXT CHECK (completion_outcome IN ('won', 'lost', 'recorded', 'contract_violation', 'invalid_result')),
    cancelled_by       TEXT,
    cancel_reason      TEXT,
    cancelled_at       INTEGER,
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (owner_id, id),
    UNIQUE (owner_id, activity_id, number),
    FOREIGN KEY (owner_id, activity_id) REFERENCES activities (owner_id, id) ON DELETE CASCADE
);
INSERT INTO attempts_rebuilt SELECT * FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_rebuilt RENAME TO attempts;
CREATE UNIQUE INDEX attempts_one_live_per_activity ON attempts (owner_id, activity_id)
    WHERE status IN ('scheduled', 'started', 'unknown');
CREATE INDEX attempts_lease_expiry ON attempts (lease_expires_at) WHERE status = 'started';
CREATE INDEX attempts_start_deadline ON attempts (start_deadline_at)
    WHERE status = 'scheduled' AND start_deadline_at IS NOT NULL;
CREATE INDEX attempts_unknown ON attempts (unknown_at) WHERE status = 'unknown';
CREATE INDEX attempts_dispatch ON attempts (task_queue, activity, provider, available_at, id)
    WHERE status = 'scheduled';
CREATE UNIQUE INDEX attempts_id_unique ON attempts (id, owner_id);
