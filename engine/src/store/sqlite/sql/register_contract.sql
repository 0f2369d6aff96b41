-- Registers (or confirms, making it current again) an output contract.
-- Registering a known schema again makes it the current contract again.
INSERT INTO contracts (owner_id, activity, contract_hash, output_schema, registered_at) VALUES (?,
    ?, ?, ?, ?)
ON CONFLICT (owner_id, activity, contract_hash) DO UPDATE SET registered_at = excluded.registered_at
