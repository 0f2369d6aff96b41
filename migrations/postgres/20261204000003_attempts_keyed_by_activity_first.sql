-- The key of an activity's attempt numbers, led by activity_id (the owner last, as in
-- activities_one_per_seq and jobs_one_per_idempotency_key).
--
-- Led by owner_id, it shared its first column with attempts_pkey: while the table was
-- small, a probe of the primary key by the owner alone cost the planner the same as a
-- probe of this key by owner and activity (one row estimated either way), the older
-- primary key won the tie, and the plan PostgreSQL cached then read every attempt of the
-- owner for each activity once the table was large (job views, replays, retries). Led by
-- activity_id, the lookups take the owner as a filter and this key is their only index
-- (tests/plans.rs, lookups_keep_their_index_at_every_small_size).
ALTER TABLE attempts DROP CONSTRAINT attempts_owner_id_activity_id_number_key;
ALTER TABLE attempts ADD CONSTRAINT attempts_one_per_number UNIQUE (activity_id, number, owner_id);
