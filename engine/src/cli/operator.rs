//! Operator commands: HTTP calls to a running server, printed for a terminal.

use serde_json::Value;

use super::Server;
use crate::model::{JobEvent, JobView};
use onceflow_protocol::timeline::{render_timeline, short_time};

pub(super) async fn call(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    // `--url` may list several servers: a request moves on from one that cannot be
    // reached (and a GET, safe to repeat, also from one stopping or answering 502-504).
    let endpoints = onceflow_worker::Endpoints::parse(&server.url).map_err(|e| e.to_string())?;
    let repeat = if method == reqwest::Method::GET {
        onceflow_worker::Repeat::Safe
    } else {
        onceflow_worker::Repeat::Unsafe
    };
    // The one client of onceflow's programs: system roots plus ONCEFLOW_CA_CERT.
    let http = onceflow_worker::http_client_from_env().map_err(|e| e.to_string())?;
    let response = endpoints
        .send(repeat, |base| {
            let request = http
                .request(method.clone(), format!("{base}{path}"))
                .bearer_auth(server.token.expose());
            match &body {
                Some(body) => request.json(body),
                None => request,
            }
        })
        .await
        .map_err(|e| {
            let url = e
                .url()
                .map_or_else(|| server.url.clone(), |u| u.to_string());
            format!("cannot reach {url}: {}", onceflow_worker::with_causes(&e))
        })?;
    let url = response.url().to_string();
    let status = response.status();
    let value: Value = response
        .json()
        .await
        .map_err(|e| format!("{url} answered {status} without JSON: {e}"))?;
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

/// How long an attempt must have been in its status to count as stuck, per status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckAges {
    /// For `started` attempts, in seconds.
    pub started_s: u64,
    /// For `unknown` attempts, in seconds.
    pub unknown_s: u64,
}

impl StuckAges {
    /// The web UI's Stuck page and `attempts stuck` without `--older-than`: every
    /// `unknown` attempt, and `started` ones after 60 s.
    pub const STUCK_PAGE: StuckAges = StuckAges {
        started_s: 60,
        unknown_s: 0,
    };

    /// One age for both statuses (`--older-than`).
    pub fn same(seconds: u64) -> StuckAges {
        StuckAges {
            started_s: seconds,
            unknown_s: seconds,
        }
    }
}

/// `onceflow attempts stuck`: the attempts of `status` (a comma-separated list; default
/// both) in their status for at least their age in `ages`, oldest first.
pub async fn stuck(server: &Server, ages: StuckAges, status: Option<&str>) -> Result<(), String> {
    let statuses: Vec<&str> = match status {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect(),
        None => vec!["started", "unknown"],
    };
    // One query per age (the API takes one age): the server checks the statuses.
    let mut by_age: Vec<(u64, Vec<&str>)> = Vec::new();
    for s in statuses {
        let age = if s == "unknown" {
            ages.unknown_s
        } else {
            ages.started_s
        };
        match by_age.iter_mut().find(|(a, _)| *a == age) {
            Some((_, list)) => list.push(s),
            None => by_age.push((age, vec![s])),
        }
    }
    let mut attempts: Vec<Value> = Vec::new();
    for (age, list) in &by_age {
        let path = format!(
            "/v1/attempts?older_than_s={age}&status={}&limit=500",
            list.join(",")
        );
        let mut answer = call(server, reqwest::Method::GET, &path, None).await?;
        if let Value::Array(found) = answer["attempts"].take() {
            attempts.extend(found);
        }
    }
    let since = |a: &Value| {
        a["since"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    attempts.sort_by_key(since);
    if attempts.is_empty() {
        // No status word here: `attempts stuck | grep unknown` must not match an empty list.
        println!("no attempts stuck");
        return Ok(());
    }
    println!(
        "{:<36}  {:<8}  {:<12}  {:<16}  {:<20}  {:<36}",
        "ATTEMPT", "STATUS", "OWNER", "PROVIDER", "SINCE", "JOB"
    );
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
pub async fn cancel(server: &Server, id: &str, reason: &str) -> Result<(), String> {
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
pub async fn show_job(server: &Server, id: &str) -> Result<(), String> {
    let job: JobView = serde_json::from_value(
        call(
            server,
            reqwest::Method::GET,
            &format!("/v1/jobs/{id}"),
            None,
        )
        .await?,
    )
    .map_err(|e| format!("unexpected job body: {e}"))?;
    // The history comes a page at a time; the timeline needs all of it.
    let mut events: Vec<JobEvent> = Vec::new();
    let mut after_seq = 0;
    loop {
        let mut page = call(
            server,
            reqwest::Method::GET,
            &format!("/v1/jobs/{id}/events?limit=1000&after_seq={after_seq}"),
            None,
        )
        .await?;
        let batch: Vec<JobEvent> = serde_json::from_value(page["events"].take())
            .map_err(|e| format!("unexpected events body: {e}"))?;
        events.extend(batch);
        match page["next"].as_i64() {
            Some(next) => after_seq = next,
            None => break,
        }
    }
    print!("{}", render_timeline(&job, &events));
    Ok(())
}
