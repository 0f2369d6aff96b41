-- The commit of a winning result of an activity job's attempt, in one step: the activity CAS
-- (invariant 4) and, only when it takes the slot, the attempt → `succeeded` (from one of
-- `from`, outcome `won`) and the job CAS (at `job_version`). Returns whether the activity's
-- and the job's slots were taken.
-- Invariant 4 in one round trip: the activity CAS takes the slot or nothing
-- happens; the attempt and the job (its own CAS) move only from the row it took.
WITH act AS (
    UPDATE activities
    SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
        updated_at = now(), finished_at = now()
    WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
    RETURNING id
), att AS (
    UPDATE attempts
    SET status = 'succeeded', completion_outcome = 'won',
        -- The first finish time is kept (LEAST skips NULL; Citus refuses now() in COALESCE).
        finished_at = LEAST(finished_at, now()), lease_expires_at = NULL
    WHERE owner_id = $1 AND id = $4 AND status = ANY($6) AND EXISTS (SELECT 1 FROM act)
    RETURNING id
), jb AS (
    UPDATE jobs
    SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
        updated_at = now(), finished_at = now()
    WHERE owner_id = $1 AND id = $7 AND version = $8 AND completed_by IS NULL
      AND status IN ('queued', 'running') AND EXISTS (SELECT 1 FROM act)
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM act) AS activity_won, EXISTS (SELECT 1 FROM jb) AS job_won
