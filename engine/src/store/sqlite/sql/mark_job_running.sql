-- Marks a queued job running.
-- Job status: only a queued job starts running.
UPDATE jobs SET status = 'running', updated_at = ? WHERE owner_id = ? AND id = ? AND status = 'queued'
