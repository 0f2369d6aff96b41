-- The order in which a workflow's outcomes arrived, so replay delivers them in that
-- order (a `select!` takes the same branch on every replay). `wf_arrivals` counts the
-- outcomes a workflow job has been woken by (one writer at a time, so strictly
-- ordered); each activity and timer records its number when its outcome arrives.
-- Rows resolved before this migration keep NULL: replay delivers those first, together.
ALTER TABLE jobs ADD COLUMN wf_arrivals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE activities ADD COLUMN arrival INTEGER;
ALTER TABLE timers ADD COLUMN arrival INTEGER;
