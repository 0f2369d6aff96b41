-- `unknown` → `started` with a fresh lease, for the holder of its lease token.
-- Fencing (invariant 5): only the holder of the lease token revives an unknown
-- attempt, and only within its start-to-close deadline.
UPDATE attempts t
SET status = 'started', unknown_at = NULL, heartbeat_at = now(),
    heartbeat_details = COALESCE($4, t.heartbeat_details),
    -- In UTC wall time (immutable arithmetic, which Citus accepts in an UPDATE's SET;
    -- the same instant as adding the seconds to the timestamptz).
    lease_expires_at = LEAST(
        timezone('UTC', timezone('UTC', now())
            + make_interval(secs => (a.options->>'heartbeat_timeout_s')::float8)),
        timezone('UTC', timezone('UTC', t.started_at)
            + make_interval(secs => (a.options->>'start_to_close_timeout_s')::float8)))
FROM activities a
WHERE t.owner_id = $1 AND t.id = $2 AND t.lease_token = $3 AND t.status = 'unknown'
  AND a.owner_id = t.owner_id AND a.id = t.activity_id
  -- Past its start-to-close deadline an attempt stays unknown: no revival.
  AND (a.options->>'start_to_close_timeout_s' IS NULL
       OR timezone('UTC', timezone('UTC', t.started_at)
              + make_interval(secs => (a.options->>'start_to_close_timeout_s')::float8)) > now())
