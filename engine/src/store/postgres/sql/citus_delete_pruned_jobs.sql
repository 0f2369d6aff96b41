-- delete_pruned_jobs.sql for the jobs `$2` of one owner (`$1`; Citus: one shard), in the
-- same transaction once they are locked (citus_lock_jobs.sql).
WITH doomed AS (
    SELECT j.owner_id, j.id
    FROM jobs j WHERE j.owner_id = $1 AND j.id = ANY($2::uuid[])
    -- Retention, checked again on the newest rows: still finished, still no live attempt.
      AND j.status IN ('succeeded', 'failed', 'cancelled')
      AND NOT EXISTS (
          SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
          WHERE ac.owner_id = $1 AND ac.job_id = j.id AND a.live)
), doomed_activities AS (
    SELECT ac.owner_id,
        ac.id FROM activities ac JOIN doomed d ON ac.owner_id = $1 AND ac.job_id = d.id
), gone_attempts AS (
    DELETE FROM attempts a USING doomed_activities da WHERE a.owner_id = $1 AND a.activity_id = da.id
), gone_activities AS (
    DELETE FROM activities ac USING doomed_activities da WHERE ac.owner_id = $1 AND ac.id = da.id
), gone_events AS (
    DELETE FROM job_events e USING doomed d WHERE e.owner_id = $1 AND e.job_id = d.id
), gone_timers AS (
    DELETE FROM timers t USING doomed d WHERE t.owner_id = $1 AND t.job_id = d.id
), gone_signals AS (
    DELETE FROM signals s USING doomed d WHERE s.owner_id = $1 AND s.job_id = d.id
), gone_patches AS (
    DELETE FROM workflow_patches p USING doomed d WHERE p.owner_id = $1 AND p.job_id = d.id
), gone AS (
    DELETE FROM jobs j USING doomed d WHERE j.owner_id = $1 AND j.id = d.id RETURNING 1
)
SELECT count(*) FROM gone
