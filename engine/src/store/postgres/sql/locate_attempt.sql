-- Finds the owner and job of an attempt visible in `scope`.
-- Owner isolation: an attempt outside the scope is not found.
SELECT owner_id, job_id FROM attempts
WHERE id = $1 AND ($2::text IS NULL OR owner_id = $2)
