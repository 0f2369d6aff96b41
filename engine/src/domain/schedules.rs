//! Cron schedules (docs/api.md, Schedules). A schedule never invents a second exactly-once
//! mechanism: each tick is an ordinary submission whose idempotency key is
//! `schedule:{name}:{tick time}`, so invariant 1 makes a duplicate tick impossible. The
//! scheduler pass ([`Engine::run_schedules`]) takes due schedules without waiting
//! (`SKIP LOCKED`), submits their ticks and advances them under a version CAS, all in one
//! transaction: a tick's job and the schedule's move past it commit together or not at all.

use std::str::FromStr;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::submit::Created;
use super::{retry_transient, Engine};
use crate::error::EngineError;
use crate::model::{Overlap, ScheduleEvent, ScheduleView};
use crate::request::JobRequest;
use crate::store::{NewScheduleEvent, ScheduleRow, StoreTx};

pub use onceflow_protocol::api::ScheduleRequestBody;

/// How many due schedules one scheduler transaction takes at most.
const BATCH: i64 = 50;
/// How many ticks of one schedule one pass fires or skips for overlap at most; the rest
/// are taken by the next pass (a long catch-up stays a series of short transactions).
const MAX_TICKS_PER_PASS: usize = 100;
/// How many too-old ticks are counted one by one before the rest are jumped over.
const MAX_TOO_OLD_COUNTED: u64 = 100_000;
/// The default `catchup_window_s`.
pub const DEFAULT_CATCHUP_WINDOW_S: u64 = 300;
/// The longest `catchup_window_s` accepted: one year.
const MAX_CATCHUP_WINDOW_S: u64 = 366 * 24 * 3600;
/// The longest schedule name (the tick's idempotency key must stay within 255 characters).
const MAX_NAME_LEN: usize = 128;

/// Schedule event types (`ScheduleEvent::kind`).
pub mod schedule_event {
    /// The schedule was created.
    pub const CREATED: &str = "created";
    /// Its definition was replaced by a `PUT`.
    pub const REPLACED: &str = "replaced";
    /// It was paused.
    pub const PAUSED: &str = "paused";
    /// It was resumed.
    pub const RESUMED: &str = "resumed";
    /// A tick submitted its job.
    pub const FIRED: &str = "fired";
    /// A tick was skipped because the previous tick's job was still open.
    pub const SKIPPED_OVERLAP: &str = "skipped_overlap";
    /// Ticks were skipped because no engine reached them within the catch-up window.
    pub const SKIPPED_TOO_OLD: &str = "skipped_too_old";
    /// The cron expression has no tick left: the schedule is paused for good.
    pub const EXHAUSTED: &str = "exhausted";
}

/// A parsed cron expression in its time zone.
#[derive(Debug, Clone)]
pub struct CronSpec {
    schedule: cron::Schedule,
    timezone: chrono_tz::Tz,
}

impl CronSpec {
    /// Parses `expression` (6 or 7 fields with seconds; 5 fields fire at second 0) in the
    /// IANA time zone `timezone`. The error names the field and says where it fails.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, EngineError> {
        let fields = expression.split_whitespace().count();
        let full = if fields == 5 {
            format!("0 {expression}")
        } else {
            expression.to_owned()
        };
        let schedule = cron::Schedule::from_str(&full).map_err(|e| {
            EngineError::invalid_request(format!(
                "cron: `{expression}` does not parse ({e}); expected `sec min hour day-of-month month day-of-week [year]`"
            ))
        })?;
        let timezone = chrono_tz::Tz::from_str(timezone).map_err(|_| {
            EngineError::invalid_request(format!(
                "timezone: `{timezone}` is not an IANA time zone name"
            ))
        })?;
        Ok(CronSpec { schedule, timezone })
    }

    /// The first tick strictly after `t`; `None` when the expression never fires again.
    pub fn tick_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedule
            .after(&t.with_timezone(&self.timezone))
            .next()
            .map(|d| d.with_timezone(&Utc))
    }
}

/// The idempotency key of a schedule's tick: the same for every engine that fires it.
pub fn tick_key(name: &str, tick: DateTime<Utc>) -> String {
    format!(
        "schedule:{name}:{}",
        tick.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

/// The answer to a `PUT` of a schedule.
#[derive(Debug, Clone)]
pub struct SchedulePut {
    /// The schedule as it is now.
    pub schedule: ScheduleView,
    /// `true` when it did not exist before.
    pub created: bool,
}

/// What one [`Engine::run_schedules`] pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScheduleReport {
    /// Ticks that submitted their job.
    pub fired: u64,
    /// Ticks skipped because the previous job was still open.
    pub skipped_overlap: u64,
    /// Ticks skipped as older than their catch-up window.
    pub skipped_too_old: u64,
    /// Schedules that failed in a transaction of their own (a stored cron expression or
    /// job body that no longer parses, say): each was logged and counted
    /// (`onceflow_pass_item_failures_total{pass="scheduler"}`), left as it was, and is
    /// tried again at the next pass. The other schedules fired as usual.
    pub failed: u64,
}

/// A checked schedule definition.
struct Definition {
    cron: String,
    timezone: String,
    spec: CronSpec,
    job: Value,
    overlap: Overlap,
    catchup_window_s: u64,
    paused: bool,
}

fn check_name(name: &str) -> Result<(), EngineError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(EngineError::invalid_request(format!(
            "name: must be 1 to {MAX_NAME_LEN} characters of A-Z, a-z, 0-9, `-`, `_` and `.`"
        )))
    }
}

fn definition(body: &ScheduleRequestBody) -> Result<Definition, EngineError> {
    let timezone = body.timezone.clone().unwrap_or_else(|| "UTC".to_owned());
    let spec = CronSpec::parse(&body.cron, &timezone)?;
    let prefix = |e: EngineError| match e {
        EngineError::InvalidRequest(m) => EngineError::InvalidRequest(format!("job.{m}")),
        other => other,
    };
    let request = JobRequest::from_json(&body.job).map_err(prefix)?;
    request.validate().map_err(prefix)?;
    let catchup_window_s = body.catchup_window_s.unwrap_or(DEFAULT_CATCHUP_WINDOW_S);
    if !(1..=MAX_CATCHUP_WINDOW_S).contains(&catchup_window_s) {
        return Err(EngineError::invalid_request(format!(
            "catchup_window_s: must be 1 to {MAX_CATCHUP_WINDOW_S}"
        )));
    }
    Ok(Definition {
        cron: body.cron.trim().to_owned(),
        timezone,
        spec,
        job: body.job.clone(),
        overlap: body.overlap.unwrap_or(Overlap::Skip),
        catchup_window_s,
        paused: body.paused.unwrap_or(false),
    })
}

fn definition_data(def: &Definition) -> Value {
    json!({ "cron": def.cron, "timezone": def.timezone, "overlap": def.overlap,
            "catchup_window_s": def.catchup_window_s, "paused": def.paused })
}

fn new_schedule_row(
    owner: &str,
    name: &str,
    def: &Definition,
    now: DateTime<Utc>,
    next_fire_at: Option<DateTime<Utc>>,
) -> ScheduleRow {
    ScheduleRow {
        view: ScheduleView {
            name: name.to_owned(),
            owner: owner.to_owned(),
            cron: def.cron.clone(),
            timezone: def.timezone.clone(),
            job: def.job.clone(),
            overlap: def.overlap,
            catchup_window_s: def.catchup_window_s,
            paused: def.paused,
            next_fire_at,
            last_fired_at: None,
            last_job_id: None,
            fired_count: 0,
            skipped_overlap_count: 0,
            skipped_too_old_count: 0,
            created_at: now,
            updated_at: now,
        },
        version: 1,
    }
}

fn event(
    row: &ScheduleRow,
    at: DateTime<Utc>,
    kind: &'static str,
    tick_at: Option<DateTime<Utc>>,
    job_id: Option<uuid::Uuid>,
    data: Value,
) -> NewScheduleEvent {
    NewScheduleEvent {
        owner_id: row.owner().to_owned(),
        schedule_name: row.name().to_owned(),
        at,
        kind,
        tick_at,
        job_id,
        data,
    }
}

/// A stale writer lost the schedule's version CAS: roll back and try again.
fn stale() -> EngineError {
    EngineError::Internal(crate::error::StoreError::Corrupt(
        "schedule changed under its lock".into(),
    ))
}

impl Engine {
    /// Creates or replaces the schedule `name` of `owner`.
    ///
    /// Guarantees: a cron expression, time zone or job body that does not parse is refused
    /// with `invalid_request` and changes nothing; a replaced schedule keeps its history
    /// and counters, and keeps its next tick when its cron expression and time zone are
    /// unchanged (otherwise the next tick is the first one after now).
    pub async fn put_schedule(
        &self,
        owner: &str,
        name: &str,
        body: &ScheduleRequestBody,
    ) -> Result<SchedulePut, EngineError> {
        check_name(name)?;
        let def = definition(body)?;
        let created = retry_transient!(self.put_schedule_once(owner, name, &def))?;
        self.schedules_changed.notify_waiters();
        let schedule = self
            .store
            .schedule(owner, name)
            .await?
            .ok_or(EngineError::NotFound)?;
        Ok(SchedulePut {
            schedule: schedule.view,
            created,
        })
    }

    async fn put_schedule_once(
        &self,
        owner: &str,
        name: &str,
        def: &Definition,
    ) -> Result<bool, EngineError> {
        let mut tx = self.begin().await?;
        // Ticks are judged by the database's clock, never the engine's.
        let now = tx.now().await?;
        let next = def.spec.tick_after(now).ok_or_else(|| {
            EngineError::invalid_request(format!("cron: `{}` has no tick after now", def.cron))
        })?;
        let next_fire_at = (!def.paused).then_some(next);
        let mut existing = tx.lock_schedule(owner, name).await?;
        if existing.is_none() {
            let row = new_schedule_row(owner, name, def, now, next_fire_at);
            // One schedule per (owner, name): a concurrent creator that won is replaced
            // below, under its lock (it committed before our insert returned).
            if tx.insert_schedule(&row).await? {
                let data = definition_data(def);
                tx.append_schedule_events(&[event(
                    &row,
                    now,
                    schedule_event::CREATED,
                    None,
                    None,
                    data,
                )])
                .await?;
                tx.commit().await?;
                tracing::info!(owner, schedule = name, "schedule created");
                return Ok(true);
            }
            existing = tx.lock_schedule(owner, name).await?;
        }
        // Deleted between the failed insert and this lock: nothing to replace.
        let Some(mut row) = existing else {
            return Err(EngineError::NotFound);
        };
        let same_ticks = row.view.cron == def.cron && row.view.timezone == def.timezone;
        let v = &mut row.view;
        v.next_fire_at = match (def.paused, v.next_fire_at) {
            (true, _) => None,
            (false, Some(kept)) if same_ticks => Some(kept),
            (false, _) => Some(next),
        };
        v.cron = def.cron.clone();
        v.timezone = def.timezone.clone();
        v.job = def.job.clone();
        v.overlap = def.overlap;
        v.catchup_window_s = def.catchup_window_s;
        v.paused = def.paused;
        v.updated_at = now;
        // Schedule CAS: the version read under the lock.
        if !tx.update_schedule(&row).await? {
            return Err(stale());
        }
        tx.append_schedule_events(&[event(
            &row,
            now,
            schedule_event::REPLACED,
            None,
            None,
            definition_data(def),
        )])
        .await?;
        tx.commit().await?;
        tracing::info!(owner, schedule = name, "schedule replaced");
        Ok(false)
    }

    /// The schedule `name` of `owner`; `not_found` for another owner's.
    pub async fn schedule(&self, owner: &str, name: &str) -> Result<ScheduleView, EngineError> {
        Ok(self
            .store
            .schedule(owner, name)
            .await?
            .ok_or(EngineError::NotFound)?
            .view)
    }

    /// The schedules of `owner`, by name.
    pub async fn list_schedules(&self, owner: &str) -> Result<Vec<ScheduleView>, EngineError> {
        Ok(self
            .store
            .list_schedules(owner)
            .await?
            .into_iter()
            .map(|r| r.view)
            .collect())
    }

    /// The latest `limit` (1–1000, default 100) events of a schedule, oldest first.
    pub async fn schedule_events(
        &self,
        owner: &str,
        name: &str,
        limit: Option<u64>,
    ) -> Result<Vec<ScheduleEvent>, EngineError> {
        let limit = limit.unwrap_or(100);
        if !(1..=1000).contains(&limit) {
            return Err(EngineError::invalid_request("limit: must be 1 to 1000"));
        }
        self.store
            .schedule(owner, name)
            .await?
            .ok_or(EngineError::NotFound)?;
        Ok(self
            .store
            .schedule_events(owner, name, limit as i64)
            .await?)
    }

    /// Pauses a schedule: no tick fires until it is resumed. Idempotent.
    pub async fn pause_schedule(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<ScheduleView, EngineError> {
        retry_transient!(self.set_paused(owner, name, true))?;
        self.schedule(owner, name).await
    }

    /// Resumes a schedule from the first tick after now (ticks that fell while it was
    /// paused never fire). Idempotent.
    pub async fn resume_schedule(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<ScheduleView, EngineError> {
        retry_transient!(self.set_paused(owner, name, false))?;
        self.schedules_changed.notify_waiters();
        self.schedule(owner, name).await
    }

    async fn set_paused(&self, owner: &str, name: &str, paused: bool) -> Result<(), EngineError> {
        let mut tx = self.begin().await?;
        let mut row = tx
            .lock_schedule(owner, name)
            .await?
            .ok_or(EngineError::NotFound)?;
        if row.view.paused == paused {
            return Ok(());
        }
        // A resumed schedule starts from the first tick after the database's now.
        let now = tx.now().await?;
        let next = if paused {
            None
        } else {
            let spec = CronSpec::parse(&row.view.cron, &row.view.timezone)?;
            Some(spec.tick_after(now).ok_or_else(|| {
                EngineError::invalid_request(format!(
                    "cron: `{}` has no tick after now",
                    row.view.cron
                ))
            })?)
        };
        row.view.paused = paused;
        row.view.next_fire_at = next;
        row.view.updated_at = now;
        // Schedule CAS: the version read under the lock.
        if !tx.update_schedule(&row).await? {
            return Err(stale());
        }
        let kind = if paused {
            schedule_event::PAUSED
        } else {
            schedule_event::RESUMED
        };
        tx.append_schedule_events(&[event(
            &row,
            now,
            kind,
            None,
            None,
            json!({ "next_fire_at": next }),
        )])
        .await?;
        tx.commit().await?;
        tracing::info!(owner, schedule = name, paused, "schedule paused or resumed");
        Ok(())
    }

    /// Deletes a schedule and its history; ticks it fired stay jobs. `not_found` when
    /// there is none.
    pub async fn delete_schedule(&self, owner: &str, name: &str) -> Result<(), EngineError> {
        let mut tx = self.begin().await?;
        if !tx.delete_schedule(owner, name).await? {
            return Err(EngineError::NotFound);
        }
        tx.commit().await?;
        tracing::info!(owner, schedule = name, "schedule deleted");
        Ok(())
    }

    /// When the earliest unpaused schedule is due next; `None` when none is.
    pub async fn next_schedule_fire_at(&self) -> Result<Option<DateTime<Utc>>, EngineError> {
        Ok(self.store.next_schedule_fire().await?.at)
    }

    /// How long until the earliest unpaused schedule is due by the database's clock
    /// (zero when one is due now), for the scheduler loop's sleep; `None` when none is.
    pub async fn next_schedule_due_in(&self) -> Result<Option<std::time::Duration>, EngineError> {
        let next = self.store.next_schedule_fire().await?;
        Ok(next.at.map(|at| {
            (at - next.now)
                .to_std()
                .unwrap_or(std::time::Duration::ZERO)
        }))
    }

    /// Woken when a schedule is created, replaced or resumed in this process.
    pub fn schedules_signal(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.schedules_changed.clone()
    }

    /// One pass of the scheduler over every owner's due schedules.
    ///
    /// Guarantees: each tick submits its job at most once however many engines run passes
    /// at once (its idempotency key is `schedule:{name}:{tick}`, and the schedule moves past
    /// the tick in the same transaction under a version CAS); a tick older than the
    /// schedule's catch-up window is skipped and counted, never fired; with
    /// `overlap: skip` a tick whose previous job is still open is skipped with an event
    /// (so when a pass catches up several missed ticks, the oldest fires and the younger
    /// ones are skipped while its job is open; with `allow` each fires); a schedule that cannot fire stops no other (see [`ScheduleReport::failed`]).
    pub async fn run_schedules(&self) -> Result<ScheduleReport, EngineError> {
        let mut report = ScheduleReport::default();
        match self.next_schedule_due_in().await? {
            Some(wait) if wait.is_zero() => {}
            _ => return Ok(report),
        }
        // Schedules that failed alone in this pass: left as they are, skipped until the
        // next pass.
        let mut failed = Vec::new();
        loop {
            let (fresh, pass) = retry_transient!(self.run_schedules_once(&mut failed))?;
            self.metrics
                .schedule_pass(pass.fired, pass.skipped_overlap, pass.skipped_too_old);
            report.fired += pass.fired;
            report.skipped_overlap += pass.skipped_overlap;
            report.skipped_too_old += pass.skipped_too_old;
            report.failed += pass.failed;
            if fresh < BATCH as u64 {
                break;
            }
        }
        Ok(report)
    }

    /// One batch of due schedules in one transaction, leaving out those in `failed`. When
    /// a schedule of the batch fails (other than transiently: then the whole batch is
    /// tried again), the batch is rolled back and each of its schedules fires in a
    /// transaction of its own, so that one bad schedule cannot stop the others; one that
    /// fails alone is logged, counted, left as it was and added to `failed`. Answers how
    /// many schedules the batch took (besides `failed`) and what it did.
    async fn run_schedules_once(
        &self,
        failed: &mut Vec<(String, String)>,
    ) -> Result<(u64, ScheduleReport), EngineError> {
        let mut tx = self.begin().await?;
        // Due ticks, and the time the pass stamps, by the database's clock: the one the
        // lock below compares `next_fire_at` with.
        let now = tx.now().await?;
        // Failed schedules stay due (they did not move): take them too, and leave them.
        let mut due = tx.lock_due_schedules(BATCH + failed.len() as i64).await?;
        due.retain(|row| {
            !failed
                .iter()
                .any(|(owner, name)| owner == row.owner() && name == row.name())
        });
        let mut report = ScheduleReport::default();
        let mut events = Vec::new();
        let mut failure = None;
        for row in &due {
            if let Err(e) = self
                .fire_schedule(tx.as_mut(), row.clone(), now, &mut report, &mut events)
                .await
            {
                failure = Some(e);
                break;
            }
        }
        match failure {
            None => {
                tx.append_schedule_events(&events).await?;
                tx.commit().await?;
                return Ok((due.len() as u64, report));
            }
            Some(EngineError::Internal(e)) if e.is_transient() => {
                return Err(EngineError::Internal(e))
            }
            Some(_) => drop(tx),
        }
        // Each schedule alone, in the order taken.
        let mut report = ScheduleReport::default();
        for row in &due {
            match retry_transient!(self.fire_schedule_alone(row.owner(), row.name())) {
                Ok(alone) => {
                    report.fired += alone.fired;
                    report.skipped_overlap += alone.skipped_overlap;
                    report.skipped_too_old += alone.skipped_too_old;
                }
                Err(e) => {
                    self.metrics.pass_item_failed("scheduler");
                    report.failed += 1;
                    tracing::error!(owner = %row.owner(), schedule = %row.name(), error = %e,
                        "schedule failed in the scheduler pass: left as it was, skipped until the next pass");
                    failed.push((row.owner().to_owned(), row.name().to_owned()));
                }
            }
        }
        Ok((due.len() as u64, report))
    }

    /// Fires the due ticks of one schedule in a transaction of its own (nothing when it
    /// is no longer due: another engine fired it, or it was paused or deleted meanwhile).
    async fn fire_schedule_alone(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<ScheduleReport, EngineError> {
        let mut report = ScheduleReport::default();
        let mut tx = self.begin().await?;
        let now = tx.now().await?;
        let Some(row) = tx.lock_schedule(owner, name).await? else {
            return Ok(report);
        };
        if row.view.paused || row.view.next_fire_at.is_none_or(|at| at > now) {
            return Ok(report);
        }
        let mut events = Vec::new();
        self.fire_schedule(tx.as_mut(), row, now, &mut report, &mut events)
            .await?;
        tx.append_schedule_events(&events).await?;
        tx.commit().await?;
        Ok(report)
    }

    /// Fires (or skips) the due ticks of one locked schedule and moves it past them.
    async fn fire_schedule(
        &self,
        tx: &mut dyn StoreTx,
        mut row: ScheduleRow,
        now: DateTime<Utc>,
        report: &mut ScheduleReport,
        events: &mut Vec<NewScheduleEvent>,
    ) -> Result<(), EngineError> {
        let owner = row.owner().to_owned();
        let name = row.name().to_owned();
        let spec = CronSpec::parse(&row.view.cron, &row.view.timezone)?;
        let request = JobRequest::from_json(&row.view.job)?;
        let fingerprint = request.fingerprint();
        let who = format!("schedule:{name}");
        let cutoff = now - Duration::seconds(row.view.catchup_window_s as i64);
        let mut tick = row.view.next_fire_at;

        // Ticks no engine reached within the window: skipped and counted, never fired.
        let (mut too_old, mut first_old, mut last_old) = (0u64, None, None);
        while let Some(t) = tick.filter(|t| *t < cutoff) {
            if too_old == MAX_TOO_OLD_COUNTED {
                tick = spec.tick_after(cutoff - Duration::seconds(1));
                break;
            }
            too_old += 1;
            first_old.get_or_insert(t);
            last_old = Some(t);
            tick = spec.tick_after(t);
        }
        if too_old > 0 {
            row.view.skipped_too_old_count += too_old;
            report.skipped_too_old += too_old;
            events.push(event(&row, now, schedule_event::SKIPPED_TOO_OLD, first_old, None, json!({
                "count": too_old, "last_tick_at": last_old, "at_least": too_old == MAX_TOO_OLD_COUNTED,
                "catchup_window_s": row.view.catchup_window_s })));
            tracing::warn!(owner = %owner, schedule = %name, count = too_old, "schedule ticks skipped: older than the catch-up window");
        }

        let mut taken = 0;
        while let Some(t) = tick.filter(|t| *t <= now) {
            if taken == MAX_TICKS_PER_PASS {
                break;
            }
            taken += 1;
            tick = spec.tick_after(t);
            if row.view.overlap == Overlap::Skip {
                if let Some(open) = row.view.last_job_id {
                    if tx
                        .job_status(&owner, open)
                        .await?
                        .is_some_and(|s| !s.is_closed())
                    {
                        row.view.skipped_overlap_count += 1;
                        report.skipped_overlap += 1;
                        events.push(event(
                            &row,
                            now,
                            schedule_event::SKIPPED_OVERLAP,
                            Some(t),
                            Some(open),
                            json!({}),
                        ));
                        continue;
                    }
                }
            }
            // Invariant 1 does the exactly-once: the tick's key is the same everywhere.
            let key = tick_key(&name, t);
            let (job_id, data) = match self
                .submit_in(tx, &owner, &key, &request, &fingerprint, &who)
                .await
            {
                Ok(Created::New(job)) => {
                    self.metrics.submitted(false);
                    (job.id, json!({ "idempotency_key": key }))
                }
                // The tick's job exists already (the schedule was deleted and recreated,
                // or replaced with another job body): it fired then; it does not fire twice.
                Ok(Created::Replayed(id)) => {
                    (id, json!({ "idempotency_key": key, "existing": true }))
                }
                Ok(Created::ReplayedView(job)) => {
                    (job.id, json!({ "idempotency_key": key, "existing": true }))
                }
                Err(EngineError::IdempotencyKeyReused { job_id }) => {
                    (job_id, json!({ "idempotency_key": key, "existing": true }))
                }
                Err(e) => return Err(e),
            };
            row.view.fired_count += 1;
            row.view.last_fired_at = Some(t);
            row.view.last_job_id = Some(job_id);
            report.fired += 1;
            events.push(event(
                &row,
                now,
                schedule_event::FIRED,
                Some(t),
                Some(job_id),
                data,
            ));
            tracing::info!(owner = %owner, schedule = %name, job_id = %job_id, tick = %t, "schedule fired");
        }

        if tick.is_none() {
            row.view.paused = true;
            events.push(event(
                &row,
                now,
                schedule_event::EXHAUSTED,
                None,
                None,
                json!({}),
            ));
        }
        row.view.next_fire_at = tick;
        row.view.updated_at = now;
        // Schedule CAS: the version read under the lock; a stale pass rolls back whole,
        // the jobs of its ticks with it.
        if !tx.update_schedule(&row).await? {
            return Err(stale());
        }
        Ok(())
    }
}
