-- Job and attempt ids are UUIDv7 minted by the engine: unique across owners. Saying so
-- lets the planner know that a lookup by id finds at most one row, with or without
-- statistics (a database whose autovacuum is off never gathers any), so lookups of many
-- ids at once stay nested loops over the index.
CREATE UNIQUE INDEX attempts_id_unique ON attempts (id);
DROP INDEX attempts_by_id;
CREATE UNIQUE INDEX jobs_id_unique ON jobs (id);
DROP INDEX jobs_by_id;
