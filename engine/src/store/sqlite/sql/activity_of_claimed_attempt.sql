-- Claim, step 2: the activity of an attempt being handed out (position, input, options, version).
-- Hands out up to `filter.limit` available scheduled attempts: each becomes `started` with a
-- fresh lease token, once; their activities become `running` and their queued jobs `running`.
-- Locks their jobs without waiting.
SELECT a.seq, a.input, a.options, a.version FROM attempts t
JOIN activities a ON a.owner_id = t.owner_id AND a.id = t.activity_id
WHERE t.owner_id = ? AND t.id = ?
