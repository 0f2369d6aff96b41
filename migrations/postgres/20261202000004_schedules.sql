-- Cron schedules (API.md, Schedules). A schedule never invents a second exactly-once
-- mechanism: each tick is an ordinary job submission whose idempotency key is
-- `schedule:{name}:{tick time}`, so invariant 1 makes a duplicate tick impossible.
CREATE TABLE schedules (
    owner_id               TEXT        NOT NULL,
    name                   TEXT        NOT NULL,
    cron                   TEXT        NOT NULL,
    timezone               TEXT        NOT NULL,
    job                    JSONB       NOT NULL,
    overlap                TEXT        NOT NULL CHECK (overlap IN ('skip', 'allow')),
    catchup_window_s       BIGINT      NOT NULL CHECK (catchup_window_s >= 1),
    paused                 BOOLEAN     NOT NULL DEFAULT false,
    -- NULL exactly while paused.
    next_fire_at           TIMESTAMPTZ,
    last_fired_at          TIMESTAMPTZ,
    last_job_id            UUID,
    fired_count            BIGINT      NOT NULL DEFAULT 0,
    skipped_overlap_count  BIGINT      NOT NULL DEFAULT 0,
    skipped_too_old_count  BIGINT      NOT NULL DEFAULT 0,
    -- Moves with every change; every update compares it.
    version                BIGINT      NOT NULL DEFAULT 1,
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner_id, name),
    CHECK (paused = (next_fire_at IS NULL))
);
-- The scheduler loop: unpaused schedules by when their next tick is due.
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused;

-- What a schedule did: fired, skipped for overlap, skipped as too old, changed.
CREATE TABLE schedule_events (
    owner_id      TEXT        NOT NULL,
    schedule_name TEXT        NOT NULL,
    id            BIGINT      GENERATED ALWAYS AS IDENTITY,
    at            TIMESTAMPTZ NOT NULL,
    type          TEXT        NOT NULL,
    tick_at       TIMESTAMPTZ,
    job_id        UUID,
    data          JSONB       NOT NULL DEFAULT '{}',
    PRIMARY KEY (owner_id, schedule_name, id),
    FOREIGN KEY (owner_id, schedule_name) REFERENCES schedules (owner_id, name) ON DELETE CASCADE
);
