-- Writes every changeable field of `schedule` if its stored version is still
-- `schedule.version`, moving the version; `false` for a stale writer.
-- Schedule CAS: only a writer that read the current version changes the schedule,
-- so a tick is advanced (and fired) once, and a stale writer changes nothing.
UPDATE schedules
SET cron = $4, timezone = $5, job = $6, overlap = $7, catchup_window_s = $8, paused = $9,
    next_fire_at = $10, last_fired_at = $11, last_job_id = $12, fired_count = $13,
    skipped_overlap_count = $14, skipped_too_old_count = $15, updated_at = $16,
    version = version + 1
WHERE owner_id = $1 AND name = $2 AND version = $3
