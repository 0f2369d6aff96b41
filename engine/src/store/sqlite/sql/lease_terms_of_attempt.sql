-- Revival, step 1: what an attempt's fresh lease is computed from.
-- `unknown` → `started` with a fresh lease, for the holder of its lease token.
SELECT t.started_at,
    a.options FROM attempts t JOIN activities a ON a.owner_id = t.owner_id AND a.id = t.activity_id
WHERE t.owner_id = ? AND t.id = ?
