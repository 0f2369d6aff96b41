-- The floor's scratch queue (`onceflow bench --workload floor`): the columns a job's life
-- touches, with the engine's key shapes (one job per owner and idempotency key). Created
-- in the run's own schema (the pool's `search_path`), so runs on one database never meet.
CREATE TABLE bench_floor (
    owner_id        TEXT   NOT NULL,
    id              UUID   PRIMARY KEY,
    idempotency_key TEXT   NOT NULL,
    status          TEXT   NOT NULL,
    version         BIGINT NOT NULL,
    lease_token     UUID,
    result          JSONB,
    UNIQUE (owner_id, idempotency_key)
);
-- What a claim looks for: only scheduled rows, as the engine's dispatch index.
CREATE INDEX bench_floor_scheduled ON bench_floor (id) WHERE status = 'scheduled';
