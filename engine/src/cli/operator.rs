//! Operator commands: HTTP calls to a running server, printed for a terminal.

use serde_json::Value;

use super::ServerArgs;
use crate::model::{JobEvent, JobView};
use onceflow_protocol::timeline::{render_timeline, short_time};

pub(super) async fn call(
    server: &ServerArgs,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let url = format!("{}{}", server.url.trim_end_matches('/'), path);
    // The one client of onceflow's programs: system roots plus ONCEFLOW_CA_CERT.
    let http = onceflow_worker::http_client_from_env().map_err(|e| e.to_string())?;
    let mut request = http
        .request(method, &url)
        .bearer_auth(server.token.expose());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("cannot reach {url}: {}", onceflow_worker::with_causes(&e)))?;
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

/// `onceflow attempts stuck`.
pub async fn stuck(
    server: &ServerArgs,
    older_than_s: u64,
    status: Option<&str>,
) -> Result<(), String> {
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
