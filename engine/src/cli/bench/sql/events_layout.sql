-- `--events-layout`: whether job_events is a partitioned table (`relkind` 'p') or a plain
-- one, as the migrations make it.
SELECT c.relkind = 'p' FROM pg_class c WHERE c.oid = 'job_events'::regclass
