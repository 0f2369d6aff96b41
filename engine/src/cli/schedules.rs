//! `onceflow schedules list|show|pause|resume`: HTTP calls to a running server with a
//! client token, printed for a terminal.

use serde_json::Value;

use super::operator::call;
use super::Server;
use onceflow_protocol::timeline::short_time;

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.len() >= 19 && s.as_bytes().get(10) == Some(&b'T') => short_time(s),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `onceflow schedules list`.
pub async fn list(server: &Server) -> Result<(), String> {
    let answer = call(server, reqwest::Method::GET, "/v1/schedules", None).await?;
    let schedules = answer["schedules"].as_array().cloned().unwrap_or_default();
    if schedules.is_empty() {
        println!("no schedules");
        return Ok(());
    }
    println!(
        "{:<24}  {:<20}  {:<16}  {:<7}  {:<20}  {:<20}  {:>6}  {:>7}",
        "NAME", "CRON", "TIMEZONE", "STATE", "NEXT", "LAST FIRED", "FIRED", "SKIPPED"
    );
    for s in schedules {
        let skipped = s["skipped_overlap_count"].as_u64().unwrap_or(0)
            + s["skipped_too_old_count"].as_u64().unwrap_or(0);
        println!(
            "{:<24}  {:<20}  {:<16}  {:<7}  {:<20}  {:<20}  {:>6}  {:>7}",
            text(&s["name"]),
            text(&s["cron"]),
            text(&s["timezone"]),
            if s["paused"].as_bool() == Some(true) {
                "paused"
            } else {
                "active"
            },
            text(&s["next_fire_at"]),
            text(&s["last_fired_at"]),
            s["fired_count"].as_u64().unwrap_or(0),
            skipped,
        );
    }
    Ok(())
}

/// `onceflow schedules show`: the schedule and its latest events.
pub async fn show(server: &Server, name: &str) -> Result<(), String> {
    let s = call(
        server,
        reqwest::Method::GET,
        &format!("/v1/schedules/{name}"),
        None,
    )
    .await?;
    print_schedule(&s);
    let events = call(
        server,
        reqwest::Method::GET,
        &format!("/v1/schedules/{name}/events?limit=20"),
        None,
    )
    .await?;
    println!("\nlatest events:");
    for e in events["events"].as_array().cloned().unwrap_or_default() {
        let extra = match e["type"].as_str() {
            Some("skipped_too_old") => format!(
                "{} ticks up to {}",
                e["data"]["count"],
                text(&e["data"]["last_tick_at"])
            ),
            _ => String::new(),
        };
        println!(
            "  {:<20}  {:<16}  tick {:<20}  job {:<36}  {extra}",
            text(&e["at"]),
            text(&e["type"]),
            text(&e["tick_at"]),
            text(&e["job_id"])
        );
    }
    Ok(())
}

fn print_schedule(s: &Value) {
    println!(
        "schedule {} (owner {})",
        text(&s["name"]),
        text(&s["owner"])
    );
    println!(
        "  cron          {} in {}",
        text(&s["cron"]),
        text(&s["timezone"])
    );
    println!(
        "  state         {}",
        if s["paused"].as_bool() == Some(true) {
            "paused"
        } else {
            "active"
        }
    );
    println!(
        "  overlap       {}   catch-up window {}s",
        text(&s["overlap"]),
        s["catchup_window_s"]
    );
    println!("  next tick     {}", text(&s["next_fire_at"]));
    println!(
        "  last fired    {}  job {}",
        text(&s["last_fired_at"]),
        text(&s["last_job_id"])
    );
    println!(
        "  ticks         {} fired, {} skipped for overlap, {} skipped as too old",
        s["fired_count"], s["skipped_overlap_count"], s["skipped_too_old_count"]
    );
    println!("  job           {}", s["job"]);
}

/// `onceflow schedules pause` / `resume`.
pub async fn set_paused(server: &Server, name: &str, paused: bool) -> Result<(), String> {
    let action = if paused { "pause" } else { "resume" };
    let s = call(
        server,
        reqwest::Method::POST,
        &format!("/v1/schedules/{name}/{action}"),
        None,
    )
    .await?;
    print_schedule(&s);
    Ok(())
}
