-- The timers of a workflow job's run (`?3` its first position) that fired after place `?4`.
-- By arrival on timers_by_arrival.
SELECT seq, fire_at, fired_at, arrival FROM timers
WHERE owner_id = ?1 AND job_id = ?2 AND arrival > ?4 AND seq >= ?3 ORDER BY arrival
