-- Retention, second statement, in the same transaction once the jobs are locked: deletes
-- each with its activities, attempts, events, timers, signals and patch markers. It runs
-- apart from the lock so that its snapshot is taken after the locks are held: rows a
-- transaction added to a job just before this one locked it (a replay's event) are seen and deleted with it, never
-- left behind; every writer of a job's rows holds the job's row lock or creates the job.
WITH doomed AS (
    SELECT j.owner_id, j.id
    FROM unnest($1::text[], $2::uuid[]) AS d(owner_id, id)
    JOIN jobs j ON j.owner_id = d.owner_id AND j.id = d.id
    -- Retention, checked again on the newest rows: still finished, still no live attempt.
    WHERE j.status IN ('succeeded', 'failed', 'cancelled')
      AND NOT EXISTS (
          SELECT 1 FROM activities ac JOIN attempts a ON a.owner_id = ac.owner_id AND a.activity_id = ac.id
          WHERE ac.owner_id = j.owner_id AND ac.job_id = j.id AND a.live)
), doomed_activities AS (
    SELECT ac.owner_id,
        ac.id FROM activities ac JOIN doomed d ON ac.owner_id = d.owner_id AND ac.job_id = d.id
), gone_attempts AS (
    DELETE FROM attempts a USING doomed_activities da WHERE a.owner_id = da.owner_id AND a.activity_id = da.id
), gone_activities AS (
    DELETE FROM activities ac USING doomed_activities da WHERE ac.owner_id = da.owner_id AND ac.id = da.id
), gone_events AS (
    DELETE FROM job_events e USING doomed d WHERE e.owner_id = d.owner_id AND e.job_id = d.id
), gone_timers AS (
    DELETE FROM timers t USING doomed d WHERE t.owner_id = d.owner_id AND t.job_id = d.id
), gone_signals AS (
    DELETE FROM signals s USING doomed d WHERE s.owner_id = d.owner_id AND s.job_id = d.id
), gone_patches AS (
    DELETE FROM workflow_patches p USING doomed d WHERE p.owner_id = d.owner_id AND p.job_id = d.id
), gone AS (
    DELETE FROM jobs j USING doomed d WHERE j.owner_id = d.owner_id AND j.id = d.id RETURNING 1
)
SELECT count(*) FROM gone
