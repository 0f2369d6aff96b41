-- The transaction's clock: the database's time when the transaction began (PostgreSQL's
-- `now()`), the same at every call, and the time the transaction's statements compare with
-- (leases, deadlines, due schedules).
SELECT now()
