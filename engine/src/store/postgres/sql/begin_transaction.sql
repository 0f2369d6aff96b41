-- How every engine transaction begins (one round trip, as a plain `BEGIN`). Each of its
-- statements reaches rows by index probes, index ranges or the ctids of rows it locked
-- (tests/plans.rs), so the planner is told not to scan tables and not to hash- or
-- merge-join them: PostgreSQL keeps a connection's cached plan for as long as the
-- connection lives, and a plan cached while the tables were tiny (a fresh database, or a
-- server whose autovacuum never analyzes them) would otherwise keep scanning them as they
-- grow. Seen: the batched win's cached plan scanned every activity on every worker cycle.
BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off
