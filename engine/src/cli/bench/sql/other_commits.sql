-- `--workload retention`: transactions that ended in other databases of the cluster so far
-- (their WAL is counted too: the difference says whether the cluster was quiet).
SELECT coalesce(sum(xact_commit + xact_rollback), 0)::bigint
FROM pg_stat_database WHERE datname IS DISTINCT FROM current_database()
