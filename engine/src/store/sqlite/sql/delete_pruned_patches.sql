-- Retention: deletes the chosen jobs' patch markers.
WITH d(owner_id, id) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
DELETE FROM workflow_patches WHERE (owner_id, job_id) IN (SELECT owner_id, id FROM d)
