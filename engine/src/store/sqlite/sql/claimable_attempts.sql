-- Claim, step 1: the available scheduled attempts of the registered (activity, provider) pairs, in dispatch order.
-- Hands out up to `filter.limit` available scheduled attempts: each becomes `started` with a
-- fresh lease token, once; their activities become `running` and their queued jobs `running`.
-- Locks their jobs without waiting.
SELECT a.owner_id, a.id FROM attempts a
WHERE a.status = 'scheduled' AND a.task_queue = ?1 AND a.available_at <= ?2
  AND (?3 IS NULL OR a.owner_id = ?3)
  AND EXISTS (SELECT 1 FROM json_each(?4) p
              WHERE json_extract(p.value, '$[0]') = a.activity AND json_extract(p.value, '$[1]') = a.provider)
ORDER BY a.available_at, a.id LIMIT ?5
