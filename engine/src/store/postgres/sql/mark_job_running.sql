-- Marks a queued job running.
-- Job status: only a queued job starts running.
UPDATE jobs SET status = 'running', updated_at = now()
WHERE owner_id = $1 AND id = $2 AND status = 'queued'
