-- Retention, after the jobs are chosen: deletes their attempts.
WITH d(owner_id, id) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
DELETE FROM attempts WHERE (owner_id, activity_id) IN
    (SELECT ac.owner_id, ac.id FROM activities ac JOIN d ON ac.owner_id = d.owner_id AND ac.job_id = d.id)
