//! A job's timeline as a person reads it in a terminal: the job, its activities and
//! attempts (who cancelled what and why), then every event, races lost included.

use std::collections::HashMap;

use serde_json::Value;

use crate::model::{AttemptView, JobEvent, JobView};

/// An RFC 3339 time shortened to the millisecond, with a space for the `T`.
pub fn short_time(rfc3339: &str) -> String {
    rfc3339.replace('T', " ").chars().take(23).collect()
}

/// The job as a person reads it: header, activities with attempts, then every event.
pub fn render_timeline(job: &JobView, events: &[JobEvent]) -> String {
    let mut out = String::new();
    let what = job
        .activity
        .as_deref()
        .or(job.workflow.as_deref())
        .unwrap_or("?");
    out.push_str(&format!(
        "job {}  {} `{}`  owner {}  key {}\nstatus {}  created {}{}\n",
        job.id,
        job.kind,
        what,
        job.owner,
        job.idempotency_key,
        job.status,
        short_time(&job.created_at.to_rfc3339()),
        job.finished_at
            .map(|t| format!("  finished {}", short_time(&t.to_rfc3339())))
            .unwrap_or_default(),
    ));
    if let Some(parent) = job.parent_job_id {
        out.push_str(&format!("parent {parent}\n"));
    }
    if !job.children.is_empty() {
        let children: Vec<String> = job.children.iter().map(ToString::to_string).collect();
        out.push_str(&format!("children {}\n", children.join(", ")));
    }
    if let Some(at) = job.cancel_requested_at {
        // A workflow told of its cancel (it compensates until it returns or its bound).
        out.push_str(&format!(
            "cancel requested {}\n",
            short_time(&at.to_rfc3339())
        ));
    }
    if let Some(result) = &job.result {
        out.push_str(&format!("result {result}\n"));
    }
    if let Some(error) = &job.error {
        out.push_str(&format!("error  {}: {}\n", error.code, error.message));
    }
    let mut numbers: HashMap<uuid::Uuid, String> = HashMap::new();
    for activity in &job.activities {
        out.push_str(&format!(
            "\nactivity {} `{}`  providers {}  {}{}\n",
            activity.seq,
            activity.name,
            activity.providers.join(" → "),
            activity.status,
            activity
                .completed_by
                .and_then(|w| activity.attempts.iter().find(|a| a.id == w))
                .map(|a| format!("  won by #{} ({})", a.number, a.provider))
                .unwrap_or_default(),
        ));
        for a in &activity.attempts {
            numbers.insert(a.id, format!("#{} {}", a.number, a.provider));
            out.push_str(&attempt_line(a));
        }
    }
    if let Some(signals) = job.signals.as_ref().filter(|s| !s.is_empty()) {
        out.push_str("\nsignals\n");
        for s in signals {
            out.push_str(&format!(
                "  #{:<2} {:<18} received {}  {}  {}\n",
                s.seq,
                s.name,
                short_time(&s.received_at.to_rfc3339()),
                match s.consumed_at {
                    Some(at) => format!("taken {}", short_time(&at.to_rfc3339())),
                    None if s.consumed => "taken".to_owned(),
                    None => "waiting for the workflow".to_owned(),
                },
                s.payload
            ));
        }
    }
    out.push_str("\ntimeline\n");
    for e in events {
        let attempt = e
            .attempt_id
            .and_then(|id| numbers.get(&id).cloned())
            .unwrap_or_default();
        let mut note = String::new();
        if let Some(reason) = e.data.get("reason").and_then(Value::as_str) {
            note = format!("reason: {reason}");
        }
        if e.kind == "race_lost" {
            let winner = e
                .data
                .get("winner")
                .and_then(Value::as_str)
                .and_then(|w| w.parse().ok())
                .and_then(|w: uuid::Uuid| numbers.get(&w).cloned());
            note = match winner {
                Some(w) => format!("late result discarded; {w} had won"),
                None => "late result discarded; the slot was closed".to_owned(),
            };
        }
        if e.kind == "signal_received" {
            note = format!(
                "signal `{}` #{}",
                e.data["name"].as_str().unwrap_or("?"),
                e.data["seq"].as_i64().unwrap_or_default()
            );
        }
        if e.kind == "signal_consumed" {
            note = format!(
                "signal `{}` #{} taken at position {}",
                e.data["name"].as_str().unwrap_or("?"),
                e.data["signal_seq"].as_i64().unwrap_or_default(),
                e.data["seq"].as_i64().unwrap_or_default()
            );
        }
        if e.kind == "failover" {
            note = format!(
                "{} → {}",
                e.data["from"].as_str().unwrap_or("?"),
                e.data["to"].as_str().unwrap_or("?")
            );
        }
        out.push_str(&format!(
            "  {:>3}  {}  {:<24} {:<22} {:<20} {}\n",
            e.seq,
            short_time(&e.at.to_rfc3339()),
            e.kind,
            e.actor,
            attempt,
            note
        ));
    }
    out
}

fn attempt_line(a: &AttemptView) -> String {
    let mut line = format!("  #{:<2} {:<18} {:<10}", a.number, a.provider, a.status);
    if let Some(t) = a.started_at {
        line.push_str(&format!(" started {}", short_time(&t.to_rfc3339())));
    }
    if let (Some(by), Some(reason)) = (&a.cancelled_by, &a.cancel_reason) {
        line.push_str(&format!("  cancelled by {by}: \"{reason}\""));
    }
    if let Some(error) = &a.error {
        line.push_str(&format!("  {}: {}", error.code, error.message));
    }
    line.push('\n');
    line
}
