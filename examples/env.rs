//! The variables every example reads (the names `onceflow dev` writes to
//! `.onceflow/tokens.env`).

/// Where the engine is and the tokens of each role (not every example uses every one).
#[allow(dead_code)]
pub struct Env {
    pub url: String,
    pub client_token: String,
    pub worker_token: String,
    pub operator_token: String,
}

impl Env {
    pub fn from_process() -> anyhow::Result<Env> {
        let get = |name: &str| {
            std::env::var(name).map_err(|_| {
                anyhow::anyhow!(
                    "{name} is not set. The quickest way: run `onceflow dev` (or `cargo run -- dev`) \
                     in another terminal, then, here, from the directory it runs in:\n  \
                     source .onceflow/tokens.env\n\
                     Or against `onceflow serve` (PostgreSQL), mint the tokens yourself:\n  \
                     export ONCEFLOW_DATABASE_URL=postgres://…\n  \
                     onceflow serve &\n  \
                     export ONCEFLOW_URL=http://127.0.0.1:7380\n  \
                     export ONCEFLOW_CLIENT_TOKEN=$(onceflow token create --owner demo --role client)\n  \
                     export ONCEFLOW_WORKER_TOKEN=$(onceflow token create --owner '*' --role worker)\n  \
                     export ONCEFLOW_OPERATOR_TOKEN=$(onceflow token create --owner ops --role operator)"
                )
            })
        };
        Ok(Env {
            url: get("ONCEFLOW_URL")?,
            client_token: get("ONCEFLOW_CLIENT_TOKEN")?,
            worker_token: get("ONCEFLOW_WORKER_TOKEN")?,
            operator_token: get("ONCEFLOW_OPERATOR_TOKEN")?,
        })
    }
}

/// A suffix that makes this run's idempotency keys new, so the example can be re-run.
pub fn run_id() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}
