-- `--events-layout partitioned`: job_events partitioned by job id, `$3` partitions of `$2`
-- seconds each, the first starting `$1` seconds ago (the history about to be seeded).
SELECT onceflow_bench_partition_job_events(now() - make_interval(secs => $1),
                                           make_interval(secs => $2), $3)
