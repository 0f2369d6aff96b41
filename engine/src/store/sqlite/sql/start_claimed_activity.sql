-- Claim, step 4: its activity scheduled → running.
-- Hands out up to `filter.limit` available scheduled attempts: each becomes `started` with a
-- fresh lease token, once; their activities become `running` and their queued jobs `running`.
-- Locks their jobs without waiting.
-- Activity status: scheduled → running with its attempt; job: queued → running.
UPDATE activities SET status = 'running', updated_at = ? WHERE owner_id = ? AND id = ? AND status = 'scheduled'
