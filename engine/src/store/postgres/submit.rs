//! Submission of activity jobs in one autocommit statement (one job, or many at once).

use serde_json::Value;
use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::decode::*;
use super::queries::*;
use crate::error::StoreError;
use crate::store::*;

/// Runs [`INSERT_ACTIVITY_JOB_SQL`] on `exec`.
pub(super) async fn insert_activity_job_on<'e, E: sqlx::PgExecutor<'e>>(
    exec: E,
    job: &NewJob,
    activity: &NewActivity,
    attempt: &NewAttempt,
    events: &[NewEvent],
) -> StoreResult<Option<(JobRow, AttemptRow)>> {
    let kinds: Vec<&str> = events.iter().map(|e| e.kind).collect();
    let attempts: Vec<Option<Uuid>> = events.iter().map(|e| e.attempt_id).collect();
    let actors: Vec<&str> = events.iter().map(|e| e.actor.as_str()).collect();
    let data: Vec<&Value> = events.iter().map(|e| &e.data).collect();
    // One round trip for the whole submission. Invariant 1: the job insert is
    // ON CONFLICT DO NOTHING, and the activity, attempt and events are inserted only
    // from the row it returns, so a taken key inserts nothing at all.
    let row = sqlx::query(INSERT_ACTIVITY_JOB_SQL)
        .bind(&job.owner_id)
        .bind(job.id)
        .bind(&job.idempotency_key)
        .bind(&job.fingerprint)
        .bind(job.kind.as_str())
        .bind(&job.activity)
        .bind(&job.task_queue)
        .bind(&job.input)
        .bind(activity.id)
        .bind(&activity.name)
        .bind(&activity.providers)
        .bind(to_json(&activity.options)?)
        .bind(&activity.input)
        .bind(attempt.id)
        .bind(attempt.number)
        .bind(&attempt.provider)
        .bind(attempt.delay_ms as f64 / 1000.0)
        .bind(attempt.schedule_to_start_timeout_s.map(|s| s as f64))
        .bind(&kinds)
        .bind(&attempts)
        .bind(&actors)
        .bind(&data)
        .fetch_optional(exec)
        .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some((inserted_job_row(job, &row)?, attempt_row(&row)?)))
}

/// [`INSERT_ACTIVITY_JOBS_SQL`]: many submissions in one autocommit statement. Jobs go in
/// sorted by (owner, key), so two such statements never wait on each other's keys in
/// opposite orders; a key given twice is inserted once (the later ones answer `None`).
pub(super) async fn insert_activity_jobs_on(
    pool: &PgPool,
    jobs: &[NewActivityJob],
) -> StoreResult<Vec<Option<(JobRow, AttemptRow)>>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&x, &y| {
        (&jobs[x].job.owner_id, &jobs[x].job.idempotency_key)
            .cmp(&(&jobs[y].job.owner_id, &jobs[y].job.idempotency_key))
    });
    order.dedup_by(|&mut later, &mut earlier| {
        jobs[later].job.owner_id == jobs[earlier].job.owner_id
            && jobs[later].job.idempotency_key == jobs[earlier].job.idempotency_key
    });
    let n = order.len();
    let (
        mut owners,
        mut ids,
        mut keys,
        mut fingerprints,
        mut kinds,
        mut activities,
        mut queues,
        mut inputs,
    ) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (
        mut activity_ids,
        mut providers,
        mut options,
        mut activity_inputs,
        mut attempt_ids,
        mut numbers,
        mut first_providers,
        mut delays,
        mut start_timeouts,
    ) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut ev_jobs, mut ev_seqs, mut ev_kinds, mut ev_attempts, mut ev_actors, mut ev_data) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for &k in &order {
        let NewActivityJob {
            job,
            activity,
            attempt,
            events,
        } = &jobs[k];
        owners.push(job.owner_id.as_str());
        ids.push(job.id);
        keys.push(job.idempotency_key.as_str());
        fingerprints.push(job.fingerprint.as_str());
        kinds.push(job.kind.as_str());
        activities.push(activity.name.as_str());
        queues.push(job.task_queue.as_str());
        inputs.push(&job.input);
        activity_ids.push(activity.id);
        providers.push(to_json(&activity.providers)?);
        options.push(to_json(&activity.options)?);
        activity_inputs.push(&activity.input);
        attempt_ids.push(attempt.id);
        numbers.push(attempt.number);
        first_providers.push(attempt.provider.as_str());
        delays.push(attempt.delay_ms as f64 / 1000.0);
        start_timeouts.push(attempt.schedule_to_start_timeout_s.map(|s| s as f64));
        for (seq, e) in events.iter().enumerate() {
            ev_jobs.push(job.id);
            ev_seqs.push(seq as i64 + 1);
            ev_kinds.push(e.kind);
            ev_attempts.push(e.attempt_id);
            ev_actors.push(e.actor.as_str());
            ev_data.push(&e.data);
        }
    }
    // Invariant 1: each job insert is ON CONFLICT DO NOTHING, and its activity, attempt
    // and events are inserted only from the row it returns: a taken key inserts nothing.
    let rows = sqlx::query(INSERT_ACTIVITY_JOBS_SQL)
        .bind(&owners)
        .bind(&ids)
        .bind(&keys)
        .bind(&fingerprints)
        .bind(&kinds)
        .bind(&activities)
        .bind(&queues)
        .bind(&inputs)
        .bind(&activity_ids)
        .bind(&providers)
        .bind(&options)
        .bind(&activity_inputs)
        .bind(&attempt_ids)
        .bind(&numbers)
        .bind(&first_providers)
        .bind(&delays)
        .bind(&start_timeouts)
        .bind(&ev_jobs)
        .bind(&ev_seqs)
        .bind(&ev_kinds)
        .bind(&ev_attempts)
        .bind(&ev_actors)
        .bind(&ev_data)
        .fetch_all(pool)
        .await?;
    let mut answers: Vec<Option<(JobRow, AttemptRow)>> = vec![None; jobs.len()];
    for row in &rows {
        let attempt = attempt_row(row)?;
        let Some(&k) = order.iter().find(|&&k| jobs[k].job.id == attempt.job_id) else {
            return Err(StoreError::Corrupt(
                "a batched submission returned a job it was not given".into(),
            ));
        };
        answers[k] = Some((inserted_job_row(&jobs[k].job, row)?, attempt));
    }
    Ok(answers)
}

/// [`insert_activity_jobs_on`] on Citus: one [`INSERT_ACTIVITY_JOB_SQL`] per job (each on
/// its owner's shard), in (owner, key) order as there; a key given twice is inserted once
/// (the later ones answer `None`: their insert finds the key taken).
pub(super) async fn insert_activity_jobs_one_by_one(
    pool: &PgPool,
    jobs: &[NewActivityJob],
) -> StoreResult<Vec<Option<(JobRow, AttemptRow)>>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&x, &y| {
        (&jobs[x].job.owner_id, &jobs[x].job.idempotency_key)
            .cmp(&(&jobs[y].job.owner_id, &jobs[y].job.idempotency_key))
    });
    let mut answers: Vec<Option<(JobRow, AttemptRow)>> = vec![None; jobs.len()];
    for k in order {
        let j = &jobs[k];
        answers[k] =
            insert_activity_job_on(pool, &j.job, &j.activity, &j.attempt, &j.events).await?;
    }
    Ok(answers)
}
