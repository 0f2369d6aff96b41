-- Citus: the owner and job of each of the attempts `$1` (of any owner), read from every
-- shard in one statement without locking (completions then lock each job on its
-- owner's shard).
SELECT owner_id, job_id, id FROM attempts WHERE id = ANY($1)
