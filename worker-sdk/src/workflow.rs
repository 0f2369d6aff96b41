//! Workflows as Rust code: an `async fn(WorkflowContext, In) -> Result<Out, WorkflowError>`
//! replayed against the job's journal. Each call to [`WorkflowContext::activity`] or
//! [`WorkflowContext::sleep`] takes the next position; a position already in the journal
//! returns its recorded outcome, the first one that is not becomes a command and the
//! replay stops there. Recorded outcomes are delivered in the order they arrived (the
//! journal's `arrival`), one at a time, so a race (`select!`) takes the branch of the
//! outcome that arrived first on every replay. Replaying is side-effect free, so it can
//! run any number of times, on any worker.
//!
//! Cancellation: a workflow that declared a compensation bound
//! ([`WorkflowContext::compensate_within`]) learns of its job's cancel. The cancel is
//! delivered at its place in the arrival order; every step created before then whose own
//! outcome was not delivered before it resolves to a `job_cancelled` error, and steps
//! created after it run normally (the compensation).

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, Utc};
use onceflow_protocol::model::{ActivityOptions, ActivityStatus, ErrorInfo, Failover, RetryPolicy};
use onceflow_protocol::workflow::{CancelRequest, JournalEntry, WorkflowCommand, WorkflowTask};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// How a workflow failed: the job fails with this error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WorkflowError {
    /// A snake_case code recorded on the job.
    pub code: String,
    /// For humans.
    pub message: String,
}

impl WorkflowError {
    /// A workflow failure with code `workflow_error`.
    pub fn new(message: impl Into<String>) -> Self {
        WorkflowError {
            code: "workflow_error".into(),
            message: message.into(),
        }
    }

    /// A workflow failure with a code of your choosing.
    pub fn with_code(code: impl Into<String>, message: impl Into<String>) -> Self {
        WorkflowError {
            code: code.into(),
            message: message.into(),
        }
    }

    /// Whether this error is the job's cancellation (code `job_cancelled`): a step that
    /// was pending when the owner cancelled the job.
    pub fn is_cancelled(&self) -> bool {
        self.code == CANCELLED
    }
}

/// The error code of every step ended by the job's cancellation.
const CANCELLED: &str = "job_cancelled";

/// An activity scheduled by a workflow ended without a result: every provider failed
/// (`providers_exhausted`), or it was cancelled. The workflow may handle it or return it
/// (`?` turns it into a [`WorkflowError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("activity `{activity}` failed: {code}: {message}")]
pub struct ActivityFailed {
    /// The activity.
    pub activity: String,
    /// E.g. `providers_exhausted`.
    pub code: String,
    /// For humans.
    pub message: String,
}

impl ActivityFailed {
    /// Whether the activity ended because its job was cancelled (code `job_cancelled`):
    /// it was pending when the owner cancelled the job, and its result (if it ever comes)
    /// is not the workflow's.
    pub fn is_cancelled(&self) -> bool {
        self.code == CANCELLED
    }
}

impl From<ActivityFailed> for WorkflowError {
    fn from(failed: ActivityFailed) -> Self {
        WorkflowError {
            code: failed.code.clone(),
            message: failed.to_string(),
        }
    }
}

/// The deterministic world a workflow sees: activities, durable timers, time, identity.
///
/// Determinism rules: call the context's methods in an order that depends only on the
/// workflow's input and on what they returned; read time with [`WorkflowContext::now`],
/// never the system clock; no randomness, I/O or spawned tasks in workflow code (do those
/// in activities).
///
/// Races (`tokio::select!` with `biased;`) are replay-safe:
/// recorded outcomes are delivered one at a time in the order they arrived at the engine,
/// so the branch whose outcome arrived first wins, on every replay.
///
/// Cancellation: once the workflow declared a compensation bound
/// ([`WorkflowContext::compensate_within`]), the owner's cancel reaches it as one more
/// outcome, in arrival order: every step created before it and still pending then
/// resolves to a `job_cancelled` error ([`ActivityFailed::is_cancelled`],
/// [`WorkflowError::is_cancelled`]), and [`WorkflowContext::is_cancelled`] turns true.
/// Steps created after it run normally, so the code can compensate, then return; the job
/// ends `cancelled` whatever it returns.
#[derive(Clone)]
pub struct WorkflowContext {
    replay: Rc<RefCell<Replay>>,
}

struct Replay {
    journal: HashMap<i32, JournalEntry>,
    next_seq: i32,
    commands: Vec<WorkflowCommand>,
    nondeterminism: Option<String>,
    /// Outcomes that arrived up to this place in the arrival order are delivered;
    /// later ones still look pending.
    delivered_up_to: i64,
    /// Futures waiting on an outcome that is recorded but not delivered yet.
    undelivered: Vec<Waker>,
    now: DateTime<Utc>,
    job_id: uuid::Uuid,
    idempotency_key: String,
    /// The owner's cancel, if the engine recorded one.
    cancel: Option<CancelRequest>,
    /// The compensation bound the code declared last in this replay, in ms (`0`: none);
    /// starts as the one the engine recorded.
    compensation_ms: u64,
}

/// What the cancellation rule says about a pending step ([`WorkflowContext::cancelled_while_pending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cancellation {
    /// The cancel does not concern the step: it proceeds as usual.
    Proceeds,
    /// The step will resolve to the cancellation error once the cancel is delivered, later
    /// in this replay: it waits (and asks the engine for nothing).
    Waits,
    /// The cancel is delivered: the step resolves to the cancellation error now.
    Cancelled,
}

impl WorkflowContext {
    fn next_seq(&self) -> i32 {
        let mut replay = self.replay.borrow_mut();
        let seq = replay.next_seq;
        replay.next_seq += 1;
        seq
    }

    /// Calls activity `name` with `input`; await it for the activity's result. By default
    /// its only provider is one named like the activity; set them with
    /// [`ActivityCall::providers`]. Each call takes the next position in the workflow's
    /// history, so create calls in a deterministic order (several created before awaiting
    /// them together, e.g. with `join!`, are scheduled in the same workflow task).
    pub fn activity<O: DeserializeOwned>(
        &self,
        name: &str,
        input: impl Serialize,
    ) -> ActivityCall<O> {
        ActivityCall {
            ctx: self.clone(),
            seq: self.next_seq(),
            born: self.born(),
            name: name.to_owned(),
            input: serde_json::to_value(input).map_err(|e| e.to_string()),
            providers: vec![name.to_owned()],
            options: ActivityOptions::default(),
            _output: PhantomData,
        }
    }

    /// A durable timer: resolves to `Ok(())` once `duration` has passed on the engine,
    /// however many workers and engines restart meanwhile, or to a `job_cancelled` error
    /// ([`WorkflowError::is_cancelled`]) if the job is cancelled first (see
    /// [`WorkflowContext::compensate_within`]).
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep {
            ctx: self.clone(),
            seq: self.next_seq(),
            born: self.born(),
            duration,
        }
    }

    /// The workflow's deterministic clock: the job's creation time, moved forward to when
    /// each recorded step the workflow has awaited finished.
    pub fn now(&self) -> DateTime<Utc> {
        self.replay.borrow().now
    }

    /// Stable for the job: an identity for anything the workflow's activities create.
    pub fn idempotency_key(&self) -> String {
        self.replay.borrow().idempotency_key.clone()
    }

    /// The workflow job's id.
    pub fn job_id(&self) -> uuid::Uuid {
        self.replay.borrow().job_id
    }

    /// Declares how long the workflow may compensate once its job is cancelled: from the
    /// owner's cancel, the job stays `running`, every pending step resolves to a
    /// `job_cancelled` error, and steps started after that run, until the workflow returns
    /// or `bound` has passed; then the job ends `cancelled`. At most 24 h (more parks the
    /// job, visibly). Without a bound (or with [`Duration::ZERO`]) a cancel closes the job
    /// at once and the code never learns. The last bound declared before the cancel
    /// counts; the engine records it with this workflow task.
    pub fn compensate_within(&self, bound: Duration) {
        let ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
        self.replay.borrow_mut().compensation_ms = ms;
    }

    /// Whether the job's cancel has been delivered to the workflow at this point of the
    /// replay (only a workflow that declared a compensation bound is told). Steps created
    /// from then on run normally: use it to tell a compensating path from the usual one.
    pub fn is_cancelled(&self) -> bool {
        let replay = self.replay.borrow();
        replay
            .cancel
            .is_some_and(|c| c.arrival <= replay.delivered_up_to)
    }

    /// The place in the arrival order a step created now is born at.
    fn born(&self) -> i64 {
        self.replay.borrow().delivered_up_to
    }

    /// The cancellation rule, the same for every kind of pending step: a step `born`
    /// (see [`WorkflowContext::born`]) before the cancel was delivered, whose own outcome
    /// (`own_arrival`: its place in the arrival order, `None` while it has none) was not
    /// delivered before the cancel, resolves to the cancellation error once the cancel is
    /// delivered. Until then it waits (`cx` is woken when the replay moves on) and must
    /// not ask the engine for anything. Steps born after the cancel proceed.
    fn cancelled_while_pending(
        &self,
        born: i64,
        own_arrival: Option<i64>,
        cx: &Context<'_>,
    ) -> Cancellation {
        let mut replay = self.replay.borrow_mut();
        let Some(cancel) = replay.cancel else {
            return Cancellation::Proceeds;
        };
        if born >= cancel.arrival || own_arrival.is_some_and(|own| own < cancel.arrival) {
            return Cancellation::Proceeds;
        }
        if cancel.arrival <= replay.delivered_up_to {
            if cancel.requested_at > replay.now {
                replay.now = cancel.requested_at;
            }
            return Cancellation::Cancelled;
        }
        replay.undelivered.push(cx.waker().clone());
        Cancellation::Waits
    }

    fn advance_clock(&self, to: Option<DateTime<Utc>>) {
        if let Some(to) = to {
            let mut replay = self.replay.borrow_mut();
            if to > replay.now {
                replay.now = to;
            }
        }
    }

    fn mismatch(&self, seq: i32, asked: String, recorded: &JournalEntry) {
        let was = match recorded {
            JournalEntry::Activity { name, .. } => {
                format!("activity `{name}` with its recorded input")
            }
            JournalEntry::Timer { .. } => "a timer".to_owned(),
        };
        let mut replay = self.replay.borrow_mut();
        replay.nondeterminism.get_or_insert(format!(
            "at position {seq} the workflow asks for {asked}, but its history recorded {was}"
        ));
    }

    /// Whether the outcome of `entry` is delivered at this step of the replay; if not,
    /// `cx` is woken when the replay moves on. Outcomes without an arrival number
    /// (recorded before arrivals were numbered) are delivered from the start.
    fn delivered(&self, entry: &JournalEntry, cx: &Context<'_>) -> bool {
        let mut replay = self.replay.borrow_mut();
        if entry.arrival().unwrap_or(0) <= replay.delivered_up_to {
            return true;
        }
        replay.undelivered.push(cx.waker().clone());
        false
    }

    fn emit(&self, command: WorkflowCommand) {
        self.replay.borrow_mut().commands.push(command);
    }
}

/// An activity call from a workflow; set its providers and options, then `.await` it.
pub struct ActivityCall<O> {
    ctx: WorkflowContext,
    seq: i32,
    born: i64,
    name: String,
    input: Result<Value, String>,
    providers: Vec<String>,
    options: ActivityOptions,
    _output: PhantomData<fn() -> O>,
}

impl<O: DeserializeOwned> ActivityCall<O> {
    /// Providers in order; the first is the primary, the others are failed over to when
    /// certified.
    pub fn providers<S: Into<String>>(mut self, providers: impl IntoIterator<Item = S>) -> Self {
        self.providers = providers.into_iter().map(Into::into).collect();
        self
    }

    /// Heartbeat at least this often or the attempt becomes `unknown`.
    pub fn heartbeat_timeout(mut self, timeout: Duration) -> Self {
        self.options.heartbeat_timeout_s = Some(timeout.as_secs().max(1));
        self
    }

    /// An attempt still running this long after it started becomes `unknown`.
    pub fn start_to_close_timeout(mut self, timeout: Duration) -> Self {
        self.options.start_to_close_timeout_s = Some(timeout.as_secs().max(1));
        self
    }

    /// An attempt nobody started within this long expires and fails over.
    pub fn schedule_to_start_timeout(mut self, timeout: Duration) -> Self {
        self.options.schedule_to_start_timeout_s = Some(timeout.as_secs().max(1));
        self
    }

    /// Retry budget and backoff per provider.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.options.retry = retry;
        self
    }

    /// Manual failover: after an attempt ends, a person chooses the next one.
    pub fn manual_failover(mut self) -> Self {
        self.options.failover = Failover::Manual;
        self
    }
}

impl<O: DeserializeOwned> IntoFuture for ActivityCall<O> {
    type Output = Result<O, ActivityFailed>;
    type IntoFuture = ActivityFuture<O>;

    fn into_future(self) -> ActivityFuture<O> {
        ActivityFuture {
            call: self,
            emitted: false,
        }
    }
}

/// The future of an [`ActivityCall`].
pub struct ActivityFuture<O> {
    call: ActivityCall<O>,
    emitted: bool,
}

impl<O: DeserializeOwned> Future for ActivityFuture<O> {
    type Output = Result<O, ActivityFailed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let call = &this.call;
        let ctx = &call.ctx;
        let input = match &call.input {
            Ok(v) => v.clone(),
            Err(e) => {
                return Poll::Ready(Err(ActivityFailed {
                    activity: call.name.clone(),
                    code: "invalid_input".into(),
                    message: e.clone(),
                }));
            }
        };
        let cancelled = || {
            Poll::Ready(Err(ActivityFailed {
                activity: call.name.clone(),
                code: CANCELLED.into(),
                message: "the job was cancelled while the activity was pending".into(),
            }))
        };
        let recorded = ctx.replay.borrow().journal.get(&call.seq).cloned();
        match recorded {
            Some(
                ref entry @ JournalEntry::Activity {
                    ref name,
                    input: ref was,
                    status,
                    ..
                },
            ) if *name == call.name && *was == input => {
                let own = status.is_closed().then(|| entry.arrival().unwrap_or(0));
                match ctx.cancelled_while_pending(call.born, own, cx) {
                    Cancellation::Cancelled => return cancelled(),
                    Cancellation::Waits => return Poll::Pending,
                    Cancellation::Proceeds => {}
                }
                if !ctx.delivered(entry, cx) {
                    // Its outcome arrived after one not yet delivered: pending for now.
                    return Poll::Pending;
                }
                let JournalEntry::Activity {
                    result,
                    error,
                    finished_at,
                    ..
                } = entry.clone()
                else {
                    return Poll::Pending;
                };
                match status {
                    ActivityStatus::Succeeded => {
                        ctx.advance_clock(finished_at);
                        let value = result.unwrap_or(Value::Null);
                        Poll::Ready(serde_json::from_value(value).map_err(|e| ActivityFailed {
                            activity: call.name.clone(),
                            code: "invalid_result".into(),
                            message: format!("the result does not read as the expected type: {e}"),
                        }))
                    }
                    ActivityStatus::Failed | ActivityStatus::Cancelled => {
                        ctx.advance_clock(finished_at);
                        let error = error.unwrap_or_else(|| {
                            ErrorInfo::new("activity_failed", "the activity failed")
                        });
                        Poll::Ready(Err(ActivityFailed {
                            activity: call.name.clone(),
                            code: error.code,
                            message: error.message,
                        }))
                    }
                    _ => Poll::Pending,
                }
            }
            Some(JournalEntry::Activity {
                name,
                input: was,
                status,
                ..
            }) => {
                ctx.mismatch(
                    call.seq,
                    format!("activity `{}`", call.name),
                    &JournalEntry::Activity {
                        seq: call.seq,
                        name,
                        input: was,
                        status,
                        result: None,
                        error: None,
                        finished_at: None,
                        arrival: None,
                    },
                );
                Poll::Pending
            }
            Some(other) => {
                ctx.mismatch(call.seq, format!("activity `{}`", call.name), &other);
                Poll::Pending
            }
            None => {
                match ctx.cancelled_while_pending(call.born, None, cx) {
                    Cancellation::Cancelled => return cancelled(),
                    Cancellation::Waits => return Poll::Pending,
                    Cancellation::Proceeds => {}
                }
                if !this.emitted {
                    this.emitted = true;
                    ctx.emit(WorkflowCommand::ScheduleActivity {
                        seq: call.seq,
                        activity: call.name.clone(),
                        providers: call.providers.clone(),
                        input,
                        options: Some(call.options.clone().into()),
                    });
                }
                Poll::Pending
            }
        }
    }
}

/// The future of [`WorkflowContext::sleep`].
pub struct Sleep {
    ctx: WorkflowContext,
    seq: i32,
    born: i64,
    duration: Duration,
}

impl Future for Sleep {
    type Output = Result<(), WorkflowError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let cancelled = || {
            Poll::Ready(Err(WorkflowError::with_code(
                CANCELLED,
                "the job was cancelled while the timer was pending",
            )))
        };
        let recorded = this.ctx.replay.borrow().journal.get(&this.seq).cloned();
        match recorded {
            Some(ref entry @ JournalEntry::Timer { fired_at, .. }) => {
                let own = fired_at.map(|_| entry.arrival().unwrap_or(0));
                match this.ctx.cancelled_while_pending(this.born, own, cx) {
                    Cancellation::Cancelled => return cancelled(),
                    Cancellation::Waits => return Poll::Pending,
                    Cancellation::Proceeds => {}
                }
                match fired_at {
                    Some(_) if !this.ctx.delivered(entry, cx) => Poll::Pending,
                    Some(at) => {
                        this.ctx.advance_clock(Some(at));
                        Poll::Ready(Ok(()))
                    }
                    None => Poll::Pending,
                }
            }
            Some(other) => {
                this.ctx.mismatch(this.seq, "a timer".into(), &other);
                Poll::Pending
            }
            None => {
                match this.ctx.cancelled_while_pending(this.born, None, cx) {
                    Cancellation::Cancelled => return cancelled(),
                    Cancellation::Waits => return Poll::Pending,
                    Cancellation::Proceeds => {}
                }
                // Emitted at most once per replay: a future is polled again only if it is
                // awaited again, and a new sleep takes a new position.
                let already = this.ctx.replay.borrow().commands.iter().any(
                    |c| matches!(c, WorkflowCommand::StartTimer { seq, .. } if *seq == this.seq),
                );
                if !already {
                    this.ctx.emit(WorkflowCommand::StartTimer {
                        seq: this.seq,
                        duration_ms: this.duration.as_millis() as u64,
                    });
                }
                Poll::Pending
            }
        }
    }
}

type BoxedRun = Pin<Box<dyn Future<Output = Result<Value, WorkflowError>>>>;

/// A registered workflow with its types erased to JSON.
pub(crate) type WorkflowFn = Arc<dyn Fn(WorkflowContext, Value) -> BoxedRun + Send + Sync>;

/// Wraps a typed workflow function.
pub(crate) fn erase<F, Fut, I, O>(f: F) -> WorkflowFn
where
    F: Fn(WorkflowContext, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, WorkflowError>> + 'static,
    I: DeserializeOwned + 'static,
    O: Serialize + 'static,
{
    Arc::new(move |ctx: WorkflowContext, input: Value| -> BoxedRun {
        match serde_json::from_value::<I>(input) {
            Err(e) => {
                let error = WorkflowError::with_code(
                    "invalid_input",
                    format!("the job's input does not match the workflow's input type: {e}"),
                );
                Box::pin(async move { Err(error) })
            }
            Ok(input) => {
                let running = f(ctx, input);
                Box::pin(async move {
                    let output = running.await?;
                    serde_json::to_value(output)
                        .map_err(|e| WorkflowError::with_code("invalid_output", e.to_string()))
                })
            }
        }
    })
}

/// Replays a workflow once against its task's journal and returns the commands.
pub(crate) fn replay(workflow: &WorkflowFn, task: &WorkflowTask) -> Vec<WorkflowCommand> {
    let state = Rc::new(RefCell::new(Replay {
        journal: task.journal.iter().map(|e| (e.seq(), e.clone())).collect(),
        next_seq: 0,
        commands: Vec::new(),
        nondeterminism: None,
        delivered_up_to: 0,
        undelivered: Vec::new(),
        now: task.created_at,
        job_id: task.job_id,
        idempotency_key: task.idempotency_key.clone(),
        cancel: task.cancel,
        compensation_ms: task.compensation_ms.unwrap_or(0),
    }));
    let ctx = WorkflowContext {
        replay: state.clone(),
    };
    // The places in the arrival order of the recorded outcomes, in order.
    let mut arrivals: Vec<i64> = task
        .journal
        .iter()
        .filter_map(JournalEntry::arrival)
        .chain(task.cancel.map(|c| c.arrival))
        .collect();
    arrivals.sort_unstable();
    arrivals.dedup();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut running = workflow(ctx, task.input.clone());
        let mut cx = Context::from_waker(Waker::noop());
        // Every step resolves from the journal or not at all: a poll runs the workflow as
        // far as the outcomes delivered so far allow. Then the next outcome to have
        // arrived is delivered, and the futures waiting on one are woken and polled.
        let mut polled = running.as_mut().poll(&mut cx);
        for arrival in arrivals {
            if polled.is_ready() || state.borrow().nondeterminism.is_some() {
                break;
            }
            let waiting = {
                let mut replay = state.borrow_mut();
                replay.delivered_up_to = arrival;
                std::mem::take(&mut replay.undelivered)
            };
            waiting.into_iter().for_each(Waker::wake);
            polled = running.as_mut().poll(&mut cx);
        }
        polled
    }));
    let replay = state.borrow();
    if let Some(message) = &replay.nondeterminism {
        return vec![WorkflowCommand::FailTask {
            error: ErrorInfo::new("nondeterminism", message.clone()),
        }];
    }
    let mut commands = replay.commands.clone();
    // The bound the code declared last, if the engine does not have it yet: first, so that
    // it is recorded before anything the task's other commands start.
    if replay.compensation_ms != task.compensation_ms.unwrap_or(0) {
        commands.insert(
            0,
            WorkflowCommand::DeclareCompensation {
                within_ms: replay.compensation_ms,
            },
        );
    }
    match outcome {
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            return vec![WorkflowCommand::FailTask {
                error: ErrorInfo::new("workflow_panicked", message),
            }];
        }
        Ok(Poll::Ready(Ok(result))) => commands.push(WorkflowCommand::CompleteJob { result }),
        Ok(Poll::Ready(Err(error))) => commands.push(WorkflowCommand::FailJob {
            error: ErrorInfo::new(&error.code, error.message),
        }),
        Ok(Poll::Pending) => {}
    }
    commands
}
