-- Heartbeat, step 2: the lease of a started attempt held by the token, renewed.
-- Fencing (invariant 5): only the holder of the lease token of a started attempt
-- extends its lease, never past start-to-close.
UPDATE attempts SET heartbeat_at = ?, heartbeat_details = COALESCE(?, heartbeat_details),
    lease_expires_at = ?
WHERE owner_id = ? AND id = ? AND lease_token = ? AND status = 'started'
