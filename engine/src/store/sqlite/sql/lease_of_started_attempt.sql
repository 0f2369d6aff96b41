-- Heartbeat, step 1: a started attempt held by the token, with what its lease is computed from.
-- Owner isolation: an attempt outside the owner is not found.
SELECT t.owner_id, t.started_at, a.options FROM attempts t
JOIN activities a ON a.owner_id = t.owner_id AND a.id = t.activity_id
WHERE t.id = ? AND (? IS NULL OR t.owner_id = ?) AND t.lease_token = ? AND t.status = 'started'
