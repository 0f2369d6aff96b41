//! The checker: reads a run's history, the samples taken during it and the database at
//! its end, and names every broken promise with the smallest excerpt of history that
//! shows it.

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use uuid::Uuid;

use super::db::Snapshot;
use super::history::{FaultRecord, Op, Record};

/// A broken promise.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// The rule (`one_job_per_key`, `exactly_one_winner`, …).
    pub rule: &'static str,
    /// What was seen.
    pub message: String,
    /// The job or attempt it concerns, to cut the history's excerpt by.
    pub about: Option<Uuid>,
}

/// What the checker reads.
pub struct Observed<'a> {
    pub records: &'a [Record],
    pub faults: &'a [FaultRecord],
    /// `(ms, activity, live attempts)` sampled while running.
    pub live_samples: &'a [(u64, String, i64)],
    pub db: &'a Snapshot,
}

/// How long after the database came back a 5xx is still forgiven (pools reconnect).
const DB_GRACE_MS: u64 = 5_000;

fn violation(rule: &'static str, about: Option<Uuid>, message: String) -> Violation {
    Violation {
        rule,
        message,
        about,
    }
}

/// Every rule the run must keep; an empty list when all held.
pub fn check(o: &Observed<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    let jobs_by_key: HashMap<&str, Vec<&super::db::JobRow>> =
        o.db.jobs.iter().fold(HashMap::new(), |mut m, j| {
            m.entry(j.key.as_str()).or_default().push(j);
            m
        });
    let activity_of: HashMap<Uuid, &super::db::ActivityRow> =
        o.db.activities.iter().map(|a| (a.id, a)).collect();
    let attempt_of: HashMap<Uuid, &super::db::AttemptRow> =
        o.db.attempts.iter().map(|a| (a.id, a)).collect();
    let mut sent_under: HashMap<&str, Vec<&Value>> = HashMap::new();
    for r in o.records {
        if let Op::Submit { key, input } = &r.op {
            sent_under.entry(key.as_str()).or_default().push(input);
        }
    }

    // One job per (owner, key), with an input sent under that key.
    for (key, jobs) in &jobs_by_key {
        if jobs.len() > 1 {
            out.push(violation(
                "one_job_per_key",
                Some(jobs[0].id),
                format!("{} jobs under key {key}", jobs.len()),
            ));
        }
        for job in jobs {
            let sent = sent_under.get(key).cloned().unwrap_or_default();
            if !sent.contains(&&job.input) {
                out.push(violation(
                    "job_input_was_sent",
                    Some(job.id),
                    format!(
                        "job {} under key {key} holds input {} never sent under it",
                        job.id, job.input
                    ),
                ));
            }
        }
    }

    // Every acknowledged submission's job exists, with its input.
    for r in o.records {
        let (Op::Submit { key, input }, Some(200 | 201)) = (&r.op, r.answer.status) else {
            continue;
        };
        let id = r
            .answer
            .detail
            .as_deref()
            .and_then(|d| Uuid::parse_str(d).ok());
        match o.db.jobs.iter().find(|j| Some(j.id) == id) {
            Some(job) if job.key == *key && job.input == *input => {}
            Some(job) => out.push(violation("acknowledged_job_exists", Some(job.id), format!("submission of key {key} acknowledged job {} which holds key {} and input {}", job.id, job.key, job.input))),
            None => out.push(violation("acknowledged_job_exists", id, format!("submission of key {key} was acknowledged ({:?}) but its job is not in the database", r.answer))),
        }
    }

    // At most one live attempt per activity at any moment.
    for (at, activity, count) in o.live_samples {
        out.push(violation(
            "one_live_attempt",
            Uuid::parse_str(activity).ok(),
            format!("{count} live attempts of activity {activity} at {at} ms"),
        ));
    }
    let mut live: HashMap<Uuid, usize> = HashMap::new();
    for a in &o.db.attempts {
        if matches!(a.status.as_str(), "scheduled" | "started" | "unknown") {
            *live.entry(a.activity_id).or_default() += 1;
        }
    }
    for (activity, n) in live {
        if n > 1 {
            out.push(violation(
                "one_live_attempt",
                Some(activity),
                format!("{n} live attempts of activity {activity} at the end"),
            ));
        }
    }

    // Exactly one winner: the attempt answered `won`, whose result is the activity's.
    let mut won_by: HashMap<Uuid, HashSet<Uuid>> = HashMap::new();
    for r in o.records {
        let Op::Complete {
            attempt_id,
            right_token,
            result,
            ..
        } = &r.op
        else {
            continue;
        };
        let Some(attempt) = attempt_of.get(attempt_id) else {
            if r.answer.status == Some(200) && r.answer.detail.as_deref() == Some("won") {
                out.push(violation(
                    "exactly_one_winner",
                    Some(*attempt_id),
                    format!("attempt {attempt_id} answered won but is not in the database"),
                ));
            }
            continue;
        };
        let activity = activity_of.get(&attempt.activity_id);
        let outcome = (r.answer.status, r.answer.detail.as_deref());
        if !right_token {
            // A wrong lease token changes nothing, and is never answered as if it had.
            if outcome.0 == Some(200) {
                out.push(violation(
                    "wrong_token_changes_nothing",
                    Some(*attempt_id),
                    format!("a completion with a wrong token was answered {outcome:?}"),
                ));
            }
            if let (Some(result), Some(activity)) = (result, activity) {
                if activity.result.as_ref() == Some(result) {
                    out.push(violation(
                        "wrong_token_changes_nothing",
                        Some(*attempt_id),
                        format!(
                            "activity {} holds the result sent with a wrong token",
                            activity.id
                        ),
                    ));
                }
            }
            continue;
        }
        match outcome {
            (Some(200), Some("won")) => {
                won_by
                    .entry(attempt.activity_id)
                    .or_default()
                    .insert(*attempt_id);
                match activity {
                    Some(a) if a.completed_by == Some(*attempt_id) && a.result == *result => {}
                    Some(a) => out.push(violation("exactly_one_winner", Some(*attempt_id), format!("attempt {attempt_id} was answered won, but activity {} was completed by {:?} with {:?}", a.id, a.completed_by, a.result))),
                    None => out.push(violation("exactly_one_winner", Some(*attempt_id), format!("attempt {attempt_id} was answered won; its activity is gone"))),
                }
            }
            (Some(200), Some("lost")) => {
                if let (Some(a), Some(result)) = (activity, result) {
                    if a.result.as_ref() == Some(result) {
                        out.push(violation("lost_changes_nothing", Some(*attempt_id), format!("attempt {attempt_id} was answered lost, but its result is activity {}'s", a.id)));
                    }
                }
            }
            _ => {}
        }
    }
    for (activity, winners) in &won_by {
        if winners.len() > 1 {
            out.push(violation(
                "exactly_one_winner",
                Some(*activity),
                format!(
                    "activity {activity}: {} attempts answered won",
                    winners.len()
                ),
            ));
        }
    }
    for a in &o.db.activities {
        let Some(winner) = a.completed_by else {
            continue;
        };
        let sent: Vec<&Value> = o
            .records
            .iter()
            .filter_map(|r| match &r.op {
                Op::Complete {
                    attempt_id,
                    right_token: true,
                    result: Some(result),
                    ..
                } if *attempt_id == winner => Some(result),
                _ => None,
            })
            .collect();
        if !a.result.as_ref().is_some_and(|r| sent.contains(&r)) {
            out.push(violation("exactly_one_winner", Some(winner), format!("activity {} was completed by {winner} with {:?}, which that attempt never sent", a.id, a.result)));
        }
        if attempt_of.get(&winner).map(|t| t.status.as_str()) != Some("succeeded") {
            out.push(violation(
                "exactly_one_winner",
                Some(winner),
                format!(
                    "activity {}'s winner {winner} is not a succeeded attempt",
                    a.id
                ),
            ));
        }
    }

    // An expired lease becomes `unknown`, never `failed`: a failed attempt is one whose
    // worker reported an error with its token.
    let reported: HashSet<Uuid> = o
        .records
        .iter()
        .filter_map(|r| match &r.op {
            Op::Complete {
                attempt_id,
                right_token: true,
                error_retryable: Some(_),
                ..
            } => Some(*attempt_id),
            _ => None,
        })
        .collect();
    for a in &o.db.attempts {
        if a.status == "failed" && !reported.contains(&a.id) {
            out.push(violation(
                "expired_is_unknown",
                Some(a.id),
                format!(
                    "attempt {} is failed, but no error was reported for it",
                    a.id
                ),
            ));
        }
    }

    // No 5xx, except while the database was down.
    let down: Vec<(u64, u64)> = o
        .faults
        .iter()
        .filter(|f| f.fault.starts_with("database"))
        .map(|f| (f.start_ms, f.end_ms + DB_GRACE_MS))
        .collect();
    for r in o.records {
        if let Some(status @ 500..=599) = r.answer.status {
            let excused = down
                .iter()
                .any(|(from, to)| r.end_ms >= *from && r.start_ms <= *to);
            if !excused {
                out.push(violation(
                    "no_5xx",
                    about_of(&r.op),
                    format!(
                        "{} answered {status} ({:?}) at {}–{} ms",
                        r.actor, r.answer.detail, r.start_ms, r.end_ms
                    ),
                ));
            }
        }
    }

    // A job whose cancel was acknowledged (202) stays cancelled: no late result or
    // resume brings it back.
    for r in o.records {
        let (Op::CancelJob { job_id }, Some(202)) = (&r.op, r.answer.status) else {
            continue;
        };
        if let Some(job) = o.db.jobs.iter().find(|j| j.id == *job_id) {
            if job.status != "cancelled" {
                out.push(violation(
                    "cancel_is_final",
                    Some(job.id),
                    format!(
                        "job {} was cancelled (202 at {} ms) but ended {}",
                        job.id, r.end_ms, job.status
                    ),
                ));
            }
        }
    }

    // After the drain, every job is finished or waits on an `unknown` attempt.
    {
        for job in &o.db.jobs {
            if matches!(job.status.as_str(), "succeeded" | "failed" | "cancelled") {
                continue;
            }
            let waits_on_unknown =
                o.db.attempts
                    .iter()
                    .any(|a| a.job_id == job.id && a.status == "unknown");
            if !waits_on_unknown {
                out.push(violation(
                    "drained",
                    Some(job.id),
                    format!(
                        "job {} is {} after the drain, waiting on no unknown attempt",
                        job.id, job.status
                    ),
                ));
            }
        }
    }
    out
}

/// The job or attempt a request concerns.
pub fn about_of(op: &Op) -> Option<Uuid> {
    match op {
        Op::CancelJob { job_id } | Op::Resume { job_id } | Op::ManualAttempt { job_id, .. } => {
            Some(*job_id)
        }
        Op::Complete { attempt_id, .. }
        | Op::Heartbeat { attempt_id, .. }
        | Op::CancelAttempt { attempt_id } => Some(*attempt_id),
        Op::Submit { .. } | Op::Poll { .. } => None,
    }
}

/// The records that concern `about` (a job, an activity or an attempt, and everything of
/// the same job), in the order they started.
pub fn excerpt<'a>(records: &'a [Record], db: &Snapshot, about: Uuid) -> Vec<&'a Record> {
    let job = db
        .jobs
        .iter()
        .find(|j| j.id == about)
        .map(|j| j.id)
        .or_else(|| {
            db.activities
                .iter()
                .find(|a| a.id == about)
                .map(|a| a.job_id)
        })
        .or_else(|| db.attempts.iter().find(|a| a.id == about).map(|a| a.job_id));
    let key = job
        .and_then(|j| db.jobs.iter().find(|x| x.id == j))
        .map(|j| j.key.clone());
    let attempts: HashSet<Uuid> = db
        .attempts
        .iter()
        .filter(|a| Some(a.job_id) == job || a.id == about)
        .map(|a| a.id)
        .collect();
    let mut picked: Vec<&Record> = records
        .iter()
        .filter(|r| match &r.op {
            Op::Submit { key: k, .. } => Some(k) == key.as_ref(),
            Op::CancelJob { job_id } | Op::Resume { job_id } | Op::ManualAttempt { job_id, .. } => {
                Some(*job_id) == job
            }
            Op::Complete { attempt_id, .. }
            | Op::Heartbeat { attempt_id, .. }
            | Op::CancelAttempt { attempt_id } => attempts.contains(attempt_id),
            Op::Poll { attempts: handed } => handed.iter().any(|a| attempts.contains(a)),
        })
        .collect();
    picked.sort_by_key(|r| r.start_ms);
    picked
}

#[cfg(test)]
mod tests {
    //! The checker can fail: each rule, fed a history and a database that break it.

    use serde_json::json;

    use super::*;
    use crate::torture::db::{ActivityRow, AttemptRow, JobRow};
    use crate::torture::history::Answer;

    fn ids() -> (Uuid, Uuid, Uuid, Uuid) {
        (
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
        )
    }

    fn record(op: Op, status: Option<u16>, detail: Option<&str>) -> Record {
        Record {
            actor: "t".into(),
            start_ms: 10,
            end_ms: 20,
            op,
            answer: Answer {
                status,
                detail: detail.map(str::to_owned),
            },
        }
    }

    /// A run where everything held: one job, its one attempt won with `{"value": 1}`.
    fn healthy() -> (Vec<Record>, Snapshot, (Uuid, Uuid, Uuid, Uuid)) {
        let (job, activity, attempt, other) = ids();
        let input = json!({"v": 1});
        let result = json!({"value": 1});
        let records = vec![
            record(
                Op::Submit {
                    key: "k".into(),
                    input: input.clone(),
                },
                Some(201),
                Some(&job.to_string()),
            ),
            record(
                Op::Complete {
                    attempt_id: attempt,
                    job_id: job,
                    right_token: true,
                    result: Some(result.clone()),
                    error_retryable: None,
                },
                Some(200),
                Some("won"),
            ),
        ];
        let db = Snapshot {
            jobs: vec![JobRow {
                id: job,
                key: "k".into(),
                input,
                status: "succeeded".into(),
                result: Some(result.clone()),
            }],
            activities: vec![ActivityRow {
                id: activity,
                job_id: job,
                status: "succeeded".into(),
                completed_by: Some(attempt),
                result: Some(result),
            }],
            attempts: vec![AttemptRow {
                id: attempt,
                activity_id: activity,
                job_id: job,
                status: "succeeded".into(),
            }],
        };
        (records, db, (job, activity, attempt, other))
    }

    fn rules(
        records: &[Record],
        db: &Snapshot,
        samples: &[(u64, String, i64)],
        faults: &[FaultRecord],
    ) -> Vec<&'static str> {
        let mut rules: Vec<&str> = check(&Observed {
            records,
            faults,
            live_samples: samples,
            db,
        })
        .iter()
        .map(|v| v.rule)
        .collect();
        rules.sort();
        rules.dedup();
        rules
    }

    #[test]
    fn a_healthy_run_breaks_nothing() {
        let (records, db, _) = healthy();
        assert_eq!(rules(&records, &db, &[], &[]), Vec::<&str>::new());
    }

    #[test]
    fn two_jobs_under_one_key_or_an_input_never_sent_are_caught() {
        let (records, mut db, _) = healthy();
        let mut twin = db.jobs[0].clone();
        twin.id = Uuid::new_v4();
        twin.input = json!({"v": 2});
        db.jobs.push(twin);
        assert_eq!(
            rules(&records, &db, &[], &[]),
            vec!["job_input_was_sent", "one_job_per_key"]
        );
    }

    #[test]
    fn an_acknowledged_job_missing_is_caught() {
        let (records, mut db, _) = healthy();
        db.jobs.clear();
        assert!(rules(&records, &db, &[], &[]).contains(&"acknowledged_job_exists"));
    }

    #[test]
    fn a_second_live_attempt_is_caught_sampled_or_at_the_end() {
        let (records, mut db, (job, activity, _, other)) = healthy();
        assert_eq!(
            rules(&records, &db, &[(5, activity.to_string(), 2)], &[]),
            vec!["one_live_attempt"]
        );
        db.attempts.push(AttemptRow {
            id: other,
            activity_id: activity,
            job_id: job,
            status: "started".into(),
        });
        db.attempts.push(AttemptRow {
            id: Uuid::new_v4(),
            activity_id: activity,
            job_id: job,
            status: "unknown".into(),
        });
        assert!(rules(&records, &db, &[], &[]).contains(&"one_live_attempt"));
    }

    #[test]
    fn a_won_answer_that_is_not_the_winner_is_caught() {
        let (mut records, mut db, (job, activity, _, other)) = healthy();
        db.attempts.push(AttemptRow {
            id: other,
            activity_id: activity,
            job_id: job,
            status: "succeeded".into(),
        });
        records.push(record(
            Op::Complete {
                attempt_id: other,
                job_id: job,
                right_token: true,
                result: Some(json!({"value": 2})),
                error_retryable: None,
            },
            Some(200),
            Some("won"),
        ));
        assert_eq!(rules(&records, &db, &[], &[]), vec!["exactly_one_winner"]);
    }

    #[test]
    fn a_winner_whose_result_it_never_sent_is_caught() {
        let (records, mut db, _) = healthy();
        db.activities[0].result = Some(json!({"value": 99}));
        assert!(rules(&records, &db, &[], &[]).contains(&"exactly_one_winner"));
    }

    #[test]
    fn a_lost_completion_that_changed_the_result_is_caught() {
        let (mut records, mut db, (job, activity, _, other)) = healthy();
        db.attempts.push(AttemptRow {
            id: other,
            activity_id: activity,
            job_id: job,
            status: "succeeded".into(),
        });
        records.push(record(
            Op::Complete {
                attempt_id: other,
                job_id: job,
                right_token: true,
                result: Some(json!({"value": 1})),
                error_retryable: None,
            },
            Some(200),
            Some("lost"),
        ));
        assert!(rules(&records, &db, &[], &[]).contains(&"lost_changes_nothing"));
    }

    #[test]
    fn a_wrong_token_answered_or_applied_is_caught() {
        let (mut records, db, (job, _, attempt, _)) = healthy();
        records.push(record(
            Op::Complete {
                attempt_id: attempt,
                job_id: job,
                right_token: false,
                result: Some(json!({"value": 1})),
                error_retryable: None,
            },
            Some(200),
            Some("won"),
        ));
        assert!(rules(&records, &db, &[], &[]).contains(&"wrong_token_changes_nothing"));
    }

    #[test]
    fn a_failed_attempt_nobody_failed_is_caught() {
        let (records, mut db, (job, activity, _, other)) = healthy();
        db.attempts.push(AttemptRow {
            id: other,
            activity_id: activity,
            job_id: job,
            status: "failed".into(),
        });
        assert_eq!(rules(&records, &db, &[], &[]), vec!["expired_is_unknown"]);
    }

    #[test]
    fn a_5xx_is_caught_unless_the_database_was_down() {
        let (mut records, db, _) = healthy();
        records.push(record(
            Op::Poll { attempts: vec![] },
            Some(500),
            Some("internal"),
        ));
        assert_eq!(rules(&records, &db, &[], &[]), vec!["no_5xx"]);
        let down = [FaultRecord {
            fault: "database restart".into(),
            start_ms: 0,
            end_ms: 15,
        }];
        assert_eq!(rules(&records, &db, &[], &down), Vec::<&str>::new());
    }

    #[test]
    fn a_job_left_open_without_an_unknown_attempt_after_the_drain_is_caught() {
        let (records, mut db, (_, _, attempt, _)) = healthy();
        db.jobs[0].status = "running".into();
        assert!(rules(&records, &db, &[], &[]).contains(&"drained"));
        db.attempts.iter_mut().for_each(|a| {
            if a.id == attempt {
                a.status = "unknown".into()
            }
        });
        assert!(!rules(&records, &db, &[], &[]).contains(&"drained"));
    }

    #[test]
    fn a_cancelled_job_that_ends_otherwise_is_caught() {
        let (mut records, db, (job, _, _, _)) = healthy();
        records.insert(1, record(Op::CancelJob { job_id: job }, Some(202), None));
        assert_eq!(rules(&records, &db, &[], &[]), vec!["cancel_is_final"]);
    }

    #[test]
    fn the_excerpt_holds_the_records_of_the_job_in_order() {
        let (records, db, (job, _, attempt, _)) = healthy();
        let excerpt = excerpt(&records, &db, attempt);
        assert_eq!(excerpt.len(), 2);
        assert!(matches!(excerpt[0].op, Op::Submit { .. }));
        let _ = job;
    }
}
