-- Starts a timer at a position unless one is there; `false` when it was.
INSERT INTO timers (owner_id, job_id, seq, fire_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
ON CONFLICT DO NOTHING
