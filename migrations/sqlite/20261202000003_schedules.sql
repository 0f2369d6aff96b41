-- Cron schedules (API.md, Schedules); see the PostgreSQL migration of the same name.
-- Times are microseconds since the epoch.
CREATE TABLE schedules (
    owner_id               TEXT    NOT NULL,
    name                   TEXT    NOT NULL,
    cron                   TEXT    NOT NULL,
    timezone               TEXT    NOT NULL,
    job                    TEXT    NOT NULL,
    overlap                TEXT    NOT NULL CHECK (overlap IN ('skip', 'allow')),
    catchup_window_s       INTEGER NOT NULL CHECK (catchup_window_s >= 1),
    paused                 INTEGER NOT NULL DEFAULT 0,
    next_fire_at           INTEGER,
    last_fired_at          INTEGER,
    last_job_id            TEXT,
    fired_count            INTEGER NOT NULL DEFAULT 0,
    skipped_overlap_count  INTEGER NOT NULL DEFAULT 0,
    skipped_too_old_count  INTEGER NOT NULL DEFAULT 0,
    version                INTEGER NOT NULL DEFAULT 1,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    PRIMARY KEY (owner_id, name),
    CHECK (paused = (next_fire_at IS NULL))
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused;

CREATE TABLE schedule_events (
    owner_id      TEXT    NOT NULL,
    schedule_name TEXT    NOT NULL,
    id            INTEGER NOT NULL CHECK (id >= 1),
    at            INTEGER NOT NULL,
    type          TEXT    NOT NULL,
    tick_at       INTEGER,
    job_id        TEXT,
    data          TEXT    NOT NULL DEFAULT '{}',
    PRIMARY KEY (owner_id, schedule_name, id),
    FOREIGN KEY (owner_id, schedule_name) REFERENCES schedules (owner_id, name) ON DELETE CASCADE
);
