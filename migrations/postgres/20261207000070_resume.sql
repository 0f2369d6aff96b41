-- Resume: a failed job (or a parked workflow) runs again under its own id and key.
-- `activities.resumed_after` is the highest attempt number an activity had when a resume
-- reopened it: attempts numbered up to it count toward no retry budget (the budget starts
-- again), and a late result of one of them is `lost`. 0 for an activity never reopened.
-- `jobs.parent_seen_error` and `parent_seen_finished_at` keep, for a child resumed after
-- its parent saw it fail (`parent_arrival` set), the outcome the parent saw: the
-- parent's history is never rewritten. Plain columns with defaults (no table rewrite,
-- no index), so updates of a job stay heap-only.
ALTER TABLE activities ADD COLUMN resumed_after INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN parent_seen_error JSONB;
ALTER TABLE jobs ADD COLUMN parent_seen_finished_at TIMESTAMPTZ;
