-- The heartbeat fast path, batched: extends the leases of attempts `$1[i]` held by tokens
-- `$2[i]`, each within owner `$3[i]` (NULL: any), keeping details `$4[i]` (NULL: the last
-- ones); answers the extended attempts with their tokens and owners. One index probe per
-- attempt (see ARRAY_LOOKUPS); each row updated is reached by the ctid it locked; an
-- attempt another transaction holds is skipped, never waited for.
WITH found AS MATERIALIZED (
    SELECT f.row_ctid, ($2::uuid[])[k.i] AS token, ($4::jsonb[])[k.i] AS details,
           f.heartbeat_timeout_s, f.start_to_close_timeout_s
    FROM generate_subscripts($1::uuid[], 1) AS k(i)
    CROSS JOIN LATERAL (
        SELECT t.ctid AS row_ctid,
               (x.options->>'heartbeat_timeout_s')::float8 AS heartbeat_timeout_s,
               (x.options->>'start_to_close_timeout_s')::float8 AS start_to_close_timeout_s
        FROM attempts t
        -- An activity's options never change after it is created.
        CROSS JOIN LATERAL (
            SELECT x.options FROM activities x WHERE x.owner_id = t.owner_id AND x.id = t.activity_id OFFSET 0
        ) x
        -- Owner isolation: an attempt outside the renewal's owner is not found.
        WHERE t.id = ($1::uuid[])[k.i] AND (t.owner_id = ($3::text[])[k.i]) IS NOT FALSE
        -- An attempt another transaction holds is left to the single path, which
        -- waits for it alone: the others' leases are not held up behind it.
        OFFSET 0
        FOR UPDATE OF t SKIP LOCKED
    ) f
)
-- Fencing (invariant 5): only the holder of the lease token of a started attempt
-- extends its lease, never past start-to-close; checked on the row as it is now.
UPDATE attempts t
SET heartbeat_at = now(),
    heartbeat_details = COALESCE(f.details, t.heartbeat_details),
    lease_expires_at = LEAST(
        now() + make_interval(secs => f.heartbeat_timeout_s),
        t.started_at + make_interval(secs => f.start_to_close_timeout_s))
FROM found f
WHERE t.ctid = f.row_ctid AND t.lease_token = f.token AND t.status = 'started'
RETURNING t.id, t.lease_token, t.owner_id
