-- The latest certification of each (owner, activity, contract hash, provider) of these owners
-- (of every owner when `None`).
-- Invariant 6: only the latest certification of a provider for a contract hash
-- counts, latest by the write transactions' clock that stamped it (then by rowid:
-- the order of the inserts under the one writer).
SELECT id, owner_id, activity, provider, contract_hash, passed, report, created_at FROM (
    SELECT *, row_number() OVER (PARTITION BY owner_id, activity, contract_hash, provider
                                 ORDER BY created_at DESC, rowid DESC) AS n
    FROM certifications
    WHERE (?1 IS NULL OR owner_id IN (SELECT value FROM json_each(?1)))
) WHERE n = 1
ORDER BY owner_id, activity, contract_hash, provider
