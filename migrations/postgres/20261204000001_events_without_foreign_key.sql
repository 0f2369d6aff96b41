-- Job events without a foreign key.
--
-- Every event row is written by a statement that creates its job or holds its job's row
-- lock, and no job is ever deleted, so the key guarded against a bug, not a race. Its
-- price was paid on the hot path: each event insert (five or more per job) probed the
-- job's key and took a FOR KEY SHARE lock on the job row, a WAL-logged change of its page.
-- Dropped, e2e ran 6 % faster with 4 % less CPU over 10 alternating pairs; dedup did not
-- move (docs/performance.md, 2026-12-04). The test harness checks after every rule, on
-- every store, that every event has its job (tests/src/lib.rs, `TestDb::assert_integrity`).
ALTER TABLE job_events DROP CONSTRAINT job_events_owner_id_job_id_fkey;
