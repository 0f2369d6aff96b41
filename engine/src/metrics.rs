//! Prometheus metrics (`GET /metrics`). Counters and histograms count what this process
//! did; gauges are read from the database at scrape time, so they are the same on every
//! engine, but for the process's own (runtime threads, waiting long-polls). Every name
//! starts with `onceflow_`; `docs/operations.md` lists them with suggested alerts.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::model::event;

/// The metrics of one engine process.
pub struct Metrics {
    registry: Registry,
    jobs_created: IntCounter,
    jobs_replayed: IntCounter,
    idempotency_conflicts: IntCounter,
    repeats_waited: IntCounter,
    jobs_pruned: IntCounter,
    attempts_finished: IntCounterVec,
    race_lost: IntCounter,
    heartbeat_lost: IntCounter,
    failovers: IntCounter,
    failovers_skipped: IntCounter,
    events: IntCounterVec,
    schedule_ticks: IntCounterVec,
    pass_item_failures: IntCounterVec,
    /// Gauges set at scrape time from the database.
    live_attempts: IntGaugeVec,
    blocked_activities: IntGauge,
    oldest_unknown_age: IntGauge,
    /// The async runtime's threads, set at scrape time.
    runtime_threads: IntGauge,
    /// Long-polls of this process waiting for work now.
    long_polls_waiting: IntGauge,
    pub(crate) submit_seconds: Histogram,
    pub(crate) schedule_to_start_seconds: Histogram,
    pub(crate) attempt_seconds: Histogram,
    /// Items per flush of the natural batchers, by kind (`tokens`, `submissions`,
    /// `replays`, `completions`).
    pub(crate) batch_items: HistogramVec,
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).unwrap_or_else(|e| panic!("metric {name}: {e}"));
    registry
        .register(Box::new(c.clone()))
        .unwrap_or_else(|e| panic!("register {name}: {e}"));
    c
}

fn histogram(registry: &Registry, name: &str, help: &str) -> Histogram {
    let buckets = vec![
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        300.0,
    ];
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .unwrap_or_else(|e| panic!("metric {name}: {e}"));
    registry
        .register(Box::new(h.clone()))
        .unwrap_or_else(|e| panic!("register {name}: {e}"));
    h
}

impl Default for Metrics {
    fn default() -> Self {
        // Names and labels are constants, so building them cannot fail at run time.
        let registry = Registry::new();
        let attempts_finished = IntCounterVec::new(
            Opts::new(
                "onceflow_attempts_finished_total",
                "Attempts that reached a final status, by status.",
            ),
            &["status"],
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        let events = IntCounterVec::new(
            Opts::new("onceflow_events_total", "Job events written, by type."),
            &["type"],
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        let live_attempts = IntGaugeVec::new(
            Opts::new(
                "onceflow_live_attempts",
                "Live attempts in the database, by status.",
            ),
            &["status"],
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        let blocked_activities = IntGauge::new(
            "onceflow_blocked_activities",
            "Activities blocked by an unknown attempt.",
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        let oldest_unknown_age = IntGauge::new(
            "onceflow_oldest_unknown_attempt_age_seconds",
            "Age of the oldest unknown attempt (0 when none).",
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        let schedule_ticks = IntCounterVec::new(
            Opts::new("onceflow_schedule_ticks_total", "Schedule ticks this process handled, by outcome: fired, skipped_overlap, skipped_too_old."),
            &["outcome"],
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        let pass_item_failures = IntCounterVec::new(
            Opts::new("onceflow_pass_item_failures_total", "Items of a background pass (a schedule of the scheduler, an attempt of the reaper) that failed in a transaction of their own and were skipped until the next pass, by pass: scheduler, reaper."),
            &["pass"],
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        for pass in ["scheduler", "reaper"] {
            // Both series exist from the start, so that an alert on their increase sees the first failure.
            pass_item_failures.with_label_values(&[pass]);
        }
        let batch_items = HistogramVec::new(
            HistogramOpts::new("onceflow_batch_items", "Calls answered by one flush of a natural batch (tokens, submissions, replays, completions).")
                .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]),
            &["kind"],
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        registry
            .register(Box::new(batch_items.clone()))
            .unwrap_or_else(|e| panic!("register: {e}"));
        for c in [
            &attempts_finished,
            &events,
            &schedule_ticks,
            &pass_item_failures,
        ] {
            registry
                .register(Box::new(c.clone()))
                .unwrap_or_else(|e| panic!("register: {e}"));
        }
        registry
            .register(Box::new(live_attempts.clone()))
            .unwrap_or_else(|e| panic!("register: {e}"));
        for g in [&blocked_activities, &oldest_unknown_age] {
            registry
                .register(Box::new(g.clone()))
                .unwrap_or_else(|e| panic!("register: {e}"));
        }
        let runtime_threads = IntGauge::new(
            "onceflow_runtime_threads",
            "Threads of this process's async runtime (`--threads`).",
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        let long_polls_waiting = IntGauge::new(
            "onceflow_long_polls_waiting",
            "Long-polls of this process waiting for work now (their claim found none).",
        )
        .unwrap_or_else(|e| panic!("metric: {e}"));
        for g in [&runtime_threads, &long_polls_waiting] {
            registry
                .register(Box::new(g.clone()))
                .unwrap_or_else(|e| panic!("register: {e}"));
        }
        Metrics {
            jobs_created: counter(&registry, "onceflow_jobs_created_total", "Jobs created by a submission."),
            jobs_replayed: counter(&registry, "onceflow_jobs_replayed_total", "Submissions answered with an existing job (same key, same request)."),
            idempotency_conflicts: counter(&registry, "onceflow_idempotency_conflicts_total", "Submissions refused: the key was used for a different request."),
            repeats_waited: counter(&registry, "onceflow_submission_repeats_waited_total", "Submissions that waited for the first submission of their key, in flight on the same engine, and were judged as replays without a place in a submission statement."),
            jobs_pruned: counter(&registry, "onceflow_jobs_pruned_total", "Finished jobs deleted by retention (with their activities, attempts, events and timers)."),
            race_lost: counter(&registry, "onceflow_race_lost_total", "Results discarded because another attempt had won (or the job was closed)."),
            heartbeat_lost: counter(&registry, "onceflow_heartbeat_lost_total", "Started attempts whose lease expired (now unknown)."),
            failovers: counter(&registry, "onceflow_failovers_total", "Automatic moves to the next certified provider."),
            failovers_skipped: counter(&registry, "onceflow_failovers_skipped_total", "Providers passed over for lack of a passing certification."),
            submit_seconds: histogram(&registry, "onceflow_submit_seconds", "Time to take a submission (dedup insert included)."),
            schedule_to_start_seconds: histogram(&registry, "onceflow_schedule_to_start_seconds", "From an attempt becoming available to a worker starting it."),
            attempt_seconds: histogram(&registry, "onceflow_attempt_seconds", "From an attempt starting to its result or error."),
            attempts_finished,
            batch_items,
            events,
            schedule_ticks,
            pass_item_failures,
            live_attempts,
            blocked_activities,
            oldest_unknown_age,
            runtime_threads,
            long_polls_waiting,
            registry,
        }
    }
}

impl Metrics {
    /// Counts a submission's outcome.
    pub(crate) fn submitted(&self, replayed: bool) {
        if replayed {
            self.jobs_replayed.inc()
        } else {
            self.jobs_created.inc()
        }
    }

    /// Counts a submission that waited for the first of its key in flight.
    pub(crate) fn repeat_waited(&self) {
        self.repeats_waited.inc();
    }

    /// Counts jobs deleted by retention.
    pub(crate) fn pruned(&self, jobs: u64) {
        self.jobs_pruned.inc_by(jobs);
    }

    /// Counts a refused reuse of an idempotency key.
    pub(crate) fn conflict(&self) {
        self.idempotency_conflicts.inc();
    }

    /// Counts written events (and the named counters derived from them).
    pub(crate) fn events_written(&self, kinds: impl Iterator<Item = &'static str>) {
        for kind in kinds {
            self.events.with_label_values(&[kind]).inc();
            match kind {
                event::RACE_LOST => {
                    self.race_lost.inc();
                    self.attempts_finished.with_label_values(&["lost"]).inc();
                }
                event::ATTEMPT_HEARTBEAT_LOST => self.heartbeat_lost.inc(),
                event::FAILOVER => self.failovers.inc(),
                event::FAILOVER_SKIPPED => self.failovers_skipped.inc(),
                event::ATTEMPT_SUCCEEDED => self
                    .attempts_finished
                    .with_label_values(&["succeeded"])
                    .inc(),
                event::ATTEMPT_FAILED => {
                    self.attempts_finished.with_label_values(&["failed"]).inc()
                }
                event::ATTEMPT_INVALID => {
                    self.attempts_finished.with_label_values(&["invalid"]).inc()
                }
                event::ATTEMPT_EXPIRED => {
                    self.attempts_finished.with_label_values(&["expired"]).inc()
                }
                event::ATTEMPT_CANCELLED => self
                    .attempts_finished
                    .with_label_values(&["cancelled"])
                    .inc(),
                _ => {}
            }
        }
    }

    /// Counts the ticks of a committed scheduler pass.
    pub(crate) fn schedule_pass(&self, fired: u64, skipped_overlap: u64, skipped_too_old: u64) {
        for (outcome, n) in [
            ("fired", fired),
            ("skipped_overlap", skipped_overlap),
            ("skipped_too_old", skipped_too_old),
        ] {
            self.schedule_ticks.with_label_values(&[outcome]).inc_by(n);
        }
    }

    /// Counts an item of a background pass (`scheduler` or `reaper`) that failed on its
    /// own and was skipped until the next pass.
    pub(crate) fn pass_item_failed(&self, pass: &'static str) {
        self.pass_item_failures.with_label_values(&[pass]).inc();
    }

    /// Counts a long-poll as waiting for work until the answer is dropped.
    pub(crate) fn long_poll_waiting(&self) -> LongPollWaiting {
        self.long_polls_waiting.inc();
        LongPollWaiting(self.long_polls_waiting.clone())
    }

    /// Sets the gauges read from the database.
    pub(crate) fn set_gauges(&self, live: &[(String, i64)], oldest_unknown_age_s: i64) {
        for status in ["scheduled", "started", "unknown"] {
            let n = live
                .iter()
                .find(|(s, _)| s == status)
                .map_or(0, |(_, n)| *n);
            self.live_attempts.with_label_values(&[status]).set(n);
            if status == "unknown" {
                // An activity is blocked exactly while its live attempt is unknown.
                self.blocked_activities.set(n);
            }
        }
        self.oldest_unknown_age.set(oldest_unknown_age_s);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            self.runtime_threads
                .set(i64::try_from(runtime.metrics().num_workers()).unwrap_or(i64::MAX));
        }
        let mut buffer = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}

/// A long-poll counted in `onceflow_long_polls_waiting` while this lives.
pub(crate) struct LongPollWaiting(IntGauge);

impl Drop for LongPollWaiting {
    fn drop(&mut self) {
        self.0.dec();
    }
}
