-- Activity CAS (invariant 4): takes the result slot for `attempt_id` if the activity's version
-- is still `read_version` and nobody completed it.
-- Invariant 4 (the CAS commit): exactly one attempt takes the result slot; zero
-- rows means another attempt won or the slot was closed.
UPDATE activities SET status = 'succeeded', result = ?, completed_by = ?, version = version + 1,
                      updated_at = ?, finished_at = ?
WHERE owner_id = ? AND id = ? AND version = ? AND completed_by IS NULL
