-- How every write transaction begins: it takes SQLite's write lock at once, so that it never
-- fails to upgrade a read lock half way (one writer at a time, queued in the process).
BEGIN IMMEDIATE
