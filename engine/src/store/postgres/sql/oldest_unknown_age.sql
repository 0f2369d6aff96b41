-- Live attempts by status, and the age in seconds of the oldest `unknown` one (0 when none),
-- for the metrics gauges.
SELECT extract(epoch FROM now() - min(unknown_at))::float8 FROM attempts WHERE status = 'unknown'
