-- A claim: one scheduled row, skipping rows another claim holds, started under a new lease.
UPDATE bench_floor SET status = 'started', lease_token = gen_random_uuid()
WHERE id = (SELECT id FROM bench_floor WHERE status = 'scheduled' LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, version
