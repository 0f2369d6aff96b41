-- `--workload retention`: after the prune, what autovacuum would do next on the tables it
-- touched (in the plain layout, the dead events; in both, the dead jobs, activities and
-- attempts).
VACUUM jobs, activities, attempts, job_events
