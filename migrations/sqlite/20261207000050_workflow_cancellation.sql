-- Cancellation that reaches workflow code. A workflow may declare a compensation bound
-- (`wf_compensation_ms`, at most 24 h); cancelling such a job records the request
-- (`wf_cancel_requested_at`), the moment it ends regardless (`wf_cancel_deadline`) and
-- the cancel's number in the job's arrival order (`wf_cancel_arrival`, from
-- `wf_arrivals`), and the job stays `running` while its workflow compensates. A job that
-- never declared a bound is cancelled at once, as before: these stay NULL. Times are
-- INTEGER microseconds, as everywhere in this schema.
ALTER TABLE jobs ADD COLUMN wf_compensation_ms INTEGER
    CHECK (wf_compensation_ms BETWEEN 1 AND 86400000);
ALTER TABLE jobs ADD COLUMN wf_cancel_requested_at INTEGER;
ALTER TABLE jobs ADD COLUMN wf_cancel_deadline INTEGER;
ALTER TABLE jobs ADD COLUMN wf_cancel_arrival INTEGER;
-- The compensation deadlines' loop: only jobs compensating now (every path that closes
-- one clears its deadline).
CREATE INDEX jobs_compensation_due ON jobs (wf_cancel_deadline)
    WHERE wf_cancel_deadline IS NOT NULL;
