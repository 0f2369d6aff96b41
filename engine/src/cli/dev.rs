//! `onceflow dev`: everything on the embedded default, for trying onceflow with no
//! database server. SQLite at `./.onceflow/dev.db`, the server, one token per role
//! (written to `./.onceflow/tokens.env` for the examples, readable by its owner only),
//! and with `--demo` an in-process worker serving demo providers on the `demo` task
//! queue.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::http::ServerConfig;
use crate::model::Role;
use crate::Engine;

/// The variables `onceflow dev` writes, in the order written.
const TOKEN_VARS: [(&str, Role, &str); 4] = [
    ("ONCEFLOW_CLIENT_TOKEN", Role::Client, "demo"),
    ("ONCEFLOW_WORKER_TOKEN", Role::Worker, "*"),
    ("ONCEFLOW_OPERATOR_TOKEN", Role::Operator, "ops"),
    ("ONCEFLOW_ADMIN_TOKEN", Role::Admin, "admin"),
];

/// Runs the dev server until Ctrl-C / SIGTERM.
/// `config` says where and how to listen (its TLS identity already loaded).
pub async fn run(
    dir: &Path,
    demo: bool,
    config: ServerConfig,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let bind = config.bind;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let db_path = dir.join("dev.db");
    let url = format!("sqlite://{}", db_path.display());
    let engine = Engine::connect(&url, 8)
        .await
        .map_err(|e| format!("cannot open {}: {e:?}", db_path.display()))?;
    engine
        .migrate()
        .await
        .map_err(|e| format!("migration failed: {e:?}"))?;

    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| format!("cannot listen on {bind}: {e}"))?;
    let base = format!(
        "{}://{}",
        if config.tls.is_some() {
            "https"
        } else {
            "http"
        },
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let tokens = tokens(&engine, &dir.join("tokens.env")).await?;
    write_env(&dir.join("tokens.env"), &base, &tokens)?;

    println!(
        "onceflow dev: SQLite at {}, serving {base}",
        db_path.display()
    );
    println!("  ONCEFLOW_URL={base}");
    for (name, token) in &tokens {
        println!("  {name}={token}");
    }
    println!(
        "written to {} (`source {}` before running the examples)",
        dir.join("tokens.env").display(),
        dir.join("tokens.env").display()
    );

    let server = tokio::spawn(crate::http::serve_on(
        listener,
        engine,
        config,
        shutdown.clone(),
    ));
    if demo {
        let worker_token = tokens
            .iter()
            .find(|(n, _)| *n == "ONCEFLOW_WORKER_TOKEN")
            .map(|(_, t)| t.clone())
            .unwrap_or_default();
        let worker = super::demo::worker(&base, &worker_token).map_err(|e| e.to_string())?;
        println!("demo worker: providers generate@primary-llm, generate@fallback-llm (certified), charge@bank on task queue `demo`");
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let token = worker.shutdown_token();
            tokio::spawn(async move {
                stop.cancelled().await;
                token.cancel();
            });
            if let Err(e) = worker.run().await {
                tracing::error!(error = %e, "demo worker stopped");
            }
        });
    }
    server
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("server failed: {e}"))
}

/// The tokens of `tokens.env` if they still work on this database, else new ones.
async fn tokens(engine: &Engine, env_file: &Path) -> Result<Vec<(&'static str, String)>, String> {
    let existing = std::fs::read_to_string(env_file).unwrap_or_default();
    let mut tokens = Vec::new();
    for (name, role, owner) in TOKEN_VARS {
        let previous = existing.lines().find_map(|line| {
            let line = line.trim().trim_start_matches("export ");
            line.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
                .map(str::to_owned)
        });
        let reusable = match &previous {
            Some(token) => engine
                .authenticate(token)
                .await
                .map(|p| p.role == role)
                .unwrap_or(false),
            None => false,
        };
        let token = match (reusable, previous) {
            (true, Some(token)) => token,
            _ => {
                engine
                    .create_token(owner, role)
                    .await
                    .map_err(|e| e.to_string())?
                    .token
            }
        };
        tokens.push((name, token));
    }
    Ok(tokens)
}

/// Writes `tokens.env`: readable and writable by its owner only (mode 0600), also when
/// it existed with a wider mode. The text goes to a new file created with that mode, which
/// then replaces the old one, so the tokens are never in a file others may read (nor
/// reach a reader that opened the old file while its mode was wider).
fn write_env(path: &Path, base: &str, tokens: &[(&'static str, String)]) -> Result<(), String> {
    let mut text = format!("# Written by `onceflow dev`: `source` this file to use the dev server.\nexport ONCEFLOW_URL={base}\n");
    for (name, token) in tokens {
        text.push_str(&format!("export {name}={token}\n"));
    }
    write_private(path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Replaces `path` with a file of mode 0600 holding `text`.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let temporary = path.with_file_name(name);
    // A leftover of an interrupted write may have any mode: start afresh.
    match std::fs::remove_file(&temporary) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path)
}
