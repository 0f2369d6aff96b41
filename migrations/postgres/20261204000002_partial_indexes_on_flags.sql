-- Partial indexes of attempts on flags that only their own statements name.
--
-- A claim asks for `status = 'scheduled'`, which also implies the predicate of the live
-- attempts' unique index (`status IN ('scheduled', 'started', 'unknown')`). With
-- statistics gathered while nothing was live (a quiet hour, then ANALYZE), PostgreSQL
-- estimates that index empty and scanned all of it, every live attempt of every queue,
-- for each claim, and the claim's update of the attempts it picked the same way, instead
-- of a direct hit: with a million finished jobs and a burst of work, e2e ran a quarter
-- slower than on an empty database. Each partial index now names a stored flag computed
-- from the status; no other statement implies it, so the planner can only use it where
-- the statement says so. The flags follow the status by construction.
ALTER TABLE attempts
    ADD COLUMN live BOOLEAN GENERATED ALWAYS AS (status IN ('scheduled', 'started', 'unknown')) STORED,
    ADD COLUMN dispatchable BOOLEAN GENERATED ALWAYS AS (status = 'scheduled') STORED;

-- Invariant 2: at most one live attempt per activity.
DROP INDEX attempts_one_live_per_activity;
CREATE UNIQUE INDEX attempts_one_live_per_activity ON attempts (owner_id, activity_id) WHERE live;

-- Dispatch: only scheduled attempts, in dispatch order.
DROP INDEX attempts_dispatch;
CREATE INDEX attempts_dispatch ON attempts (task_queue, activity, provider, available_at, id) WHERE dispatchable;
