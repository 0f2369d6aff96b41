-- The status of a job of `owner`, without locking it.
SELECT status FROM jobs WHERE owner_id = ? AND id = ?
