-- Activities and attempts without foreign keys, as job_events since 20261204000001.
--
-- An activity is inserted only by a statement that creates its job (a submission) or
-- holds its job's row lock (a workflow task's commands); an attempt only with its
-- activity or for an activity its transaction has just read (a retry, a failover, an
-- operator's retry); and no job, activity or attempt is ever deleted. So the keys
-- guarded against a bug, not a race. Their price was paid on every submission: per
-- job two key probes and two FOR KEY SHARE locks (Heap/LOCK WAL records, 2 of the 22
-- records a dedup submission wrote). Dropped: e2e +7 % with 9 % less CPU (4 alternating
-- pairs); dedup faster in 8 of 10 pairs (median +9 %), but two pairs were 20 % slower
-- and the means of the 6 taken on 2026-12-05 are equal (docs/performance.md). The harness
-- checks after every rule, on every store, that every activity has its job and every
-- attempt its activity and that activity's job (tests/src/lib.rs,
-- `TestDb::assert_integrity`).
ALTER TABLE activities DROP CONSTRAINT activities_owner_id_job_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT attempts_owner_id_activity_id_fkey;
