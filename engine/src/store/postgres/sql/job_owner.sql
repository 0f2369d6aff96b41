-- The owner of a job visible in `scope`.
-- Owner isolation: a job outside the scope is not found.
SELECT owner_id FROM jobs WHERE id = $1 AND ($2::text IS NULL OR owner_id = $2)
