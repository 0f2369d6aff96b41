-- `--workload retention`: the cutoff that prunes the oldest share `$2` of the history of
-- owner `$1` (by finish time).
SELECT min(finished_at) + $2::float8 * (max(finished_at) - min(finished_at))
FROM jobs WHERE owner_id = $1
