-- MUTANT, test only (engine/src/mutants.rs, `ONCEFLOW_MUTANT=cas` in a build with the feature
-- `mutants`): commit_activity_job_result.sql with its CAS guards taken out, so that the
-- torture run can show it catches their absence. Never run otherwise.
WITH act AS (
    UPDATE activities
    SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
        updated_at = now(), finished_at = now()
    WHERE owner_id = $1 AND id = $2 AND $3::bigint IS NOT NULL
    RETURNING id
), att AS (
    UPDATE attempts
    SET status = 'succeeded', completion_outcome = 'won',
        finished_at = LEAST(finished_at, now()), lease_expires_at = NULL
    WHERE owner_id = $1 AND id = $4 AND status = ANY($6) AND EXISTS (SELECT 1 FROM act)
    RETURNING id
), jb AS (
    UPDATE jobs
    SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
        updated_at = now(), finished_at = now()
    WHERE owner_id = $1 AND id = $7 AND $8::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM act)
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM act) AS activity_won, EXISTS (SELECT 1 FROM jb) AS job_won
