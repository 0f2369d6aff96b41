-- `--workload retention`: the age of the cutoff `$1` by this transaction's clock, the
-- retention that the store's lock_prunable_jobs.sql, run next in the same transaction,
-- turns back into exactly that cutoff.
SELECT extract(epoch FROM now() - $1::timestamptz)::float8
