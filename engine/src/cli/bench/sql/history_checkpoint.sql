-- After `--history` on PostgreSQL, and after VACUUM: what the checkpointer would soon do,
-- write the pre-filled pages back before the run, not during it. Needs a role allowed to
-- CHECKPOINT; without one the run pays.
CHECKPOINT
