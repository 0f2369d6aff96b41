-- Records a certification run, stamped with the database's clock when it is written (never an
-- engine's): of two runs recorded one after the other, the later one has the later
-- `created_at` whatever the clocks of the engines that recorded them, and is the one
-- [`StoreTx::latest_certification`] and [`Store::latest_certifications`] answer. Returns the
-- run as recorded.
-- Certification order (invariant 6): stamped by the write transaction's clock, taken
-- under the one writer's lock, never an engine's, so the later run is the latest one.
INSERT INTO certifications (owner_id, id, activity, provider, contract_hash, passed, report,
    created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
