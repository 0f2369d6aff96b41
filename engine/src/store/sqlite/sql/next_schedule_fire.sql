-- When the earliest unpaused schedule of any owner is due next, with the database's clock, so
-- that the caller can tell whether it is due without reading its own.
SELECT min(next_fire_at) FROM schedules WHERE NOT paused
