-- Reopens a closed activity nobody won, for a resume (`$1` owner, `$2` id, `$3` its
-- highest attempt number so far): `scheduled` again, its slot empty, its outcome no
-- longer arrived, and its retry budget counting only attempts numbered above `$3`.
-- Invariant 4: only a slot nobody won reopens (`completed_by IS NULL`), and its version moves.
UPDATE activities
SET status = 'scheduled', error = NULL, finished_at = NULL, arrival = NULL,
    resumed_after = $3, version = version + 1, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND completed_by IS NULL AND status IN ('failed', 'cancelled')
