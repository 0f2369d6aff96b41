-- The work bell: tells every engine LISTENing on channel `$1` that attempts became available.
SELECT pg_notify($1, '')
