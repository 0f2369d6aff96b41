-- The winning commits of a batch of results of distinct activity jobs, each with the
-- guards of `commit_activity_job_result`: `$1`–`$7` one element per result (owner, job,
-- job version, activity, read version, attempt, result), `$8` the attempt statuses a
-- win may leave. Answers `ord` (1-based position), `activity_won`, `job_won` per result.
WITH w AS MATERIALIZED (
    SELECT w.*, j.job_ctid, x.act_ctid, t.att_ctid
    FROM unnest($1::text[], $2::uuid[], $3::int8[], $4::uuid[], $5::int8[], $6::uuid[], $7::jsonb[])
        WITH ORDINALITY AS w(owner_id, job_id, job_version, activity_id, read_version, attempt_id,
            result, ord)
    -- Each row by an index probe, locked (its job and attempt are held by this
    -- transaction's completion lock, and every writer of an activity holds its job
    -- first, so nobody waits), so that its ctid holds: each update below is a direct
    -- hit, whatever the tables' size when the plan was cached (see ARRAY_LOOKUPS).
    CROSS JOIN LATERAL (
        SELECT j.ctid AS job_ctid FROM jobs j WHERE j.owner_id = w.owner_id AND j.id = w.job_id OFFSET 0 FOR UPDATE
    ) j
    CROSS JOIN LATERAL (
        SELECT x.ctid AS act_ctid FROM activities x WHERE x.owner_id = w.owner_id AND x.id = w.activity_id OFFSET 0 FOR UPDATE
    ) x
    CROSS JOIN LATERAL (
        SELECT t.ctid AS att_ctid FROM attempts t WHERE t.owner_id = w.owner_id AND t.id = w.attempt_id OFFSET 0 FOR UPDATE
    ) t
), act AS (
    -- Invariant 4: each activity CAS takes its slot only at the version its attempt
    -- read and while nobody completed it; nothing else moves for a result that lost.
    UPDATE activities a
    SET status = 'succeeded', result = w.result, completed_by = w.attempt_id, version = a.version + 1,
        updated_at = now(), finished_at = now()
    FROM w
    WHERE a.ctid = w.act_ctid AND a.owner_id = w.owner_id AND a.id = w.activity_id
      AND a.version = w.read_version AND a.completed_by IS NULL
    RETURNING w.ord
), att AS (
    UPDATE attempts t
    SET status = 'succeeded', completion_outcome = 'won',
        finished_at = COALESCE(t.finished_at, now()), lease_expires_at = NULL
    FROM w JOIN act ON act.ord = w.ord
    WHERE t.ctid = w.att_ctid AND t.owner_id = w.owner_id AND t.id = w.attempt_id AND t.status = ANY($8)
    RETURNING w.ord
), jb AS (
    -- The job CAS, from the activity CAS's rows only, at the version locked.
    UPDATE jobs j
    SET status = 'succeeded', result = w.result, completed_by = w.attempt_id, version = j.version + 1,
        updated_at = now(), finished_at = now()
    FROM w JOIN act ON act.ord = w.ord
    WHERE j.ctid = w.job_ctid AND j.owner_id = w.owner_id AND j.id = w.job_id AND j.version = w.job_version
      AND j.completed_by IS NULL
      AND j.status IN ('queued', 'running')
    RETURNING w.ord
)
SELECT w.ord, EXISTS (SELECT 1 FROM act WHERE act.ord = w.ord) AS activity_won,
       EXISTS (SELECT 1 FROM jb WHERE jb.ord = w.ord) AS job_won
FROM w
