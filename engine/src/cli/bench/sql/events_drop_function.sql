-- `--workload retention`, partitioned layout: the function that drops every partition of
-- job_events whose whole id range is older than `cutoff`, once no job of that range is
-- left; answers how many it dropped.
CREATE OR REPLACE FUNCTION onceflow_bench_drop_job_event_partitions(cutoff timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    part record;
    dropped integer := 0;
BEGIN
    FOR part IN
        SELECT name, lower_id, upper_id FROM onceflow_bench_event_partitions
        WHERE upper_at <= cutoff ORDER BY upper_at
    LOOP
        -- Retention: a partition goes only when every job of its range is gone (a job still
        -- running, or finished after the cutoff, keeps its events).
        IF NOT EXISTS (SELECT 1 FROM jobs WHERE id >= part.lower_id AND id < part.upper_id) THEN
            EXECUTE format('DROP TABLE %I', part.name);
            DELETE FROM onceflow_bench_event_partitions WHERE name = part.name;
            dropped := dropped + 1;
        END IF;
    END LOOP;
    RETURN dropped;
END
$$
