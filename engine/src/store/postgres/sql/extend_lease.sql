-- The heartbeat fast path: extends the lease of a `started` attempt held by `token` in one
-- statement.
-- Fencing (invariant 5): only the holder of the lease token of a started attempt
-- extends its lease, never past start-to-close.
UPDATE attempts t
SET heartbeat_at = now(),
    heartbeat_details = COALESCE($4, t.heartbeat_details),
    -- In UTC wall time (immutable arithmetic, which Citus accepts in an UPDATE's SET;
    -- the same instant as adding the seconds to the timestamptz).
    lease_expires_at = LEAST(
        timezone('UTC', timezone('UTC', now())
            + make_interval(secs => (a.options->>'heartbeat_timeout_s')::float8)),
        timezone('UTC', timezone('UTC', t.started_at)
            + make_interval(secs => (a.options->>'start_to_close_timeout_s')::float8)))
FROM activities a
WHERE t.owner_id = $1 AND t.id = $2 AND t.lease_token = $3 AND t.status = 'started'
  AND a.owner_id = t.owner_id AND a.id = t.activity_id
