-- Locks (without waiting) up to `limit` started attempts whose lease has expired, with their
-- jobs.
SELECT owner_id, id FROM attempts WHERE status = 'started' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ?
