//! Operator commands: HTTP calls to a running server, printed for a terminal.

use std::collections::HashMap;

use serde_json::Value;

use super::ServerArgs;
use crate::model::{AttemptView, JobEvent, JobView};

async fn call(server: &ServerArgs, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value, String> {
    let url = format!("{}{}", server.url.trim_end_matches('/'), path);
    let mut request = reqwest::Client::new().request(method, &url).bearer_auth(&server.token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.map_err(|e| format!("cannot reach {url}: {e}"))?;
    let status = response.status();
    let value: Value = response.json().await.map_err(|e| format!("{url} answered {status} without JSON: {e}"))?;
    if status.is_success() {
        Ok(value)
    } else {
        Err(format!(
            "{status}: {} ({})",
            value["error"]["message"].as_str().unwrap_or("error"),
            value["error"]["code"].as_str().unwrap_or("?")
        ))
    }
}

/// `onceflow attempts stuck`.
pub async fn stuck(server: &ServerArgs, older_than_s: u64, status: Option<&str>) -> Result<(), String> {
    let mut path = format!("/v1/attempts?older_than_s={older_than_s}");
    if let Some(status) = status {
        path.push_str(&format!("&status={status}"));
    }
    let answer = call(server, reqwest::Method::GET, &path, None).await?;
    let attempts = answer["attempts"].as_array().cloned().unwrap_or_default();
    if attempts.is_empty() {
        println!("no attempts stuck for {older_than_s}s or more");
        return Ok(());
    }
    println!("{:<36}  {:<8}  {:<12}  {:<16}  {:<20}  {:<36}", "ATTEMPT", "STATUS", "OWNER", "PROVIDER", "SINCE", "JOB");
    for a in attempts {
        println!(
            "{:<36}  {:<8}  {:<12}  {:<16}  {:<20}  {:<36}",
            a["id"].as_str().unwrap_or("?"),
            a["status"].as_str().unwrap_or("?"),
            a["owner"].as_str().unwrap_or("?"),
            a["provider"].as_str().unwrap_or("?"),
            short_time(a["since"].as_str().unwrap_or("?")),
            a["job_id"].as_str().unwrap_or("?"),
        );
    }
    Ok(())
}

/// `onceflow attempts cancel`.
pub async fn cancel(server: &ServerArgs, id: &str, reason: &str) -> Result<(), String> {
    let answer = call(
        server,
        reqwest::Method::POST,
        &format!("/v1/attempts/{id}/cancel"),
        Some(serde_json::json!({ "reason": reason })),
    )
    .await?;
    println!(
        "attempt {} is {} (cancelled by {}: {})",
        answer["id"].as_str().unwrap_or(id),
        answer["status"].as_str().unwrap_or("?"),
        answer["cancelled_by"].as_str().unwrap_or("?"),
        answer["cancel_reason"].as_str().unwrap_or("?"),
    );
    Ok(())
}

/// `onceflow jobs show`: the job's timeline.
pub async fn show_job(server: &ServerArgs, id: &str) -> Result<(), String> {
    let job: JobView = serde_json::from_value(call(server, reqwest::Method::GET, &format!("/v1/jobs/{id}"), None).await?)
        .map_err(|e| format!("unexpected job body: {e}"))?;
    let events: Vec<JobEvent> = serde_json::from_value(
        call(server, reqwest::Method::GET, &format!("/v1/jobs/{id}/events"), None).await?["events"].take(),
    )
    .map_err(|e| format!("unexpected events body: {e}"))?;
    print!("{}", render_timeline(&job, &events));
    Ok(())
}

fn short_time(rfc3339: &str) -> String {
    rfc3339.replace('T', " ").chars().take(23).collect()
}

/// The job as a human reads it: header, activities with attempts, then every event.
pub fn render_timeline(job: &JobView, events: &[JobEvent]) -> String {
    let mut out = String::new();
    let what = job.activity.as_deref().or(job.workflow.as_deref()).unwrap_or("?");
    out.push_str(&format!(
        "job {}  {} `{}`  owner {}  key {}\nstatus {}  created {}{}\n",
        job.id,
        job.kind,
        what,
        job.owner,
        job.idempotency_key,
        job.status,
        short_time(&job.created_at.to_rfc3339()),
        job.finished_at.map(|t| format!("  finished {}", short_time(&t.to_rfc3339()))).unwrap_or_default(),
    ));
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
    out.push_str("\ntimeline\n");
    for e in events {
        let attempt = e.attempt_id.and_then(|id| numbers.get(&id).cloned()).unwrap_or_default();
        let mut note = String::new();
        if let Some(reason) = e.data.get("reason").and_then(Value::as_str) {
            note = format!("reason: {reason}");
        }
        if e.kind == "race_lost" {
            let winner = e.data.get("winner").and_then(Value::as_str).and_then(|w| w.parse().ok()).and_then(|w: uuid::Uuid| numbers.get(&w).cloned());
            note = match winner {
                Some(w) => format!("late result discarded; {w} had won"),
                None => "late result discarded; the slot was closed".to_owned(),
            };
        }
        if e.kind == "failover" {
            note = format!("{} → {}", e.data["from"].as_str().unwrap_or("?"), e.data["to"].as_str().unwrap_or("?"));
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
