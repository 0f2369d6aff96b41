-- `--events-layout partitioned`: the function that turns job_events into a table
-- partitioned by ranges of job id. Job ids are UUIDv7 (their first 48 bits are the job's
-- creation time in ms), so a range of ids is a range of time, every event of a job lands in
-- its job's partition, and the primary key (owner_id, job_id, seq) still holds: it contains
-- the partition key. Partitions: `job_events_before` (ids before `first_at`), `parts`
-- partitions `job_events_pNN` of `width` each, and `job_events_current` (everything after,
-- where new jobs go). Their bounds are kept in onceflow_bench_event_partitions for the
-- retention workload. The rows already there are moved over. Bench only: the engine's
-- migrations make job_events a plain table.
CREATE OR REPLACE FUNCTION onceflow_bench_partition_job_events(first_at timestamptz, width interval, parts integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    lower_at timestamptz;
    upper_at timestamptz;
BEGIN
    CREATE TABLE onceflow_bench_event_partitions (
        name     text PRIMARY KEY,
        lower_id uuid NOT NULL,
        upper_id uuid NOT NULL,
        upper_at timestamptz NOT NULL
    );
    ALTER TABLE job_events RENAME TO job_events_plain;
    ALTER INDEX job_events_pkey RENAME TO job_events_plain_pkey;
    CREATE TABLE job_events (LIKE job_events_plain INCLUDING ALL) PARTITION BY RANGE (job_id);
    EXECUTE format('CREATE TABLE job_events_before PARTITION OF job_events FOR VALUES FROM (MINVALUE) TO (%L)',
                   onceflow_bench_uuid_at(first_at));
    FOR i IN 0 .. parts - 1 LOOP
        lower_at := first_at + i * width;
        upper_at := first_at + (i + 1) * width;
        EXECUTE format('CREATE TABLE %I PARTITION OF job_events FOR VALUES FROM (%L) TO (%L)',
                       'job_events_p' || lpad(i::text, 2, '0'),
                       onceflow_bench_uuid_at(lower_at), onceflow_bench_uuid_at(upper_at));
        INSERT INTO onceflow_bench_event_partitions
        VALUES ('job_events_p' || lpad(i::text, 2, '0'), onceflow_bench_uuid_at(lower_at),
                onceflow_bench_uuid_at(upper_at), upper_at);
    END LOOP;
    EXECUTE format('CREATE TABLE job_events_current PARTITION OF job_events FOR VALUES FROM (%L) TO (MAXVALUE)',
                   onceflow_bench_uuid_at(first_at + parts * width));
    INSERT INTO job_events SELECT * FROM job_events_plain;
    DROP TABLE job_events_plain;
    RETURN parts;
END
$$
