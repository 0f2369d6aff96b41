-- `--workload retention`: jobs of owner `$1` left, and events left in all (both layouts).
SELECT (SELECT count(*) FROM jobs WHERE owner_id = $1), (SELECT count(*) FROM job_events)
