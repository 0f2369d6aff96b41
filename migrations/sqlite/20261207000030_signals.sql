-- Signals: messages from the outside world to a workflow job (docs/design.md, v1.1).
-- `seq` numbers a job's signals in the order they were recorded (1, 2, …, one writer at
-- a time); `arrival` is the signal's place in the job's arrival order (shared with
-- activities and timers), by which replay delivers it; `consumed_by` is the workflow
-- position of the wait that took it, so every replay hands it to the same wait.
CREATE TABLE signals (
    owner_id        TEXT    NOT NULL,
    job_id          TEXT    NOT NULL,
    seq             INTEGER NOT NULL CHECK (seq >= 1),
    id              TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    received_at     INTEGER NOT NULL,
    arrival         INTEGER,
    consumed_at     INTEGER,
    consumed_by     INTEGER CHECK (consumed_by >= 0),
    PRIMARY KEY (owner_id, job_id, seq),
    -- Invariant 9: one signal per (job, idempotency key).
    CONSTRAINT signals_one_per_key UNIQUE (owner_id, job_id, idempotency_key),
    -- A wait consumes one signal.
    CONSTRAINT signals_one_per_wait UNIQUE (owner_id, job_id, consumed_by),
    FOREIGN KEY (owner_id, job_id) REFERENCES jobs (owner_id, id) ON DELETE CASCADE
);
