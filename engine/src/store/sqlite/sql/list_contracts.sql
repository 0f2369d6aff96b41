-- The output contracts of these owners (of every owner when `None`).
SELECT owner_id, activity, contract_hash, output_schema, registered_at FROM contracts
WHERE (?1 IS NULL OR owner_id IN (SELECT value FROM json_each(?1)))
ORDER BY owner_id, activity, registered_at DESC, contract_hash
