-- Starts a timer at a position unless one is there; `false` when it was.
INSERT INTO timers (owner_id, job_id, seq, fire_at, created_at) VALUES (?, ?, ?, ?,
    ?) ON CONFLICT DO NOTHING
