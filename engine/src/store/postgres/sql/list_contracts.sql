-- The output contracts of these owners (of every owner when `None`).
SELECT owner_id, activity, contract_hash, output_schema, registered_at FROM contracts
WHERE ($1::text[] IS NULL OR owner_id = ANY($1))
ORDER BY owner_id, activity, registered_at DESC, contract_hash
