-- Deletes a schedule and its events; `false` when there was none.
DELETE FROM schedules WHERE owner_id = $1 AND name = $2
