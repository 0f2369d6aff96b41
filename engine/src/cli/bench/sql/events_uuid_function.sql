-- `--events-layout partitioned`: the smallest UUIDv7-shaped id at time `at`, as the store's
-- retention computes its cutoff (lock_prunable_jobs.sql): partition bounds in job ids.
CREATE OR REPLACE FUNCTION onceflow_bench_uuid_at(at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
    SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
$$
