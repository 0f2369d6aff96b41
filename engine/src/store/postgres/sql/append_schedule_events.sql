-- Appends events to schedule histories, in order.
INSERT INTO schedule_events (owner_id, schedule_name, at, type, tick_at, job_id, data)
SELECT o, n, a, t, k, j, d FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[],
    $5::timestamptz[],
                     $6::uuid[], $7::jsonb[]) WITH ORDINALITY AS e(o, n, a, t, k, j, d, ord)
ORDER BY ord
