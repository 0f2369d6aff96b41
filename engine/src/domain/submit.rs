//! Submitting a job: the dedup insert (invariant 1).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use serde_json::json;
use uuid::Uuid;

use super::batch::Settled;
use super::inflight::Entry as KeyEntry;
use super::{actor, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ActivityStatus, ActivityView, JobKind, JobView, Scope};
use crate::request::{check_idempotency_key, JobRequest, JobTarget};
use crate::store::{
    AttemptRow, JobRow, NewActivity, NewActivityJob, NewAttempt, NewEvent, NewJob, NewReplay,
    ReplayedJob, Store, StoreResult, StoreTx,
};

/// The answer to a submission.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The job, as it is now.
    pub job: JobView,
    /// `true` when the key and fingerprint were seen before and this is that job.
    pub replayed: bool,
}

impl Engine {
    /// Submits an intent for `owner` under `idempotency_key`.
    ///
    /// Guarantees: any number of concurrent submissions with the same owner and key yield
    /// one job, created exactly once; the others get that job with `replayed: true` if
    /// their request fingerprint matches, or [`EngineError::IdempotencyKeyReused`] (and
    /// nothing changes) if it does not. For an activity job, activity 0 and its attempt 1
    /// at the first provider are created with the job.
    pub async fn submit(
        &self,
        owner: &str,
        idempotency_key: &str,
        request: &JobRequest,
    ) -> Result<Submission, EngineError> {
        check_idempotency_key(idempotency_key)?;
        request.validate()?;
        let fingerprint = request.fingerprint();
        let timer = self.metrics.submit_seconds.start_timer();
        let mut released = 0;
        loop {
            let created =
                retry_transient!(self.submit_once(owner, idempotency_key, request, &fingerprint));
            match &created {
                Ok(Created::New(_)) => self.metrics.submitted(false),
                Ok(Created::Replayed(_) | Created::ReplayedView(_)) => self.metrics.submitted(true),
                Err(EngineError::IdempotencyKeyReused { .. }) => self.metrics.conflict(),
                Err(_) => {}
            }
            let submission = match created? {
                Created::New(job) => Submission {
                    job: *job,
                    replayed: false,
                },
                Created::ReplayedView(job) => Submission {
                    job: *job,
                    replayed: true,
                },
                // A replay answers the job as it is now.
                Created::Replayed(job_id) => match self
                    .store
                    .job_view(&Scope::Owner(owner.to_owned()), job_id)
                    .await?
                {
                    Some(job) => Submission {
                        job,
                        replayed: true,
                    },
                    // Retention pruned the job right after this replay: the key is free,
                    // and this submission now creates a new job.
                    None if released < 3 => {
                        released += 1;
                        continue;
                    }
                    None => {
                        return Err(EngineError::Unavailable(
                            crate::error::StoreError::KeyReleased,
                        ))
                    }
                },
            };
            timer.observe_duration();
            return Ok(submission);
        }
    }

    async fn submit_once(
        &self,
        owner: &str,
        key: &str,
        request: &JobRequest,
        fingerprint: &str,
    ) -> Result<Created, EngineError> {
        let who = actor::client(owner);
        let rows = Rows::new(owner, key, request, fingerprint, &who);
        if let Some((activity, attempt)) = &rows.activity {
            return self
                .submit_activity_job(&rows, activity, attempt, owner, key, fingerprint, &who)
                .await;
        }
        let mut tx = self.begin().await?;
        let created = self
            .insert_rows(tx.as_mut(), rows, owner, key, fingerprint, &who)
            .await?;
        tx.commit().await?;
        if let Created::New(job) = &created {
            tracing::debug!(job_id = %job.id, owner, idempotency_key = key, "job created");
        }
        Ok(created)
    }

    /// An activity job's submission: it shares one statement with concurrent ones (see
    /// [`Engine::submit_batch`]); a taken key is judged as a replay. A repeat of a key
    /// whose first submission this engine is writing waits for it and is judged as a
    /// replay without a place in a statement (see `inflight.rs`).
    #[allow(clippy::too_many_arguments)]
    async fn submit_activity_job(
        &self,
        rows: &Rows,
        activity: &NewActivity,
        attempt: &NewAttempt,
        owner: &str,
        key: &str,
        fingerprint: &str,
        who: &str,
    ) -> Result<Created, EngineError> {
        let first = match self.batches.keys_in_flight.enter(owner, key) {
            Some(KeyEntry::Repeat(settled)) => {
                self.metrics.repeat_waited();
                if let Ok(true) = settled.await {
                    return self.replay_taken(owner, key, fingerprint, who).await;
                }
                None
            }
            Some(KeyEntry::First(first)) => Some(first),
            Some(KeyEntry::Joined) | None => None,
        };
        let submitted = self
            .insert_activity_job(rows, activity, attempt, owner, key, fingerprint, who)
            .await;
        if let Some(first) = first {
            // Every answer but a failure means that a committed job holds the key.
            first.settle(matches!(
                submitted,
                Ok(_) | Err(EngineError::IdempotencyKeyReused { .. })
            ));
        }
        submitted
    }

    /// [`Engine::submit_activity_job`] once this submission is the first of its key in
    /// flight here, or joins the first in its statement, or this is not known.
    #[allow(clippy::too_many_arguments)]
    async fn insert_activity_job(
        &self,
        rows: &Rows,
        activity: &NewActivity,
        attempt: &NewAttempt,
        owner: &str,
        key: &str,
        fingerprint: &str,
        who: &str,
    ) -> Result<Created, EngineError> {
        let created = |inserted: JobRow, attempt_row: AttemptRow| {
            self.metrics
                .events_written(rows.events.pending.iter().map(|e| e.kind));
            tracing::debug!(job_id = %inserted.id, owner, idempotency_key = key, "job created");
            Created::New(Box::new(created_view(
                inserted,
                vec![activity_view(activity, &attempt_row)],
            )))
        };
        let item = BatchedSubmission {
            engine: self.clone(),
            rows: NewActivityJob {
                job: rows.job.clone(),
                activity: activity.clone(),
                attempt: attempt.clone(),
                events: rows.events.pending.clone(),
            },
            who: who.to_owned(),
        };
        match self.batches.submissions.call(item).await {
            Some(Batched::Created(inserted)) => return Ok(created(inserted.0, inserted.1)),
            Some(Batched::Replayed(job)) => return Ok(Created::ReplayedView(job)),
            Some(Batched::Reused(job_id)) => {
                return Err(EngineError::IdempotencyKeyReused { job_id })
            }
            Some(Batched::Taken) => return self.replay_taken(owner, key, fingerprint, who).await,
            None => {}
        }
        // Alone: one statement that inserts all of the job or (a taken key) nothing.
        match self
            .store
            .insert_activity_job_now(&rows.job, activity, attempt, &rows.events.pending)
            .await?
        {
            Some((inserted, attempt_row)) => Ok(created(inserted, attempt_row)),
            None => self.replay_taken(owner, key, fingerprint, who).await,
        }
    }

    /// Judges a submission whose key a committed job holds: concurrent replays share one
    /// transaction, each judged as it would be alone.
    async fn replay_taken(
        &self,
        owner: &str,
        key: &str,
        fingerprint: &str,
        who: &str,
    ) -> Result<Created, EngineError> {
        let replay = Replay {
            engine: self.clone(),
            owner: owner.to_owned(),
            key: key.to_owned(),
            fingerprint: fingerprint.to_owned(),
            who: who.to_owned(),
        };
        if let Some(answer) = self.batches.replays.call(replay).await {
            return answer;
        }
        let mut tx = self.begin().await?;
        let replayed = self
            .replay(tx.as_mut(), owner, key, fingerprint, who)
            .await?;
        tx.commit().await?;
        Ok(replayed)
    }

    /// Submits many new activity jobs in one statement, each judged as [`Engine::submit`]
    /// judges it alone:
    /// - the first submission of a key in the flush inserts its job (all of it), or
    ///   nothing when a committed job holds the key ([`Batched::Taken`]);
    /// - a later submission of the same key in the same flush is that job's replay (its
    ///   `job_replayed` written by the same statement, after the job's first events) or,
    ///   with another request, [`Batched::Reused`];
    ///
    /// `None` sends a submission down the single path (the statement failed).
    pub(crate) async fn submit_batch(&self, items: Vec<BatchedSubmission>) -> Settled<Batched> {
        let mut answers: Settled<Batched> = (0..items.len()).map(|_| None).collect();
        // Per key of this flush: the submission that inserts it, then its repeats.
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut first_of: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            match first_of.entry((&item.rows.job.owner_id, &item.rows.job.idempotency_key)) {
                Entry::Occupied(g) => groups[*g.get()].1.push(i),
                Entry::Vacant(g) => {
                    g.insert(groups.len());
                    groups.push((i, Vec::new()));
                }
            }
        }
        // From here on, a repeat of these keys waits for this flush instead of joining it.
        self.batches.keys_in_flight.writing(items.iter().map(|i| {
            (
                i.rows.job.owner_id.as_str(),
                i.rows.job.idempotency_key.as_str(),
            )
        }));
        let jobs: Vec<NewActivityJob> = groups
            .iter()
            .map(|(first, repeats)| {
                let mut job = items[*first].rows.clone();
                let mut replayed = Events::for_job(&job.job.owner_id, job.job.id);
                for &r in repeats {
                    if items[r].rows.job.fingerprint == job.job.fingerprint {
                        replayed.push(
                            event::JOB_REPLAYED,
                            None,
                            &items[r].who,
                            json!({ "idempotency_key": job.job.idempotency_key }),
                        );
                    }
                }
                job.events.extend(replayed.pending);
                job
            })
            .collect();
        let inserted = match self.store.insert_activity_jobs_now(&jobs).await {
            Ok(inserted) => inserted,
            Err(e) => {
                tracing::debug!(error = %e, batch = jobs.len(), "batched submission failed; each submits alone");
                return answers;
            }
        };
        for ((first, repeats), (job, inserted)) in groups.iter().zip(jobs.iter().zip(inserted)) {
            let Some((row, attempt_row)) = inserted else {
                for &i in std::iter::once(first).chain(repeats) {
                    answers[i] = Some(Batched::Taken);
                }
                continue;
            };
            self.metrics.events_written(
                job.events
                    .iter()
                    .map(|e| e.kind)
                    .filter(|&k| k == event::JOB_REPLAYED),
            );
            for &r in repeats {
                let replay = items[r].rows.job.fingerprint == job.job.fingerprint;
                answers[r] = Some(match replay {
                    // The replay of a job created by the same statement: the job as it is now.
                    true => Batched::Replayed(Box::new(created_view(
                        row.clone(),
                        vec![activity_view(&job.activity, &attempt_row)],
                    ))),
                    false => Batched::Reused(row.id),
                });
            }
            answers[*first] = Some(Batched::Created(Box::new((row, attempt_row))));
        }
        answers
    }

    /// The dedup insert inside the caller's transaction (the scheduler submits its ticks
    /// in the transaction that advances the schedule). Commits nothing.
    pub(crate) async fn submit_in(
        &self,
        tx: &mut dyn StoreTx,
        owner: &str,
        key: &str,
        request: &JobRequest,
        fingerprint: &str,
        who: &str,
    ) -> Result<Created, EngineError> {
        let rows = Rows::new(owner, key, request, fingerprint, who);
        self.insert_rows(tx, rows, owner, key, fingerprint, who)
            .await
    }

    async fn insert_rows(
        &self,
        tx: &mut dyn StoreTx,
        rows: Rows,
        owner: &str,
        key: &str,
        fingerprint: &str,
        who: &str,
    ) -> Result<Created, EngineError> {
        let Rows {
            job,
            activity,
            events,
        } = rows;
        let (inserted, activities) = match activity {
            Some((activity, attempt)) => {
                // INSERT … ON CONFLICT DO NOTHING, then read the winner: never read-then-insert.
                let Some((inserted, attempt_row)) = tx
                    .insert_activity_job(&job, &activity, &attempt, &events.pending)
                    .await?
                else {
                    return self.replay(tx, owner, key, fingerprint, who).await;
                };
                self.metrics
                    .events_written(events.pending.iter().map(|e| e.kind));
                let view = activity_view(&activity, &attempt_row);
                (inserted, vec![view])
            }
            None => {
                // INSERT … ON CONFLICT DO NOTHING, then read the winner: never read-then-insert.
                let Some(inserted) = tx.insert_job(&job).await? else {
                    return self.replay(tx, owner, key, fingerprint, who).await;
                };
                events.flush(tx, &self.metrics).await?;
                (inserted, Vec::new())
            }
        };
        // The new job as it was created: no read-back needed.
        Ok(Created::New(Box::new(created_view(inserted, activities))))
    }

    /// The key is taken: the same request is a replay of that job; another one is refused
    /// and changes nothing.
    async fn replay(
        &self,
        tx: &mut dyn StoreTx,
        owner: &str,
        key: &str,
        fingerprint: &str,
        who: &str,
    ) -> Result<Created, EngineError> {
        // The key conflicted, but its job is gone: retention pruned it meanwhile and the
        // key is free again. The submission is retried (a transient error) and creates a
        // new job.
        let existing = tx
            .job_by_idempotency_key(owner, key)
            .await?
            .ok_or(EngineError::Internal(crate::error::StoreError::KeyReleased))?;
        if existing.fingerprint != fingerprint {
            return Err(EngineError::IdempotencyKeyReused {
                job_id: existing.id,
            });
        }
        // Read, then locked: retention may have pruned the job in between.
        if tx.lock_job(owner, existing.id).await?.is_none() {
            return Err(EngineError::Internal(crate::error::StoreError::KeyReleased));
        }
        let mut events = Events::for_job(owner, existing.id);
        events.push(
            event::JOB_REPLAYED,
            None,
            who,
            json!({ "idempotency_key": key }),
        );
        events.flush(tx, &self.metrics).await?;
        Ok(Created::Replayed(existing.id))
    }
}

/// A submission of a new activity job, waiting to share the next statement with others.
pub(crate) struct BatchedSubmission {
    pub(crate) engine: Engine,
    rows: NewActivityJob,
    /// Who submits (the actor of its `job_replayed`, if it is a repeat).
    who: String,
}

/// What a shared submission statement answers one submission.
pub(crate) enum Batched {
    /// This submission created the job.
    Created(Box<(JobRow, AttemptRow)>),
    /// An earlier submission of the same key and request in the same statement created
    /// the job; this is its replay.
    Replayed(Box<JobView>),
    /// An earlier submission of the same key in the same statement created this job for
    /// another request.
    Reused(Uuid),
    /// A committed job holds the key.
    Taken,
}

/// A submission whose key a committed job holds, waiting to be judged with others.
pub(crate) struct Replay {
    pub(crate) engine: Engine,
    owner: String,
    key: String,
    fingerprint: String,
    who: String,
}

impl Engine {
    /// Judges many replays in one transaction, each as [`Engine::submit`] judges it
    /// alone: the jobs holding the keys are locked (in one order), a matching fingerprint
    /// writes `job_replayed` and answers the job as it is now, another one answers
    /// [`EngineError::IdempotencyKeyReused`] and changes nothing. `None` sends an item down
    /// the single path (no job found, or the batch failed).
    pub(crate) async fn replay_batch(
        &self,
        items: Vec<Replay>,
    ) -> Settled<Result<Created, EngineError>> {
        match self.replay_batch_once(&items).await {
            Ok(answers) => answers,
            Err(e) => {
                tracing::debug!(error = %e, batch = items.len(), "batched replay failed; each replays alone");
                items.iter().map(|_| None).collect()
            }
        }
    }

    async fn replay_batch_once(
        &self,
        items: &[Replay],
    ) -> Result<Settled<Result<Created, EngineError>>, EngineError> {
        let replays: Vec<NewReplay> = items
            .iter()
            .map(|i| NewReplay {
                owner_id: i.owner.clone(),
                idempotency_key: i.key.clone(),
                fingerprint: i.fingerprint.clone(),
                actor: i.who.clone(),
                data: json!({ "idempotency_key": i.key }),
            })
            .collect();
        let jobs = replay(self.store.as_ref(), &replays).await?;
        // Per item: a refusal, the index of the job it replayed, or left to the single path.
        let judged: Vec<Option<Result<usize, EngineError>>> = items
            .iter()
            .map(|item| {
                let j = jobs.iter().position(|r| {
                    r.job.owner_id == item.owner && r.job.idempotency_key == item.key
                })?;
                Some(match jobs[j].job.fingerprint == item.fingerprint {
                    true => Ok(j),
                    false => Err(EngineError::IdempotencyKeyReused {
                        job_id: jobs[j].job.id,
                    }),
                })
            })
            .collect();
        self.metrics.events_written(
            judged
                .iter()
                .filter(|j| matches!(j, Some(Ok(_))))
                .map(|_| event::JOB_REPLAYED),
        );
        // A replay answers the job as it is now: as read with the replays, else read alone.
        Ok(judged
            .into_iter()
            .map(|j| {
                Some(match j? {
                    Ok(j) => match &jobs[j].view {
                        Some(view) => Ok(Created::ReplayedView(Box::new(view.clone()))),
                        None => Ok(Created::Replayed(jobs[j].job.id)),
                    },
                    Err(e) => Err(e),
                })
            })
            .collect())
    }
}

/// Judges replays, committed when this returns: locks the jobs holding the replays' keys
/// (in (owner, id) order, so two calls never wait on each other in a cycle) and appends
/// one `job_replayed`, in the order given, for each replay whose fingerprint is that of
/// the job holding its key. Returns those jobs, each with its view (activities and
/// attempts) when it could be read with it; keys no job holds are left out. On an error
/// nothing is written. A store that does this in one statement ([`Store::replay_now`])
/// does it there; otherwise it is one transaction of the store's primitives.
pub async fn replay(store: &dyn Store, replays: &[NewReplay]) -> StoreResult<Vec<ReplayedJob>> {
    if let Some(replayed) = store.replay_now(replays).await? {
        return Ok(replayed);
    }
    let mut keys: Vec<(String, String)> = replays
        .iter()
        .map(|r| (r.owner_id.clone(), r.idempotency_key.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    let mut tx = store.begin().await?;
    let jobs = tx.lock_jobs_by_keys(&keys).await?;
    // Invariant 1: only a submission with the job's fingerprint replays it.
    let events: Vec<NewEvent> = replays
        .iter()
        .filter_map(|r| {
            let job = jobs
                .iter()
                .find(|j| j.owner_id == r.owner_id && j.idempotency_key == r.idempotency_key)?;
            (job.fingerprint == r.fingerprint).then(|| NewEvent {
                owner_id: job.owner_id.clone(),
                job_id: job.id,
                kind: event::JOB_REPLAYED,
                attempt_id: None,
                actor: r.actor.clone(),
                data: r.data.clone(),
            })
        })
        .collect();
    tx.append_events(&events).await?;
    tx.commit().await?;
    // The replays are written: a job whose view cannot be read now is returned
    // without one (its callers read it alone).
    let views = match store.views_of(jobs.clone()).await {
        Ok(views) => views,
        Err(e) => {
            tracing::debug!(error = %e, "reading replayed jobs failed");
            Vec::new()
        }
    };
    Ok(jobs
        .into_iter()
        .map(|job| {
            let view = views
                .iter()
                .find(|v| v.owner == job.owner_id && v.id == job.id)
                .cloned();
            ReplayedJob { job, view }
        })
        .collect())
}

/// The rows a new job is made of, and the events of its creation.
struct Rows {
    job: NewJob,
    activity: Option<(NewActivity, NewAttempt)>,
    events: Events,
}

impl Rows {
    fn new(owner: &str, key: &str, request: &JobRequest, fingerprint: &str, who: &str) -> Rows {
        let (kind, workflow, activity) = match &request.target {
            JobTarget::Workflow { name } => (JobKind::Workflow, Some(name.clone()), None),
            JobTarget::Activity { name, .. } => (JobKind::Activity, None, Some(name.clone())),
        };
        let job = NewJob {
            owner_id: owner.to_owned(),
            id: Uuid::now_v7(),
            idempotency_key: key.to_owned(),
            fingerprint: fingerprint.to_owned(),
            kind,
            workflow,
            activity,
            task_queue: request.task_queue.clone(),
            input: request.input.clone(),
            parent_job_id: None,
        };
        let mut events = Events::for_job(owner, job.id);
        events.push(
            event::JOB_CREATED,
            None,
            who,
            json!({ "idempotency_key": key, "kind": kind }),
        );
        let activity = match &request.target {
            JobTarget::Workflow { .. } => None,
            JobTarget::Activity {
                name,
                providers,
                options,
            } => {
                let activity = NewActivity {
                    owner_id: owner.to_owned(),
                    id: Uuid::now_v7(),
                    job_id: job.id,
                    seq: 0,
                    name: name.clone(),
                    providers: providers.clone(),
                    options: options.clone(),
                    task_queue: request.task_queue.clone(),
                    input: request.input.clone(),
                };
                let attempt = NewAttempt {
                    owner_id: owner.to_owned(),
                    id: Uuid::now_v7(),
                    activity_id: activity.id,
                    job_id: job.id,
                    number: 1,
                    activity: name.clone(),
                    task_queue: request.task_queue.clone(),
                    provider: providers[0].clone(),
                    delay_ms: 0,
                    schedule_to_start_timeout_s: options.schedule_to_start_timeout_s,
                };
                events.push(
                    event::ATTEMPT_SCHEDULED,
                    Some(attempt.id),
                    who,
                    json!({ "seq": 0, "provider": attempt.provider, "number": 1, "reason": "first" }),
                );
                Some((activity, attempt))
            }
        };
        Rows {
            job,
            activity,
            events,
        }
    }
}

fn activity_view(activity: &NewActivity, attempt: &AttemptRow) -> ActivityView {
    ActivityView {
        seq: 0,
        name: activity.name.clone(),
        providers: activity.providers.clone(),
        status: ActivityStatus::Scheduled,
        version: 0,
        completed_by: None,
        result: None,
        error: None,
        attempts: vec![attempt.view()],
    }
}

fn created_view(inserted: JobRow, activities: Vec<ActivityView>) -> JobView {
    JobView {
        id: inserted.id,
        owner: inserted.owner_id,
        idempotency_key: inserted.idempotency_key,
        kind: inserted.kind,
        workflow: inserted.workflow,
        activity: inserted.activity,
        task_queue: inserted.task_queue,
        input: inserted.input,
        status: inserted.status,
        version: inserted.version,
        result: inserted.result,
        error: inserted.error,
        created_at: inserted.created_at,
        updated_at: inserted.updated_at,
        finished_at: inserted.finished_at,
        parent_job_id: inserted.parent_job_id,
        // A job just created has started nothing yet.
        children: Vec::new(),
        cancel_requested_at: inserted.wf_cancel_requested_at,
        activities,
        signals: None,
    }
}

/// What one try of a submission did.
pub(crate) enum Created {
    /// Created this job.
    New(Box<JobView>),
    /// The key and fingerprint were seen before: this job.
    Replayed(Uuid),
    /// The key and fingerprint were seen before: this job, as it is now.
    ReplayedView(Box<JobView>),
}
