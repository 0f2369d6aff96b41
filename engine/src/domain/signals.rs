//! Signals: named messages from the outside world to a workflow job. One signal per
//! (job, idempotency key) however many times it is sent (invariant 9); each is numbered
//! in the job's arrival order when recorded, kept until a wait of the workflow takes it,
//! and taken by one wait, once.

use serde_json::json;
use uuid::Uuid;

use super::{actor, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, JobKind, Scope, SignalView};
use crate::request::SignalRequest;
use crate::store::{Arrival, NewSignal, SignalRow};

/// How a signal was taken.
#[derive(Debug, Clone)]
pub struct SignalSubmission {
    /// The signal, as recorded.
    pub signal: SignalView,
    /// `true` when the key and body were seen before and this is that signal.
    pub replayed: bool,
}

impl Engine {
    /// Records a signal for a workflow job visible in `scope`, under `idempotency_key`.
    ///
    /// Guarantees: one signal per (job, key) however many concurrent or repeated calls
    /// (invariant 9); the same key with the same name and payload answers the recorded
    /// signal (`replayed`), with another body [`EngineError::IdempotencyKeyReused`] and
    /// nothing changes. A finished job refuses a new signal ([`EngineError::JobFinished`]),
    /// an activity job any ([`EngineError::NotAWorkflow`]). A recorded signal gets the next
    /// number in the job's arrival order and wakes the workflow.
    pub async fn signal(
        &self,
        scope: &Scope,
        job_id: Uuid,
        idempotency_key: &str,
        request: &SignalRequest,
    ) -> Result<SignalSubmission, EngineError> {
        crate::request::check_idempotency_key(idempotency_key)?;
        let owner = self
            .store
            .job_owner(scope, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        let fingerprint = request.fingerprint();
        retry_transient!(self.signal_once(&owner, job_id, idempotency_key, request, &fingerprint))
    }

    async fn signal_once(
        &self,
        owner: &str,
        job_id: Uuid,
        key: &str,
        request: &SignalRequest,
        fingerprint: &str,
    ) -> Result<SignalSubmission, EngineError> {
        let mut tx = self.begin().await?;
        let job = tx
            .lock_job(owner, job_id)
            .await?
            .ok_or(EngineError::NotFound)?;
        if job.kind != JobKind::Workflow {
            return Err(EngineError::NotAWorkflow);
        }
        if let Some(seen) = tx.signal_by_key(owner, job_id, key).await? {
            return replay_of(seen, job_id, fingerprint);
        }
        if job.status.is_closed() {
            return Err(EngineError::JobFinished);
        }
        let inserted = tx
            .insert_signal(&NewSignal {
                owner,
                job_id,
                id: Uuid::now_v7(),
                name: &request.name,
                idempotency_key: key,
                fingerprint,
                payload: &request.payload,
            })
            .await?;
        let Some(signal) = inserted else {
            // Under the job's row lock no one else can have taken the key meanwhile; read
            // the holder all the same rather than assume.
            let seen = tx
                .signal_by_key(owner, job_id, key)
                .await?
                .ok_or(EngineError::NotFound)?;
            return replay_of(seen, job_id, fingerprint);
        };
        tx.mark_workflow_ready(owner, job_id, Arrival::Signal(signal.seq))
            .await?;
        let mut events = Events::for_job(owner, job_id);
        events.push(
            event::SIGNAL_RECEIVED,
            None,
            &actor::client(owner),
            json!({ "signal_id": signal.id, "seq": signal.seq, "name": signal.name }),
        );
        events.flush(tx.as_mut(), &self.metrics).await?;
        tx.commit().await?;
        tracing::info!(%job_id, owner, name = %signal.name, seq = signal.seq, "signal received");
        Ok(SignalSubmission {
            signal: signal.view(job_id),
            replayed: false,
        })
    }
}

fn replay_of(
    seen: SignalRow,
    job_id: Uuid,
    fingerprint: &str,
) -> Result<SignalSubmission, EngineError> {
    if seen.fingerprint != fingerprint {
        return Err(EngineError::IdempotencyKeyReused { job_id });
    }
    Ok(SignalSubmission {
        signal: seen.view(job_id),
        replayed: true,
    })
}
