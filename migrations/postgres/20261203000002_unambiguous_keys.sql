-- Foreign-key checks look a referenced row up by (owner_id, id). On a table that was
-- never analyzed (a server whose autovacuum is off), the planner could not tell the
-- primary key from another unique index that also starts with owner_id and picked either:
-- with the other one, each check scanned every row of the owner, for the life of the
-- connection. The same keys with owner_id last leave the primary key the only index that
-- fits those checks. Uniqueness, and the lookups by (owner, key) and (owner, job, seq),
-- are unchanged.
ALTER TABLE jobs DROP CONSTRAINT jobs_one_per_idempotency_key,
                 ADD CONSTRAINT jobs_one_per_idempotency_key UNIQUE (idempotency_key, owner_id);
ALTER TABLE activities DROP CONSTRAINT activities_owner_id_job_id_seq_key,
                       ADD CONSTRAINT activities_one_per_seq UNIQUE (job_id, seq, owner_id);
