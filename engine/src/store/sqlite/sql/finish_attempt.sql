-- Ends an attempt that is in one of `from`, recording its error and what its completion
-- answered.
-- Attempt status: an attempt ends once, from the statuses the caller saw.
UPDATE attempts SET status = ?, error = COALESCE(?, error), completion_outcome = ?,
                    finished_at = COALESCE(finished_at, ?), lease_expires_at = NULL
WHERE owner_id = ? AND id = ? AND status IN (SELECT value FROM json_each(?))
