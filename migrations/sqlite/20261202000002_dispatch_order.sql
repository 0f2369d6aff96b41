-- Dispatch reads the scheduled attempts of one (queue, activity, provider) in
-- (available_at, id) order and stops at its LIMIT.
DROP INDEX attempts_dispatch;
CREATE INDEX attempts_dispatch ON attempts (task_queue, activity, provider, available_at, id)
    WHERE status = 'scheduled';
