-- `--workload retention`, partitioned layout: drops the partitions of job_events older
-- than the cutoff `$1` whose jobs are all gone; answers how many.
SELECT onceflow_bench_drop_job_event_partitions($1)
