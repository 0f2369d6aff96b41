-- After `--history` on PostgreSQL: what autovacuum would soon do after a bulk insert. The
-- planner sees the tables as they now are, and the rows' visibility is settled, so the
-- measured run does not set a million rows' hint bits as it goes.
VACUUM (ANALYZE) jobs, activities, attempts, job_events
