-- jobs_id_unique becomes (id, owner_id): DESIGN.md's Scale-out asks that every primary
-- or unique key include owner_id, and jobs_id_unique (id, from 20261203000001) did not.
-- Led by id, it still serves every lookup by id (with or without the owner) as a probe;
-- job ids stay unique because the engine mints them (UUIDv7), as attempt ids do since
-- 20261205000001.
CREATE UNIQUE INDEX jobs_id_owner_unique ON jobs (id, owner_id);
DROP INDEX jobs_id_unique;
ALTER INDEX jobs_id_owner_unique RENAME TO jobs_id_unique;
