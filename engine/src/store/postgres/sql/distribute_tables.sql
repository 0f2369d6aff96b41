-- `onceflow migrate --citus`: distributes the schema on Citus. Idempotent: a table
-- already distributed (or a reference table) is left as it is, so it may run after every
-- migration, and a table a later migration adds is distributed the same way.
-- - api_tokens, contracts and certifications become reference tables (a copy on every
--   node): tokens are looked up by hash alone, and contracts and certifications are
--   read for an owner together with the platform's (`*`) rows.
-- - jobs is distributed by owner_id; every other table with an owner_id column is
--   distributed by it, colocated with jobs (an owner's rows share one shard), each once
--   the tables its foreign keys reference are.
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
               AND c.relname IN ('api_tokens', 'contracts', 'certifications')
               AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
             ORDER BY c.relname
    LOOP
        PERFORM create_reference_table(t);
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'jobs'::regclass) THEN
        PERFORM create_distributed_table('jobs', 'owner_id');
    END IF;
    LOOP
        SELECT c.oid::regclass INTO t FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
          AND EXISTS (SELECT 1 FROM pg_attribute a
                      WHERE a.attrelid = c.oid AND a.attname = 'owner_id' AND NOT a.attisdropped)
          AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
          AND NOT EXISTS (
              SELECT 1 FROM pg_constraint f
              WHERE f.conrelid = c.oid AND f.contype = 'f' AND f.confrelid <> c.oid
                AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = f.confrelid))
        ORDER BY c.relname
        LIMIT 1;
        EXIT WHEN t IS NULL;
        PERFORM create_distributed_table(t, 'owner_id', colocate_with => 'jobs');
    END LOOP;
END
$$
