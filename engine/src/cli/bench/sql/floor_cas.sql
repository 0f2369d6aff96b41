-- A completion: $1 id, $2 the version the claim read, $3 the result; it wins only at that
-- version (compare-and-swap).
UPDATE bench_floor SET status = 'succeeded', result = $3, version = version + 1 WHERE id = $1 AND version = $2
