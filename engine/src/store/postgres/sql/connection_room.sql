-- How many more connections the server admits for this role now (see `connection_room`).
-- Sessions in pg_stat_activity include background workers, which take no client slot.
SELECT current_setting('max_connections')::int
- CASE WHEN (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN 0
       ELSE current_setting('superuser_reserved_connections')::int
          + coalesce(current_setting('reserved_connections', true)::int, 0) END
- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')
+ 1
