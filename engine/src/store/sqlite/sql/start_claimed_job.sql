-- Claim, step 5: its job queued → running.
-- Hands out up to `filter.limit` available scheduled attempts: each becomes `started` with a
-- fresh lease token, once; their activities become `running` and their queued jobs `running`.
-- Locks their jobs without waiting.
UPDATE jobs SET status = 'running', updated_at = ? WHERE owner_id = ? AND id = ? AND status = 'queued'
