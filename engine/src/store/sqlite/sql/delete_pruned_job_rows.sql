-- Retention, last: deletes the chosen jobs (`?` a JSON array of [owner, id]).
WITH d(owner_id, id) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
DELETE FROM jobs WHERE (owner_id, id) IN (SELECT owner_id, id FROM d)
