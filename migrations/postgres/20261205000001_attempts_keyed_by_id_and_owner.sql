-- The primary key of attempts led by id, the owner last: (id, owner_id).
--
-- Attempts had two unique keys on their id: attempts_pkey (owner_id, id) and
-- attempts_id_unique (id, added by 20261203000001 so that a lookup by id alone is a
-- single-row probe for the planner). Each attempt insert, and each update of an attempt
-- that is not heap-only (the claim that starts it, its finish), wrote and checked an
-- entry in both. Nothing references attempts and no statement reads an owner's attempts
-- in id order, so one key does: led by id, every lookup by id (with or without the
-- owner) probes it, and it still includes owner_id, as DESIGN.md's Scale-out asks of
-- every primary or unique key (attempts_id_unique did not).
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (id, owner_id);
DROP INDEX attempts_id_unique;
