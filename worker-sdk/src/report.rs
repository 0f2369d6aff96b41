//! [`Reporter`]: gets attempts' completions to the engine, many per request.
//!
//! A finished attempt's completion is queued. While the worker's poll loop is about to
//! poll (it waits for a free slot, which the finished attempt has just given back), or
//! while a poll that carries completions is in flight (the engine answers those without
//! waiting for work), the next poll carries the queued completions; otherwise (a plain
//! long poll is in flight, or the loop is backing off or stopped) the reporter sends them
//! at once with
//! `POST /v1/worker/completions`, at most [`REQUESTS_IN_FLIGHT`] requests at a time, so
//! completions that finish meanwhile share the next one. A busy worker spends one round
//! trip on many attempts; an idle one sends each completion right away. The engine judges
//! every completion on its own (fencing, contract, CAS), so sharing a request never
//! changes an outcome. Against an engine that predates these, the reporter falls back to
//! one `POST /v1/worker/attempts/{id}/complete` per completion.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use onceflow_protocol::api::{
    AttemptCompletion, CompleteManyRequest, CompleteManyResponse, CompleteRequest,
    CompleteResponse, CompletionAnswer, MAX_COMPLETIONS,
};
use onceflow_protocol::model::CompletionOutcome;
use reqwest::Method;
use tokio::sync::{oneshot, Notify, Semaphore};
use uuid::Uuid;

use crate::endpoints::Repeat;
use crate::error::SdkError;
use crate::transport::Transport;

/// At most this many completion requests are on their way at once.
pub(crate) const REQUESTS_IN_FLIGHT: usize = 2;

/// How long one completion request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What a completion is answered: its outcome, or the error the single-attempt endpoint
/// would have answered (or a transport error).
pub(crate) type Answer = Result<CompletionOutcome, SdkError>;

/// One completion waiting to be sent, and where its answer goes.
pub(crate) struct Pending {
    completion: AttemptCompletion,
    answer: oneshot::Sender<Answer>,
}

/// Completions not yet sent, and whether a poll is about to take them.
#[derive(Default)]
struct Outbox {
    /// To be sent at once (a poll may still take them first).
    now: VecDeque<Pending>,
    /// Left for the next poll, while `poll_pending`.
    for_poll: VecDeque<Pending>,
    /// The poll loop is waiting for a free slot and will send `for_poll` with its poll.
    poll_pending: bool,
}

impl Outbox {
    /// Up to [`MAX_COMPLETIONS`] completions, those to send at once first; `for_poll`
    /// too unless a poll is about to take it.
    fn take(&mut self, with_for_poll: bool) -> Vec<Pending> {
        let mut taken: Vec<Pending> = Vec::new();
        let n = self.now.len().min(MAX_COMPLETIONS);
        taken.extend(self.now.drain(..n));
        if with_for_poll {
            let n = self.for_poll.len().min(MAX_COMPLETIONS - taken.len());
            taken.extend(self.for_poll.drain(..n));
        }
        taken
    }
}

/// A handle to the completions' outbox and the task that sends them; cheap to clone.
#[derive(Clone)]
pub(crate) struct Reporter {
    outbox: Arc<Mutex<Outbox>>,
    wake: Arc<Notify>,
    /// The engine ignored completions carried by a poll: send them separately.
    no_carry: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
}

impl Reporter {
    /// Starts the sending task on the current runtime; it runs until [`Reporter::stop`].
    pub(crate) fn start(transport: Transport) -> Self {
        let reporter = Reporter {
            outbox: Arc::new(Mutex::new(Outbox::default())),
            wake: Arc::new(Notify::new()),
            no_carry: Arc::new(AtomicBool::new(false)),
            stopped: Arc::new(AtomicBool::new(false)),
        };
        tokio::spawn(send_loop(reporter.clone(), transport));
        reporter
    }

    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        // The outbox holds no invariant a panic could break half-way: keep using it.
        self.outbox
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues one attempt's completion; the receiver gets the engine's answer for it. With
    /// `at_once`, it is sent without waiting for a poll (a retry, say, which frees no slot).
    /// Repeating a completion is safe: the engine answers a repeat as it answered the first.
    pub(crate) fn queue(
        &self,
        attempt_id: Uuid,
        body: &CompleteRequest,
        at_once: bool,
    ) -> oneshot::Receiver<Answer> {
        let (answer, answered) = oneshot::channel();
        let completion = AttemptCompletion {
            attempt_id,
            lease_token: body.lease_token,
            read_version: body.read_version,
            result: body.result.clone(),
            error: body.error.clone(),
        };
        let pending = Pending { completion, answer };
        let leave_to_poll = {
            let mut outbox = self.outbox();
            let leave = outbox.poll_pending && !at_once;
            if leave {
                outbox.for_poll.push_back(pending)
            } else {
                outbox.now.push_back(pending)
            }
            leave
        };
        if !leave_to_poll {
            self.wake.notify_one();
        }
        answered
    }

    /// The poll loop is waiting for a slot: completions queued from now on wait for its
    /// poll (the attempt that queues one has given a slot back, so the poll comes).
    pub(crate) fn poll_waiting(&self) {
        if !self.no_carry.load(Ordering::Relaxed) {
            self.outbox().poll_pending = true;
        }
    }

    /// A poll carrying completions is in flight: the engine answers it without waiting for
    /// work, so completions queued meanwhile wait for the next poll, which comes at once.
    pub(crate) fn carrying_poll_sent(&self) {
        if !self.no_carry.load(Ordering::Relaxed) {
            self.outbox().poll_pending = true;
        }
    }

    /// The poll loop is not about to poll (it is polling, backing off, or stopped): what
    /// is queued, and what comes, is sent at once.
    pub(crate) fn poll_not_waiting(&self) {
        let waiting = {
            let mut outbox = self.outbox();
            outbox.poll_pending = false;
            !outbox.for_poll.is_empty() || !outbox.now.is_empty()
        };
        if waiting {
            self.wake.notify_one();
        }
    }

    /// Takes the queued completions for the poll about to be sent (none if the engine
    /// showed it does not take them with polls); completions queued after this are sent
    /// at once until [`Reporter::poll_waiting`].
    pub(crate) fn take_for_poll(&self) -> Vec<Pending> {
        let mut outbox = self.outbox();
        outbox.poll_pending = false;
        if self.no_carry.load(Ordering::Relaxed) {
            return Vec::new();
        }
        outbox.take(true)
    }

    /// Hands the answers of a poll to the completions it carried. If the engine did not
    /// answer them (it predates completions on polls), they are queued to be sent alone,
    /// and later polls carry none.
    pub(crate) fn poll_answered(&self, carried: Vec<Pending>, answers: Vec<CompletionAnswer>) {
        if carried.is_empty() {
            return;
        }
        if answers.is_empty() {
            tracing::info!(
                "the engine does not take completions with polls; sending them separately"
            );
            self.no_carry.store(true, Ordering::Relaxed);
            {
                let mut outbox = self.outbox();
                outbox.poll_pending = false;
                for p in carried.into_iter().rev() {
                    outbox.now.push_front(p);
                }
            }
            self.wake.notify_one();
            return;
        }
        answer_all(carried, answers);
    }

    /// The poll that carried `carried` failed as a whole: each gets the error (their
    /// attempts retry a transient one).
    pub(crate) fn poll_failed(carried: Vec<Pending>, error: &SdkError) {
        for p in carried {
            let _ = p.answer.send(Err(error.clone()));
        }
    }

    /// Sends what is left and stops the sending task.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.poll_not_waiting();
        self.wake.notify_one();
    }
}

/// Gives each completion the answer the engine sent for it, in order.
fn answer_all(batch: Vec<Pending>, answers: Vec<CompletionAnswer>) {
    let mut answers = answers.into_iter();
    for p in batch {
        let result = match answers.next() {
            Some(r) if r.attempt_id == p.completion.attempt_id => match (r.outcome, r.error) {
                (Some(outcome), _) => Ok(outcome),
                (None, Some(error)) => Err(SdkError::Api {
                    status: r.status.unwrap_or(500),
                    code: error.code,
                    message: error.message,
                    details: error.details,
                }),
                (None, None) => Err(SdkError::Transport(
                    "a completion answer with neither outcome nor error".into(),
                )),
            },
            _ => Err(SdkError::Transport(
                "the engine's answers do not match the completions sent".into(),
            )),
        };
        let _ = p.answer.send(result);
    }
}

/// Sends what is queued (up to [`MAX_COMPLETIONS`] per request) whenever it is woken and a
/// request slot is free, unless a poll is about to carry it.
async fn send_loop(reporter: Reporter, transport: Transport) {
    let slots = Arc::new(Semaphore::new(REQUESTS_IN_FLIGHT));
    let one_by_one = Arc::new(AtomicBool::new(false));
    loop {
        // A free request slot first, so that what queues meanwhile joins this batch.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let batch = loop {
            let batch: Vec<Pending> = {
                let mut outbox = reporter.outbox();
                let with_for_poll =
                    !outbox.poll_pending || reporter.stopped.load(Ordering::Relaxed);
                outbox.take(with_for_poll)
            };
            if !batch.is_empty() {
                break batch;
            }
            if reporter.stopped.load(Ordering::Relaxed) {
                return;
            }
            // A wake-up sent since the look above is kept by `Notify`, never lost.
            reporter.wake.notified().await;
        };
        let transport = transport.clone();
        let one_by_one = one_by_one.clone();
        tokio::spawn(async move {
            send_batch(&transport, batch, &one_by_one).await;
            drop(slot);
        });
    }
}

/// Sends one batch and hands each completion its own answer.
async fn send_batch(transport: &Transport, batch: Vec<Pending>, one_by_one: &AtomicBool) {
    if !one_by_one.load(Ordering::Relaxed) {
        let request = CompleteManyRequest {
            completions: batch.iter().map(|p| p.completion.clone()).collect(),
        };
        match transport
            .call::<_, CompleteManyResponse>(
                Repeat::Safe,
                Method::POST,
                "/v1/worker/completions",
                &[],
                Some(&request),
                REQUEST_TIMEOUT,
            )
            .await
        {
            Ok(answer) => return answer_all(batch, answer.body.results),
            // An engine that predates the endpoint: from now on, one request per completion.
            Err(SdkError::Api {
                status: 404 | 405,
                ref code,
                ..
            }) if code == "not_found" || code == "method_not_allowed" => {
                tracing::info!("the engine has no POST /v1/worker/completions; reporting completions one by one");
                one_by_one.store(true, Ordering::Relaxed);
            }
            // The whole request failed: each completion gets the error (its attempt
            // retries a transient one).
            Err(e) => {
                for p in batch {
                    let _ = p.answer.send(Err(e.clone()));
                }
                return;
            }
        }
    }
    let sends = batch.into_iter().map(|p| async move {
        let c = p.completion;
        let path = format!("/v1/worker/attempts/{}/complete", c.attempt_id);
        let body = CompleteRequest {
            lease_token: c.lease_token,
            read_version: c.read_version,
            result: c.result,
            error: c.error,
        };
        let result = transport
            .call::<_, CompleteResponse>(
                Repeat::Safe,
                Method::POST,
                &path,
                &[],
                Some(&body),
                REQUEST_TIMEOUT,
            )
            .await
            .map(|answer| answer.body.outcome);
        let _ = p.answer.send(result);
    });
    futures::future::join_all(sends).await;
}

/// Stops the reporter's sending task when dropped (after it has sent what is queued),
/// however the poll loop that owns it ends.
pub(crate) struct StopOnDrop(pub(crate) Reporter);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl Pending {
    /// The completion, as a poll carries it.
    pub(crate) fn completion(&self) -> &AttemptCompletion {
        &self.completion
    }
}
