-- `--workload retention`: bytes on disk (tables, indexes, TOAST) of job_events (all its
-- partitions) and of jobs, activities and attempts together.
SELECT (SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree('job_events'))::bigint,
       (pg_total_relation_size('jobs') + pg_total_relation_size('activities')
        + pg_total_relation_size('attempts'))::bigint
