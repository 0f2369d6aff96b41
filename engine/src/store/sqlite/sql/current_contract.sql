-- The current output contract of an activity for an owner (its own, else `*`'s).
-- The owner's own contract, else the platform's (`*`).
SELECT owner_id, activity, contract_hash, output_schema FROM contracts
WHERE owner_id IN (?1, '*') AND activity = ?2
ORDER BY (owner_id = ?1) DESC, registered_at DESC LIMIT 1
