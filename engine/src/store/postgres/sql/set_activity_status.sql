-- Moves an activity between open statuses when it is in one of `from`.
-- Activity status: moves only from the expected open statuses, never out of a
-- closed one.
UPDATE activities SET status = $4, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND status = ANY($3)
  AND status NOT IN ('succeeded', 'failed', 'cancelled')
