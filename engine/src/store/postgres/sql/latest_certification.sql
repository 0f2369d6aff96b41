-- The latest certification of a provider for a contract hash (the owner's own, else `*`'s).
-- Invariant 6: only the latest certification for the current contract counts,
-- latest by the database's clock that stamped it.
SELECT id, owner_id, activity, provider, contract_hash, passed, report, created_at
FROM certifications
WHERE owner_id IN ($1, '*') AND activity = $2 AND provider = $3
  AND contract_hash = $4
ORDER BY (owner_id = $1) DESC, created_at DESC, id DESC
LIMIT 1
