-- How a transaction begins that must not be cut by `statement_timeout`: retention's
-- batches, which are bounded (at most `PRUNE_BATCH` jobs) and paced, but whose scan for
-- prunable jobs may be long over a large history of unfinished ones, and which would
-- otherwise fail at the same place every pass and never progress.
-- `idle_in_transaction_session_timeout` still ends one whose engine stalled.
BEGIN; SET LOCAL statement_timeout = 0
