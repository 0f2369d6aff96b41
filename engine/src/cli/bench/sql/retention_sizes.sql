-- `--workload retention`: bytes on disk (tables, indexes, TOAST) of job_events (all its
-- partitions, or the one table: pg_partition_tree has no row for a plain table) and of jobs,
-- activities and attempts together.
SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('job_events')),
                pg_total_relation_size('job_events'))::bigint,
       (pg_total_relation_size('jobs') + pg_total_relation_size('activities')
        + pg_total_relation_size('attempts'))::bigint
