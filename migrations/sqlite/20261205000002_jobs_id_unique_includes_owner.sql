-- jobs_id_unique and attempts_id_unique become (id, owner_id), as on PostgreSQL
-- (DESIGN.md's Scale-out: every unique key includes owner_id). Led by id, they still
-- serve every lookup by id.
DROP INDEX jobs_id_unique;
CREATE UNIQUE INDEX jobs_id_unique ON jobs (id, owner_id);
DROP INDEX attempts_id_unique;
CREATE UNIQUE INDEX attempts_id_unique ON attempts (id, owner_id);
