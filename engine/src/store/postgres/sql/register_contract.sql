-- Registers (or confirms, making it current again) an output contract.
-- Registering a known schema again makes it the current contract again.
-- The time is the database's clock as the row is written, set from the inserted row
-- (Citus refuses a non-immutable function in DO UPDATE SET).
INSERT INTO contracts (owner_id, activity, contract_hash, output_schema, registered_at)
VALUES ($1, $2, $3, $4, clock_timestamp())
ON CONFLICT (owner_id, activity, contract_hash)
DO UPDATE SET registered_at = EXCLUDED.registered_at
