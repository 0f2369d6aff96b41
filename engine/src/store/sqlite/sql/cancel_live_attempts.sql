-- Every live attempt of an activity but `except` → `cancelled`, with who and why; returns each
-- one cancelled with the status it had.
SELECT id,
    status FROM attempts WHERE owner_id = ?1 AND activity_id = ?2 AND (?3 IS NULL OR id <> ?3)
AND status IN ('scheduled', 'started', 'unknown')
