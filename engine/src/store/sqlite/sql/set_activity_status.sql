-- Moves an activity between open statuses when it is in one of `from`.
-- Activity status: moves only from the expected open statuses, never out of a closed one.
UPDATE activities SET status = ?, updated_at = ?
WHERE owner_id = ? AND id = ? AND status IN (SELECT value FROM json_each(?))
  AND status NOT IN ('succeeded', 'failed', 'cancelled')
