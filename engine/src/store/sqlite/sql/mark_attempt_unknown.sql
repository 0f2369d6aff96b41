-- `started` with an expired lease → `unknown` (invariant 3).
-- Invariant 3: only a started attempt whose lease really expired becomes unknown.
UPDATE attempts SET status = 'unknown', unknown_at = lease_expires_at
WHERE owner_id = ? AND id = ? AND status = 'started' AND lease_expires_at < ?
