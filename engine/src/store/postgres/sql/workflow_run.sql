-- A workflow job's current run (continue-as-new), never sticky.
SELECT wf_run, wf_run_from, wf_run_input, wf_run_started_at, NULL::bigint AS since_arrival
FROM jobs WHERE owner_id = $1 AND id = $2
