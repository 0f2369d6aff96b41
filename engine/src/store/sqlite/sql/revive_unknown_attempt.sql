-- Revival, step 2: `unknown` → `started` with a fresh lease, for the holder of its lease token.
-- `unknown` → `started` with a fresh lease, for the holder of its lease token.
-- Fencing (invariant 5): only the holder of the lease token revives an unknown attempt.
UPDATE attempts SET status = 'started', unknown_at = NULL, heartbeat_at = ?,
                    heartbeat_details = COALESCE(?, heartbeat_details), lease_expires_at = ?
WHERE owner_id = ? AND id = ? AND lease_token = ? AND status = 'unknown'
