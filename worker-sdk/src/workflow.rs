//! Workflows as Rust code: an `async fn(WorkflowContext, In) -> Result<Out, WorkflowError>`
//! replayed against the job's journal. Each call to [`WorkflowContext::activity`],
//! [`WorkflowContext::sleep`], [`WorkflowContext::wait_signal`] or
//! [`WorkflowContext::child_workflow`] takes the next position; a position already in the
//! journal returns its recorded outcome, the first one that is not becomes a command and
//! the replay stops there. Recorded outcomes are delivered in the order they arrived (the
//! journal's `arrival`), one at a time, so a race (`select!`) takes the branch of the
//! outcome that arrived first on every replay. Signals are delivered at their place in
//! the same order, and a wait takes the one its history gave it. Replaying is side-effect free, so it can
//! run any number of times, on any worker.
//!
//! Versioning: [`WorkflowContext::patched`] lets changed code keep the jobs that ran the
//! old code on their recorded path (Temporal's `patched`), and
//! [`WorkflowContext::deprecate_patch`] retires a patch; patch markers take no position.
//!
//! Cancellation: a workflow that declared a compensation bound
//! ([`WorkflowContext::compensate_within`]) learns of its job's cancel. The cancel is
//! delivered at its place in the arrival order; every step created before then whose own
//! outcome was not delivered before it resolves to a `job_cancelled` error, and steps
//! created after it run normally (the compensation).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, Utc};
use onceflow_protocol::model::{
    ActivityOptions, ActivityStatus, ErrorInfo, Failover, JobStatus, RetryPolicy,
};
use onceflow_protocol::workflow::{
    CancelRequest, JournalEntry, RecordedSignal, WorkflowCommand, WorkflowTask,
};
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

impl Replay {
    /// Whether the history recorded a step at or after the current position: the job ran
    /// past this point of the code already.
    fn inside_history(&self) -> bool {
        self.last_recorded.is_some_and(|last| last >= self.next_seq)
    }
}

struct Replay {
    journal: HashMap<i32, JournalEntry>,
    /// The job's signals in the order they were recorded.
    signals: Vec<RecordedSignal>,
    /// The signals a wait took during this replay.
    taken: HashSet<i64>,
    next_seq: i32,
    commands: Vec<WorkflowCommand>,
    nondeterminism: Option<String>,
    /// Outcomes that arrived up to this place in the arrival order are delivered;
    /// later ones still look pending.
    delivered_up_to: i64,
    /// Futures waiting on an outcome that is recorded but not delivered yet.
    undelivered: Vec<Waker>,
    /// Futures waiting on history this replay has not received (a step not recorded yet,
    /// or not finished): woken when a later task of a kept run brings more.
    parked: Vec<Waker>,
    /// The positions whose step this run asked the engine for (a command).
    started: HashSet<i32>,
    /// The input the workflow continues as new with, once it asked to
    /// ([`WorkflowContext::continue_as_new`]).
    continued: Option<Value>,
    now: DateTime<Utc>,
    job_id: uuid::Uuid,
    idempotency_key: String,
    /// The owner's cancel, if the engine recorded one.
    cancel: Option<CancelRequest>,
    /// The compensation bound the code declared last in this replay, in ms (`0`: none);
    /// starts as the one the engine recorded.
    compensation_ms: u64,
    /// The patch markers the job recorded.
    patches: HashSet<String>,
    /// What `patched` answered for each id in this replay: one answer per id and replay.
    patch_answers: HashMap<String, bool>,
    /// The highest position the history recorded a step at (a journal entry, or a wait
    /// that took a signal); `None` for a history without steps.
    last_recorded: Option<i32>,
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

    /// Starts workflow `name` as a child job with `input`; await it for the child's
    /// result. The child is a workflow job of the same owner with idempotency key
    /// `{parent_job_id}:child:{seq}`, so however often this workflow is replayed it is
    /// started once. It runs on this workflow's task queue unless
    /// [`ChildWorkflowCall::task_queue`] says otherwise. The call takes the next position,
    /// like an activity. Its output is the child's result, or a [`WorkflowError`] with the
    /// child's error code and message when it failed, and code `job_cancelled` when it
    /// was cancelled (cancelling this workflow's job cancels its open children too).
    pub fn child_workflow<O: DeserializeOwned>(
        &self,
        name: &str,
        input: impl Serialize,
    ) -> ChildWorkflowCall<O> {
        ChildWorkflowCall {
            ctx: self.clone(),
            seq: self.next_seq(),
            workflow: name.to_owned(),
            input: serde_json::to_value(input).map_err(|e| e.to_string()),
            task_queue: None,
            born: self.born(),
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

    /// Waits for the next signal named `name` (`POST /v1/jobs/{id}/signals`) and reads its
    /// payload as `T`. Signals are taken in the order they were recorded, each by one
    /// wait, once; one sent before the workflow waits is kept until it does. Takes the
    /// next position, like an activity. A payload that does not read as `T` is an error
    /// with code `invalid_signal` (the signal is taken all the same).
    pub fn wait_signal<T: DeserializeOwned>(&self, name: &str) -> SignalWait<T> {
        SignalWait {
            ctx: self.clone(),
            seq: self.next_seq(),
            name: name.to_owned(),
            born: self.born(),
            _payload: PhantomData,
        }
    }

    /// [`WorkflowContext::wait_signal`] against a durable timer: `Some(payload)` when the
    /// signal arrives first, `None` when `timeout` passes first (the signal is then left
    /// for the next wait). Which came first is decided once, by the order the engine
    /// recorded them, so every replay takes the same branch. Takes two positions.
    pub fn wait_signal_timeout<T: DeserializeOwned>(
        &self,
        name: &str,
        timeout: Duration,
    ) -> SignalWaitWithTimeout<T> {
        let wait = self.wait_signal(name);
        let timer = self.sleep(timeout);
        SignalWaitWithTimeout { wait, timer }
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

    /// Workflow versioning (Temporal's `patched`): whether this job runs the code of patch
    /// `id`. Branch on it to change a workflow's code without breaking the jobs that are
    /// already running it: `if ctx.patched("id") { new } else { old }`.
    ///
    /// - A job that reaches this call at the frontier of its history (nothing recorded at
    ///   or after the current position: a new job, or one whose history ends before this
    ///   point) gets `true`, and the job records a marker for `id` with this workflow task.
    /// - A job whose history recorded the marker gets `true` on every replay.
    /// - A job whose history went past this point without the marker (it ran the code
    ///   before the patch) gets `false`, so it carries on along its recorded path; so does
    ///   every later replay of it, since its history only grows.
    ///
    /// The answer for an `id` is given once per replay: later calls with the same `id`
    /// return the first answer. A marker takes no position, so adding, keeping or removing
    /// a patch never shifts the positions of the steps around it. An id is 1 to 200
    /// characters (another parks the job).
    pub fn patched(&self, id: &str) -> bool {
        let mut replay = self.replay.borrow_mut();
        if let Some(answer) = replay.patch_answers.get(id) {
            return *answer;
        }
        let answer = if replay.patches.contains(id) {
            true
        } else if replay.inside_history() {
            false
        } else {
            replay.commands.push(WorkflowCommand::RecordPatch {
                id: id.to_owned(),
                deprecated: false,
            });
            true
        };
        replay.patch_answers.insert(id.to_owned(), answer);
        answer
    }

    /// Retires patch `id` (Temporal's `deprecatePatch`), once no job that ran the code
    /// before the patch is left: keep only the patched branch and call this where
    /// `patched(id)` was. It never branches; a job reaching it at the frontier of its
    /// history records the marker, as `patched` would, so workers still running code
    /// with `patched(id)` (during a rolling deploy, or after a rollback) take the new
    /// branch for it. Histories that recorded the marker replay unchanged: the marker
    /// takes no position. Remove the call once no job that may still replay through it
    /// is left running code with `patched(id)`.
    pub fn deprecate_patch(&self, id: &str) {
        let mut replay = self.replay.borrow_mut();
        if replay.patch_answers.contains_key(id)
            || replay.patches.contains(id)
            || replay.inside_history()
        {
            return;
        }
        replay.commands.push(WorkflowCommand::RecordPatch {
            id: id.to_owned(),
            deprecated: true,
        });
        replay.patch_answers.insert(id.to_owned(), true);
    }

    /// Continues the workflow as new: `return ctx.continue_as_new(&next_input);` ends this
    /// run and starts the workflow again under the same job, with `input` and an empty
    /// history. The job keeps its id, its key and its signals (those not taken yet are
    /// delivered to the new run); its status stays `running`. Use it to keep a workflow
    /// that runs for ever (a loop, an entity fed by signals) to a bounded history: each
    /// run's tasks cost what that run recorded, not what the job did since it began.
    ///
    /// What the ending run left open is left behind: its activities are closed (code
    /// `continued_as_new`), its unfired timers dropped, and children it started run on
    /// without the new run seeing their outcome. A job whose cancel was requested ends
    /// `cancelled` instead of continuing.
    ///
    /// The returned error is the signal to the engine: return it as it is. An `input`
    /// that does not serialize is an error with code `invalid_input`.
    pub fn continue_as_new<O>(&self, input: impl Serialize) -> Result<O, WorkflowError> {
        match serde_json::to_value(input) {
            Ok(input) => {
                self.replay.borrow_mut().continued = Some(input);
                Err(WorkflowError::with_code(
                    CONTINUED_AS_NEW,
                    "the workflow continued as new",
                ))
            }
            Err(e) => Err(WorkflowError::with_code(
                "invalid_input",
                format!("the input to continue as new with does not serialize: {e}"),
            )),
        }
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
            JournalEntry::Activity { name, input, .. } => {
                format!("activity `{name}` with input {}", shown(input))
            }
            JournalEntry::Timer { .. } => "a timer".to_owned(),
            JournalEntry::Child {
                workflow, input, ..
            } => {
                format!("child workflow `{workflow}` with input {}", shown(input))
            }
        };
        self.mismatch_with(seq, asked, was);
    }

    fn mismatch_with(&self, seq: i32, asked: String, was: String) {
        let mut replay = self.replay.borrow_mut();
        replay.nondeterminism.get_or_insert(format!(
            "at position {seq} the workflow now asks for {asked}, but its history recorded {was} \
             (changed workflow code must branch with `ctx.patched` to keep jobs already past this \
             point on their recorded path)"
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

    /// The name of the signal the history gave the wait at `seq`, if it did.
    fn signal_taken_at(&self, seq: i32) -> Option<String> {
        let replay = self.replay.borrow();
        replay
            .signals
            .iter()
            .find(|s| s.consumed_by == Some(seq))
            .map(|s| s.name.clone())
    }

    /// The place in the arrival order of the signal the wait at `seq` would take now: the
    /// one its history gave it, else the first delivered untaken one of `name`.
    fn signal_arrival_for(&self, seq: i32, name: &str) -> Option<i64> {
        let replay = self.replay.borrow();
        if let Some(recorded) = replay.signals.iter().find(|s| s.consumed_by == Some(seq)) {
            return Some(recorded.arrival.unwrap_or(0));
        }
        replay
            .signals
            .iter()
            .find(|s| {
                s.consumed_by.is_none()
                    && s.name == name
                    && !replay.taken.contains(&s.seq)
                    && s.arrival.unwrap_or(0) <= replay.delivered_up_to
            })
            .map(|s| s.arrival.unwrap_or(0))
    }

    /// The signal for the wait at `seq`: the one its history gave it, else the first
    /// delivered one of `name` that no wait has taken (recorded as taken by a new
    /// command). While there is none, `cx` is woken when the replay moves on.
    fn take_signal(&self, seq: i32, name: &str, cx: &Context<'_>) -> Taking {
        let mut guard = self.replay.borrow_mut();
        let replay = &mut *guard;
        let up_to = replay.delivered_up_to;
        if let Some(recorded) = replay.signals.iter().find(|s| s.consumed_by == Some(seq)) {
            if recorded.name != name {
                let was = format!("a wait that took signal `{}`", recorded.name);
                drop(guard);
                self.mismatch_with(seq, format!("signal `{name}`"), was);
                return Taking::Mismatch;
            }
            if recorded.arrival.unwrap_or(0) > up_to {
                replay.undelivered.push(cx.waker().clone());
                return Taking::Waiting;
            }
            replay.taken.insert(recorded.seq);
            return Taking::Signal(recorded.clone());
        }
        let next = replay
            .signals
            .iter()
            .find(|s| {
                s.consumed_by.is_none()
                    && s.name == name
                    && !replay.taken.contains(&s.seq)
                    && s.arrival.unwrap_or(0) <= up_to
            })
            .cloned();
        match next {
            Some(signal) => {
                replay.taken.insert(signal.seq);
                replay.commands.push(WorkflowCommand::ConsumeSignal {
                    seq,
                    signal_seq: signal.seq,
                });
                Taking::Signal(signal)
            }
            None => {
                replay.undelivered.push(cx.waker().clone());
                Taking::Waiting
            }
        }
    }

    fn emit(&self, command: WorkflowCommand) {
        self.replay.borrow_mut().commands.push(command);
    }

    /// Pending until the run receives more history: `cx` is woken when a later task of a
    /// kept run (sticky execution) brings it.
    fn park<T>(&self, cx: &Context<'_>) -> Poll<T> {
        self.replay.borrow_mut().parked.push(cx.waker().clone());
        Poll::Pending
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
                    _ => ctx.park(cx),
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
                    format!("activity `{}` with input {}", call.name, shown(&input)),
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
                ctx.mismatch(
                    call.seq,
                    format!("activity `{}` with input {}", call.name, shown(&input)),
                    &other,
                );
                Poll::Pending
            }
            None => {
                if let Some(signal) = ctx.signal_taken_at(call.seq) {
                    ctx.mismatch_with(
                        call.seq,
                        format!("activity `{}`", call.name),
                        format!("a wait that took signal `{signal}`"),
                    );
                    return Poll::Pending;
                }
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
                ctx.park(cx)
            }
        }
    }
}

/// A child workflow call from a workflow ([`WorkflowContext::child_workflow`]); set its
/// task queue, then `.await` it.
pub struct ChildWorkflowCall<O> {
    ctx: WorkflowContext,
    seq: i32,
    workflow: String,
    input: Result<Value, String>,
    task_queue: Option<String>,
    born: i64,
    _output: PhantomData<fn() -> O>,
}

impl<O: DeserializeOwned> ChildWorkflowCall<O> {
    /// The task queue the child runs on (this workflow's by default).
    pub fn task_queue(mut self, task_queue: impl Into<String>) -> Self {
        self.task_queue = Some(task_queue.into());
        self
    }
}

impl<O: DeserializeOwned> IntoFuture for ChildWorkflowCall<O> {
    type Output = Result<O, WorkflowError>;
    type IntoFuture = ChildWorkflowFuture<O>;

    fn into_future(self) -> ChildWorkflowFuture<O> {
        ChildWorkflowFuture {
            call: self,
            emitted: false,
        }
    }
}

/// The future of a [`ChildWorkflowCall`]: the child's result, or its error (`job_cancelled`
/// when it was cancelled).
pub struct ChildWorkflowFuture<O> {
    call: ChildWorkflowCall<O>,
    emitted: bool,
}

impl<O: DeserializeOwned> Future for ChildWorkflowFuture<O> {
    type Output = Result<O, WorkflowError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let call = &this.call;
        let ctx = &call.ctx;
        let input = match &call.input {
            Ok(v) => v.clone(),
            Err(e) => {
                return Poll::Ready(Err(WorkflowError::with_code(
                    "invalid_input",
                    format!("child workflow `{}`: {e}", call.workflow),
                )));
            }
        };
        let cancelled = || {
            Poll::Ready(Err(WorkflowError::with_code(
                CANCELLED,
                format!(
                    "the job was cancelled while child workflow `{}` was pending",
                    call.workflow
                ),
            )))
        };
        let recorded = ctx.replay.borrow().journal.get(&call.seq).cloned();
        let Some(entry) = recorded else {
            match ctx.cancelled_while_pending(call.born, None, cx) {
                Cancellation::Cancelled => return cancelled(),
                Cancellation::Waits => return Poll::Pending,
                Cancellation::Proceeds => {}
            }
            if let Some(signal) = ctx.signal_taken_at(call.seq) {
                ctx.mismatch_with(
                    call.seq,
                    format!("child workflow `{}`", call.workflow),
                    format!("a wait that took signal `{signal}`"),
                );
                return Poll::Pending;
            }
            if !this.emitted {
                this.emitted = true;
                ctx.emit(WorkflowCommand::StartChild {
                    seq: call.seq,
                    workflow: call.workflow.clone(),
                    input,
                    task_queue: call.task_queue.clone(),
                });
            }
            return ctx.park(cx);
        };
        let JournalEntry::Child {
            workflow,
            input: was,
            status,
            result,
            error,
            finished_at,
            ..
        } = &entry
        else {
            ctx.mismatch(
                call.seq,
                format!(
                    "child workflow `{}` with input {}",
                    call.workflow,
                    shown(&input)
                ),
                &entry,
            );
            return Poll::Pending;
        };
        if *workflow != call.workflow || *was != input {
            ctx.mismatch(
                call.seq,
                format!(
                    "child workflow `{}` with input {}",
                    call.workflow,
                    shown(&input)
                ),
                &entry,
            );
            return Poll::Pending;
        }
        let own = status.is_closed().then(|| entry.arrival().unwrap_or(0));
        match ctx.cancelled_while_pending(call.born, own, cx) {
            Cancellation::Cancelled => return cancelled(),
            Cancellation::Waits => return Poll::Pending,
            Cancellation::Proceeds => {}
        }
        // Its outcome arrived after one not yet delivered: pending for now.
        if !ctx.delivered(&entry, cx) {
            return Poll::Pending;
        }
        let failed = |code: &str, default: &str| {
            let error = error
                .clone()
                .unwrap_or_else(|| ErrorInfo::new(code, default));
            WorkflowError {
                code: if code == "job_cancelled" {
                    code.to_owned()
                } else {
                    error.code
                },
                message: format!("child workflow `{}`: {}", call.workflow, error.message),
            }
        };
        match status {
            JobStatus::Succeeded => {
                ctx.advance_clock(*finished_at);
                let value = result.clone().unwrap_or(Value::Null);
                Poll::Ready(serde_json::from_value(value).map_err(|e| {
                    WorkflowError::with_code(
                        "invalid_result",
                        format!(
                            "child workflow `{}`: the result does not read as the expected type: {e}",
                            call.workflow
                        ),
                    )
                }))
            }
            JobStatus::Failed => {
                ctx.advance_clock(*finished_at);
                Poll::Ready(Err(failed("child_failed", "the child workflow failed")))
            }
            JobStatus::Cancelled => {
                ctx.advance_clock(*finished_at);
                Poll::Ready(Err(failed(
                    "job_cancelled",
                    "the child workflow was cancelled",
                )))
            }
            JobStatus::Queued | JobStatus::Running => ctx.park(cx),
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
                    None => this.ctx.park(cx),
                }
            }
            Some(other) => {
                this.ctx.mismatch(this.seq, "a timer".into(), &other);
                Poll::Pending
            }
            None => {
                if let Some(signal) = this.ctx.signal_taken_at(this.seq) {
                    this.ctx.mismatch_with(
                        this.seq,
                        "a timer".into(),
                        format!("a wait that took signal `{signal}`"),
                    );
                    return Poll::Pending;
                }
                match this.ctx.cancelled_while_pending(this.born, None, cx) {
                    Cancellation::Cancelled => return cancelled(),
                    Cancellation::Waits => return Poll::Pending,
                    Cancellation::Proceeds => {}
                }
                // Asked for once per run, however often the future is polled.
                let first = this.ctx.replay.borrow_mut().started.insert(this.seq);
                if first {
                    this.ctx.emit(WorkflowCommand::StartTimer {
                        seq: this.seq,
                        duration_ms: this.duration.as_millis() as u64,
                    });
                }
                this.ctx.park(cx)
            }
        }
    }
}

enum Taking {
    Signal(RecordedSignal),
    Waiting,
    Mismatch,
}

/// The future of [`WorkflowContext::wait_signal`]: the payload of the signal it takes.
pub struct SignalWait<T> {
    ctx: WorkflowContext,
    seq: i32,
    name: String,
    born: i64,
    _payload: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Future for SignalWait<T> {
    type Output = Result<T, WorkflowError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let recorded = this.ctx.replay.borrow().journal.get(&this.seq).cloned();
        if let Some(other) = recorded {
            this.ctx
                .mismatch(this.seq, format!("signal `{}`", this.name), &other);
            return Poll::Pending;
        }
        let own = this.ctx.signal_arrival_for(this.seq, &this.name);
        match this.ctx.cancelled_while_pending(this.born, own, cx) {
            Cancellation::Cancelled => {
                return Poll::Ready(Err(WorkflowError::with_code(
                    CANCELLED,
                    format!(
                        "the job was cancelled while waiting for signal `{}`",
                        this.name
                    ),
                )))
            }
            Cancellation::Waits => return Poll::Pending,
            Cancellation::Proceeds => {}
        }
        match this.ctx.take_signal(this.seq, &this.name, cx) {
            Taking::Signal(signal) => {
                this.ctx.advance_clock(Some(signal.received_at));
                Poll::Ready(serde_json::from_value(signal.payload).map_err(|e| {
                    WorkflowError::with_code(
                        "invalid_signal",
                        format!(
                            "signal `{}` ({}) does not read as the expected type: {e}",
                            this.name, signal.seq
                        ),
                    )
                }))
            }
            Taking::Waiting | Taking::Mismatch => Poll::Pending,
        }
    }
}

/// The future of [`WorkflowContext::wait_signal_timeout`]: `Some(payload)`, or `None`
/// when the timer fired first.
pub struct SignalWaitWithTimeout<T> {
    wait: SignalWait<T>,
    timer: Sleep,
}

impl<T: DeserializeOwned> Future for SignalWaitWithTimeout<T> {
    type Output = Result<Option<T>, WorkflowError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Outcomes are delivered one at a time in the order they arrived: at most one of
        // the two is ready at a poll, unless the signal was there before the wait began.
        if let Poll::Ready(taken) = Pin::new(&mut this.wait).poll(cx) {
            return Poll::Ready(taken.map(Some));
        }
        match Pin::new(&mut this.timer).poll(cx) {
            Poll::Ready(fired) => Poll::Ready(fired.map(|()| None)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A JSON value as an error message shows it: compact, cut after 120 characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
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

/// A workflow run being replayed: its state and its suspended code. A worker may keep it
/// between tasks (sticky execution) and hand it only the new part of the history.
pub(crate) struct Run {
    state: Rc<RefCell<Replay>>,
    running: BoxedRun,
    /// Places in the arrival order received and not delivered yet, in order.
    arrivals: BTreeSet<i64>,
    /// The highest place in the arrival order received: the run has seen every outcome
    /// up to it.
    horizon: i64,
    /// The workflow.
    workflow: String,
    /// The job version the next task reads if this task's commands apply.
    next_version: i64,
    /// The run ended (returned, continued as new, panicked or diverged): not kept.
    ended: bool,
    /// The workflow panicked as it was called.
    panicked: Option<String>,
}

/// What a task's replay decided.
pub(crate) struct Decided {
    /// The commands, in order.
    pub commands: Vec<WorkflowCommand>,
    /// Whether the run goes on (it may be kept for the job's next task).
    pub goes_on: bool,
    /// The highest place in the arrival order the run has seen.
    pub horizon: i64,
}

impl Run {
    /// Starts replaying `task`'s run from its first position (the task must carry its
    /// whole history).
    pub(crate) fn start(workflow: &WorkflowFn, task: &WorkflowTask) -> Run {
        let state = Rc::new(RefCell::new(Replay {
            journal: HashMap::new(),
            signals: Vec::new(),
            taken: HashSet::new(),
            next_seq: task.first_seq,
            commands: Vec::new(),
            nondeterminism: None,
            delivered_up_to: 0,
            undelivered: Vec::new(),
            parked: Vec::new(),
            started: HashSet::new(),
            continued: None,
            now: task.created_at,
            job_id: task.job_id,
            idempotency_key: task.idempotency_key.clone(),
            cancel: None,
            compensation_ms: task.compensation_ms.unwrap_or(0),
            patches: HashSet::new(),
            patch_answers: HashMap::new(),
            last_recorded: None,
        }));
        let ctx = WorkflowContext {
            replay: state.clone(),
        };
        let created = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            workflow(ctx, task.input.clone())
        }));
        let (running, panicked): (BoxedRun, Option<String>) = match created {
            Ok(running) => (running, None),
            Err(panic) => (Box::pin(std::future::pending()), Some(panic_message(panic))),
        };
        Run {
            state,
            running,
            arrivals: BTreeSet::new(),
            horizon: 0,
            workflow: task.workflow.clone(),
            next_version: task.read_version,
            ended: false,
            panicked,
        }
    }

    /// Whether this kept run can take `task`, which carries only what arrived after
    /// `since` (sticky execution): same workflow, same place in the history, and the job
    /// has not moved since this run's last task.
    pub(crate) fn continues(&self, task: &WorkflowTask, since: i64) -> bool {
        !self.ended
            && self.workflow == task.workflow
            && self.horizon == since
            && self.next_version == task.read_version
    }

    /// Takes what `task` brings (all of the history, or its new part for a kept run),
    /// runs the workflow as far as it allows, and returns the commands.
    pub(crate) fn advance(&mut self, task: &WorkflowTask) -> Decided {
        if let Some(message) = self.panicked.clone() {
            self.ended = true;
            return self.decided(vec![WorkflowCommand::FailTask {
                error: ErrorInfo::new(PANICKED, message),
            }]);
        }
        self.absorb(task);
        let state = self.state.clone();
        let running = &mut self.running;
        let arrivals = &mut self.arrivals;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut cx = Context::from_waker(Waker::noop());
            // Every step resolves from the history or not at all: a poll runs the
            // workflow as far as the outcomes delivered so far allow. Then the next
            // outcome to have arrived is delivered, and the futures waiting on one are
            // woken and polled.
            let mut polled = running.as_mut().poll(&mut cx);
            while let Some(arrival) = arrivals.first().copied() {
                if polled.is_ready() || state.borrow().nondeterminism.is_some() {
                    break;
                }
                arrivals.remove(&arrival);
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
        let mut replay = self.state.borrow_mut();
        let mut commands = std::mem::take(&mut replay.commands);
        self.next_version = task.read_version + 1;
        if let Some(message) = &replay.nondeterminism {
            self.ended = true;
            return self.decided(vec![WorkflowCommand::FailTask {
                error: ErrorInfo::new("nondeterminism", message.clone()),
            }]);
        }
        // The bound the code declared last, if the engine does not have it yet: first, so
        // that it is recorded before anything the task's other commands start.
        if replay.compensation_ms != task.compensation_ms.unwrap_or(0) {
            commands.insert(
                0,
                WorkflowCommand::DeclareCompensation {
                    within_ms: replay.compensation_ms,
                },
            );
        }
        let returned = match outcome {
            Err(panic) => {
                self.ended = true;
                return self.decided(vec![WorkflowCommand::FailTask {
                    error: ErrorInfo::new(PANICKED, panic_message(panic)),
                }]);
            }
            Ok(Poll::Pending) => None,
            Ok(Poll::Ready(returned)) => Some(returned),
        };
        let returns = returned.is_some();
        match returned {
            None => {}
            Some(Err(error)) if error.code == CONTINUED_AS_NEW && replay.continued.is_some() => {
                let input = replay.continued.take().unwrap_or(Value::Null);
                // Past every position this run took (and past its first, even if it took
                // none).
                let first_seq = replay.next_seq.max(task.first_seq + 1);
                commands.push(WorkflowCommand::ContinueAsNew { input, first_seq });
            }
            Some(Ok(result)) => commands.push(WorkflowCommand::CompleteJob { result }),
            Some(Err(error)) => commands.push(WorkflowCommand::FailJob {
                error: ErrorInfo::new(&error.code, error.message),
            }),
        }
        self.ended |= returns;
        // What this task asks for is recorded once it applies: a later task of this run
        // is inside that history (as a replay of the whole of it would be).
        let asked = commands.iter().filter_map(command_position).max();
        replay.last_recorded = replay.last_recorded.max(asked);
        drop(replay);
        self.decided(commands)
    }

    fn decided(&self, commands: Vec<WorkflowCommand>) -> Decided {
        Decided {
            commands,
            goes_on: !self.ended,
            horizon: self.horizon,
        }
    }

    /// Merges what `task` brings into the run's history, and wakes the futures waiting
    /// for more of it.
    fn absorb(&mut self, task: &WorkflowTask) {
        let mut guard = self.state.borrow_mut();
        let replay = &mut *guard;
        let mut arrived = Vec::new();
        for entry in &task.journal {
            arrived.extend(entry.arrival());
            replay.last_recorded = replay.last_recorded.max(Some(entry.seq()));
            replay.journal.insert(entry.seq(), entry.clone());
        }
        for signal in &task.signals {
            arrived.extend(signal.arrival);
            replay.last_recorded = replay.last_recorded.max(signal.consumed_by);
            match replay.signals.iter_mut().find(|s| s.seq == signal.seq) {
                Some(known) => *known = signal.clone(),
                None => replay.signals.push(signal.clone()),
            }
        }
        replay.signals.sort_by_key(|s| s.seq);
        if let Some(cancel) = task.cancel {
            arrived.push(cancel.arrival);
            replay.cancel = Some(cancel);
        }
        replay.patches.extend(task.patches.iter().cloned());
        for arrival in arrived {
            self.horizon = self.horizon.max(arrival);
            // Outcomes numbered before arrivals were (0) are delivered from the start.
            if arrival > replay.delivered_up_to {
                self.arrivals.insert(arrival);
            }
        }
        let waiting: Vec<Waker> = replay
            .parked
            .drain(..)
            .chain(replay.undelivered.drain(..))
            .collect();
        drop(guard);
        waiting.into_iter().for_each(Waker::wake);
    }
}

/// The position a command takes, if it takes one.
fn command_position(command: &WorkflowCommand) -> Option<i32> {
    match command {
        WorkflowCommand::ScheduleActivity { seq, .. }
        | WorkflowCommand::StartTimer { seq, .. }
        | WorkflowCommand::ConsumeSignal { seq, .. }
        | WorkflowCommand::StartChild { seq, .. } => Some(*seq),
        _ => None,
    }
}

/// The error code of a workflow that panicked.
const PANICKED: &str = "workflow_panicked";

/// The error code [`WorkflowContext::continue_as_new`] returns with.
const CONTINUED_AS_NEW: &str = "continued_as_new";

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
