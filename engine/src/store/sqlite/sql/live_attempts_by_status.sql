-- Live attempts by status, and the age in seconds of the oldest `unknown` one (0 when none),
-- for the metrics gauges.
SELECT status, count(*) AS n FROM attempts WHERE status IN ('scheduled', 'started', 'unknown') GROUP BY status
