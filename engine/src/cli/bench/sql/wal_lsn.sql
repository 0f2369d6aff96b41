-- `--workload retention`: the cluster's WAL position; the difference of two is the WAL
-- written between them (by every database of the cluster).
SELECT pg_current_wal_lsn()::text
