//! `onceflow jobs signal` and `jobs resume`: a client's signal to a workflow job, and a
//! client's or operator's resume of a failed job, through the HTTP API.

use serde_json::Value;

use super::Server;

/// Sends signal `name` with `payload` (JSON text; `null` when absent) to job `id` under
/// `key` (a fresh one when absent, printed so that the same signal can be sent again
/// safely). Prints whether it was recorded or replayed.
pub async fn signal(
    server: &Server,
    id: &str,
    name: &str,
    payload: Option<&str>,
    key: Option<String>,
) -> Result<(), String> {
    let job_id: uuid::Uuid = id
        .parse()
        .map_err(|_| format!("`{id}` is not a job id (a UUID)"))?;
    let payload: Value = match payload {
        Some(text) => {
            serde_json::from_str(text).map_err(|e| format!("--payload is not JSON: {e}"))?
        }
        None => Value::Null,
    };
    let key = key.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let client = onceflow_worker::Client::new(&server.url, server.token.expose())
        .map_err(|e| e.to_string())?;
    let sent = client
        .signal(job_id, name, &payload, &key)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "signal {} #{} {} for job {} (Idempotency-Key {key})",
        sent.signal.name,
        sent.signal.seq,
        if sent.replayed {
            "was already recorded"
        } else {
            "recorded"
        },
        sent.signal.job_id,
    );
    Ok(())
}

/// Resumes job `id` for `reason` (a client token for its owner's jobs, an operator token
/// for any owner's). Prints the job's new status, its id and its key.
pub async fn resume(server: &Server, id: &str, reason: &str) -> Result<(), String> {
    let job_id: uuid::Uuid = id
        .parse()
        .map_err(|_| format!("`{id}` is not a job id (a UUID)"))?;
    if reason.trim().is_empty() {
        return Err("--reason must not be blank".to_owned());
    }
    let client = onceflow_worker::Client::new(&server.url, server.token.expose())
        .map_err(|e| e.to_string())?;
    let job = client
        .resume(job_id, reason)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "job {} resumed: {} (Idempotency-Key {})",
        job.id, job.status, job.idempotency_key
    );
    Ok(())
}
