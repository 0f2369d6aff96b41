-- The latest certification of each (owner, activity, contract hash, provider) of these owners
-- (of every owner when `None`).
-- Invariant 6: only the latest certification of a provider for a contract hash
-- counts, latest by the database's clock that stamped it.
SELECT DISTINCT ON (owner_id, activity, contract_hash, provider)
       id, owner_id, activity, provider, contract_hash, passed, report, created_at
FROM certifications
WHERE ($1::text[] IS NULL OR owner_id = ANY($1))
ORDER BY owner_id, activity, contract_hash, provider, created_at DESC, id DESC
