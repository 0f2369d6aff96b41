//! [`ActivityContext`]: what a handler knows about the attempt it runs, and how it learns
//! to stop.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceflow_protocol::api::{HeartbeatRequest, HeartbeatResponse};
use onceflow_protocol::model::ActivityTask;
use reqwest::Method;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::endpoints::Repeat;
use crate::error::SdkError;
use crate::transport::Transport;

/// Why a handler is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The attempt was cancelled (by an operator, with its job, or because another
    /// attempt's result already won). Stop working; a result sent anyway is recorded
    /// as `lost` unless it is the first to arrive.
    CancelRequested,
    /// The engine refused this attempt's lease token (the attempt is finished or the
    /// token is not its own). The handler's result is still sent, and the engine decides
    /// whether it won.
    LeaseLost,
}

const RUNNING: u8 = 0;
const CANCEL_REQUESTED: u8 = 1;
const LEASE_LOST: u8 = 2;

/// What a handler knows about the attempt it runs.
///
/// Pass [`ActivityContext::idempotency_key`] to the downstream provider: it is the same
/// for every attempt of the activity, so a retry or a fallback that reaches the same
/// provider twice is deduplicated there too (one identity through every layer).
#[derive(Clone, Debug)]
pub struct ActivityContext {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    task: ActivityTask,
    transport: Option<Transport>,
    stop: CancellationToken,
    reason: AtomicU8,
}

impl ActivityContext {
    pub(crate) fn new(task: ActivityTask, transport: Option<Transport>) -> Self {
        ActivityContext {
            inner: Arc::new(Inner {
                task,
                transport,
                stop: CancellationToken::new(),
                reason: AtomicU8::new(RUNNING),
            }),
        }
    }

    /// Stable for the activity across all its attempts and providers: give it to the
    /// downstream provider as its idempotency key.
    pub fn idempotency_key(&self) -> &str {
        &self.inner.task.idempotency_key
    }

    /// This attempt's number within the activity (1, 2, 3 … across providers); 0 while
    /// certifying.
    pub fn attempt(&self) -> i32 {
        self.inner.task.attempt_number
    }

    /// This attempt's id.
    pub fn attempt_id(&self) -> uuid::Uuid {
        self.inner.task.attempt_id
    }

    /// The job this attempt serves.
    pub fn job_id(&self) -> uuid::Uuid {
        self.inner.task.job_id
    }

    /// The owner of the job.
    pub fn owner(&self) -> &str {
        &self.inner.task.owner
    }

    /// The provider running it.
    pub fn provider(&self) -> &str {
        &self.inner.task.provider
    }

    /// Whether this run is a certification case rather than a real attempt.
    pub fn is_certification(&self) -> bool {
        self.inner.transport.is_none()
    }

    /// A token cancelled when the handler should stop (see [`StopReason`]); hand it to
    /// code that supports cancellation.
    pub fn cancellation(&self) -> CancellationToken {
        self.inner.stop.child_token()
    }

    /// Resolves when the handler should stop.
    pub async fn cancelled(&self) {
        self.inner.stop.cancelled().await
    }

    /// Why the handler should stop, if it should.
    pub fn stop_reason(&self) -> Option<StopReason> {
        match self.inner.reason.load(Ordering::Acquire) {
            CANCEL_REQUESTED => Some(StopReason::CancelRequested),
            LEASE_LOST => Some(StopReason::LeaseLost),
            _ => None,
        }
    }

    pub(crate) fn request_stop(&self, reason: StopReason) {
        let code = match reason {
            StopReason::CancelRequested => CANCEL_REQUESTED,
            StopReason::LeaseLost => LEASE_LOST,
        };
        let _ =
            self.inner
                .reason
                .compare_exchange(RUNNING, code, Ordering::AcqRel, Ordering::Acquire);
        self.inner.stop.cancel();
    }

    pub(crate) fn task(&self) -> &ActivityTask {
        &self.inner.task
    }

    /// Reports progress now (kept on the attempt) and renews the lease. The SDK also
    /// heartbeats by itself while the handler runs; call this to attach details.
    /// Learning that the attempt was cancelled or its lease lost stops the handler
    /// through [`ActivityContext::cancelled`] as well as returning the reason here.
    pub async fn heartbeat(&self, details: Value) -> Result<Option<StopReason>, SdkError> {
        self.send_heartbeat(Some(details)).await
    }

    pub(crate) async fn send_heartbeat(
        &self,
        details: Option<Value>,
    ) -> Result<Option<StopReason>, SdkError> {
        let Some(transport) = &self.inner.transport else {
            return Ok(None);
        };
        let body = HeartbeatRequest {
            lease_token: self.inner.task.lease_token,
            details,
        };
        let path = format!(
            "/v1/worker/attempts/{}/heartbeat",
            self.inner.task.attempt_id
        );
        match transport
            .call::<_, HeartbeatResponse>(
                Repeat::Safe,
                Method::POST,
                &path,
                &[],
                Some(&body),
                Duration::from_secs(10),
            )
            .await
        {
            Ok(answer) if answer.body.cancel_requested => {
                self.request_stop(StopReason::CancelRequested);
                Ok(Some(StopReason::CancelRequested))
            }
            Ok(_) => Ok(None),
            Err(SdkError::Api { code, .. }) if code == "lease_lost" || code == "not_found" => {
                self.request_stop(StopReason::LeaseLost);
                Ok(Some(StopReason::LeaseLost))
            }
            Err(e) => Err(e),
        }
    }
}
