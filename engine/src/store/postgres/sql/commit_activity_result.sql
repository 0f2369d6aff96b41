-- Activity CAS (invariant 4): takes the result slot for `attempt_id` if the activity's version
-- is still `read_version` and nobody completed it.
-- Invariant 4 (the CAS commit): exactly one attempt takes the result slot; zero
-- rows means another attempt won or the slot was closed.
UPDATE activities
SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
    updated_at = now(), finished_at = now()
WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
