-- Locks a schedule of `owner` for this transaction and returns it.
SELECT owner_id, name, cron, timezone, job, overlap, catchup_window_s, paused, next_fire_at,
    last_fired_at, last_job_id, fired_count, skipped_overlap_count, skipped_too_old_count, version,
    created_at, updated_at FROM schedules WHERE owner_id = $1 AND name = $2 FOR UPDATE
