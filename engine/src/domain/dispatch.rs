//! Handing attempts to workers under a lease, and keeping the lease alive (invariants 3
//! and 5).

use serde_json::{json, Value};
use uuid::Uuid;

use super::{actor, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ActivityStatus, ActivityTask, AttemptStatus, Scope};
use crate::store::{ClaimFilter, LeaseExtension, LeaseRenewal, NewEvent, StoreTx};

/// What a worker asks for.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The worker's name, recorded on the attempts it takes.
    pub worker_id: String,
    /// The task queue it polls.
    pub task_queue: String,
    /// The (activity, provider) pairs it has registered.
    pub providers: Vec<(String, String)>,
    /// At most this many tasks (1 to 100).
    pub max_tasks: u32,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAck {
    /// The attempt was cancelled (by an operator or with its job): stop working on it.
    pub cancel_requested: bool,
}

impl ClaimRequest {
    /// Refuses a request no claim would take: `max_tasks` outside 1 to 100, no `worker_id`.
    pub fn validate(&self) -> Result<(), EngineError> {
        if self.max_tasks == 0 || self.max_tasks > 100 {
            return Err(EngineError::invalid_request(
                "max_tasks: must be between 1 and 100",
            ));
        }
        if self.worker_id.is_empty() {
            return Err(EngineError::invalid_request("worker_id: must not be empty"));
        }
        Ok(())
    }
}

impl Engine {
    /// Hands up to `max_tasks` available attempts to a worker serving `scope`.
    ///
    /// Guarantees: each attempt is handed out once, moving `scheduled → started` with a
    /// fresh lease token that stays its fencing token for life; concurrent claims never
    /// return the same attempt.
    pub async fn claim(
        &self,
        scope: &Scope,
        request: &ClaimRequest,
    ) -> Result<Vec<ActivityTask>, EngineError> {
        match Self::claim_filter(scope, request)? {
            Some(filter) => retry_transient!(self.claim_once(&filter)),
            None => Ok(Vec::new()),
        }
    }

    pub(crate) async fn claim_once(
        &self,
        filter: &ClaimFilter,
    ) -> Result<Vec<ActivityTask>, EngineError> {
        let mut tx = self.begin().await?;
        let (tasks, events) = self.claim_in(tx.as_mut(), filter).await?;
        if tasks.is_empty() {
            return Ok(tasks);
        }
        tx.append_events(&events).await?;
        self.metrics.events_written(events.iter().map(|e| e.kind));
        tx.commit().await?;
        Ok(tasks)
    }

    /// Claims in `tx` (see [`Engine::claim`]): the tasks, and the `attempt_started` events
    /// the caller must write in the same transaction.
    pub(crate) async fn claim_in(
        &self,
        tx: &mut dyn StoreTx,
        filter: &ClaimFilter,
    ) -> Result<(Vec<ActivityTask>, Vec<NewEvent>), EngineError> {
        let claimed = tx.claim_attempts(filter).await?;
        let who = actor::worker(&filter.worker_id);
        let mut all_events = Vec::with_capacity(claimed.len());
        let mut tasks = Vec::with_capacity(claimed.len());
        for c in claimed {
            let a = &c.attempt;
            if let Some(started) = a.started_at {
                let waited = (started - a.created_at).num_milliseconds().max(0) as f64 / 1000.0;
                self.metrics.schedule_to_start_seconds.observe(waited);
            }
            let mut events = Events::for_job(&a.owner_id, a.job_id);
            events.push(
                event::ATTEMPT_STARTED,
                Some(a.id),
                &who,
                json!({ "provider": a.provider, "number": a.number, "lease_expires_at": a.lease_expires_at }),
            );
            all_events.extend(events.pending);
            let (Some(lease_token), Some(read_version)) = (a.lease_token, a.read_version) else {
                return Err(EngineError::Internal(crate::error::StoreError::Corrupt(
                    "a claimed attempt has no lease token".into(),
                )));
            };
            tracing::debug!(job_id = %a.job_id, attempt_id = %a.id, owner = %a.owner_id, worker = %filter.worker_id, "attempt started");
            tasks.push(ActivityTask {
                kind: "activity".to_owned(),
                attempt_id: a.id,
                lease_token,
                read_version,
                job_id: a.job_id,
                owner: a.owner_id.clone(),
                activity: a.activity.clone(),
                provider: a.provider.clone(),
                input: c.input.clone(),
                attempt_number: a.number,
                idempotency_key: format!("{}:{}", a.job_id, c.activity_seq),
                heartbeat_timeout_ms: c.options.heartbeat_timeout_s.map(|s| s * 1000),
                start_to_close_timeout_ms: c.options.start_to_close_timeout_s.map(|s| s * 1000),
            });
        }
        Ok((tasks, all_events))
    }

    /// The claim a poll asks for, as the store takes it; `None` when it has no providers.
    pub(crate) fn claim_filter(
        scope: &Scope,
        request: &ClaimRequest,
    ) -> Result<Option<ClaimFilter>, EngineError> {
        request.validate()?;
        if request.providers.is_empty() {
            return Ok(None);
        }
        Ok(Some(ClaimFilter {
            scope: scope.clone(),
            task_queue: request.task_queue.clone(),
            providers: request.providers.clone(),
            worker_id: request.worker_id.clone(),
            limit: i64::from(request.max_tasks),
        }))
    }

    /// Renews the lease of an attempt for the holder of its lease token.
    ///
    /// Guarantees (invariant 5): a wrong token, or a finished attempt, is refused with
    /// [`EngineError::LeaseLost`] and changes nothing. A `started` attempt's lease is
    /// extended; an `unknown` one is revived to `started`; a `cancelled` one answers
    /// `cancel_requested: true`.
    pub async fn heartbeat(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
        lease_token: Uuid,
        details: Option<&Value>,
    ) -> Result<HeartbeatAck, EngineError> {
        // The fast path, shared with concurrent heartbeats: one statement for all of them,
        // each fenced by its own token.
        let renewal = LeaseRenewal {
            owner: scope.owner().map(str::to_owned),
            attempt_id,
            token: lease_token,
            details: details.cloned(),
        };
        let extended = self.batches.heartbeats.call(renewal).await;
        if extended == Some(true) {
            return Ok(HeartbeatAck {
                cancel_requested: false,
            });
        }
        let location = self
            .store
            .locate_attempt(scope, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        // Not settled by the batch (it failed): the fast path alone.
        if extended.is_none()
            && self
                .store
                .extend_lease(&location, attempt_id, lease_token, details)
                .await?
                == LeaseExtension::Extended
        {
            return Ok(HeartbeatAck {
                cancel_requested: false,
            });
        }
        let ack = retry_transient!(self.heartbeat_slow(
            &location.owner_id,
            location.job_id,
            attempt_id,
            lease_token,
            details
        ))?;
        if ack.is_none() {
            // Revived concurrently by another heartbeat: the fast path applies now.
            return match self
                .store
                .extend_lease(&location, attempt_id, lease_token, details)
                .await?
            {
                LeaseExtension::Extended => Ok(HeartbeatAck {
                    cancel_requested: false,
                }),
                LeaseExtension::NotExtended => Err(EngineError::LeaseLost),
            };
        }
        ack.ok_or(EngineError::LeaseLost)
    }

    /// Under the job lock: revival of an unknown attempt, cancellation, or refusal.
    /// `Ok(None)` when the attempt is `started` again (the fast path should be retried).
    async fn heartbeat_slow(
        &self,
        owner: &str,
        job_id: Uuid,
        attempt_id: Uuid,
        lease_token: Uuid,
        details: Option<&Value>,
    ) -> Result<Option<HeartbeatAck>, EngineError> {
        let mut tx = self.begin().await?;
        tx.lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let attempt = tx
            .attempt(owner, attempt_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        if attempt.lease_token != Some(lease_token) {
            tracing::warn!(job_id = %job_id, attempt_id = %attempt_id, owner, "heartbeat with a wrong lease token refused");
            return Err(EngineError::LeaseLost);
        }
        match attempt.status {
            AttemptStatus::Cancelled => Ok(Some(HeartbeatAck {
                cancel_requested: true,
            })),
            AttemptStatus::Started => Ok(None),
            AttemptStatus::Unknown => {
                if !tx
                    .revive_attempt(owner, attempt_id, lease_token, details)
                    .await?
                {
                    return Err(EngineError::LeaseLost);
                }
                tx.set_activity_status(
                    owner,
                    attempt.activity_id,
                    &[ActivityStatus::Blocked],
                    ActivityStatus::Running,
                )
                .await?;
                let mut events = Events::for_job(owner, job_id);
                events.push(
                    event::ATTEMPT_REVIVED,
                    Some(attempt_id),
                    &actor::worker(attempt.worker_id.as_deref().unwrap_or("?")),
                    json!({ "provider": attempt.provider, "number": attempt.number }),
                );
                events.flush(tx.as_mut(), &self.metrics).await?;
                tx.commit().await?;
                tracing::info!(job_id = %job_id, attempt_id = %attempt_id, owner, "unknown attempt revived by its heartbeat");
                Ok(Some(HeartbeatAck {
                    cancel_requested: false,
                }))
            }
            _ => Err(EngineError::LeaseLost),
        }
    }
}
