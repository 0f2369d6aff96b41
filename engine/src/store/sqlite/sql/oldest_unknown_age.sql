-- Live attempts by status, and the age in seconds of the oldest `unknown` one (0 when none),
-- for the metrics gauges.
SELECT min(unknown_at) FROM attempts WHERE status = 'unknown'
