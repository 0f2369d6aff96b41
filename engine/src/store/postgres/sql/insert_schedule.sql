-- Inserts a schedule unless `(owner, name)` exists; `false` when it did.
-- One schedule per (owner, name): a concurrent creator inserts nothing.
INSERT INTO schedules (owner_id, name, cron, timezone, job, overlap, catchup_window_s, paused,
                       next_fire_at, version, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
ON CONFLICT (owner_id, name) DO NOTHING
