-- The tables of the schema that Citus holds neither as distributed nor as reference
-- tables (sqlx's migration ledger, which only the coordinator reads, aside): after
-- `onceflow migrate --citus` there are none.
SELECT c.relname::text FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
  AND c.relname <> '_sqlx_migrations'
  AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid)
ORDER BY 1
