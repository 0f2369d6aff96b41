//! The `onceflow` command line: the server, migrations, tokens, and the operator
//! commands (which talk to a running server over HTTP).

pub mod bench;
mod demo;
mod dev;
mod jobs;
mod operator;
mod schedules;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use onceflow_worker::SecretToken;
use tokio_util::sync::CancellationToken;

use crate::http::{ServerConfig, ServerTls};
use crate::model::Role;
use crate::{ConnectSettings, Engine};

/// onceflow: a durable workflow engine whose first promise is one job per intent.
///
/// Its `Debug` shows no token given on the command line or in the environment (tokens
/// are held as [`SecretToken`]).
#[derive(Parser, Debug)]
#[command(name = "onceflow", version, about)]
pub struct Cli {
    /// Threads of the process's async runtime (at least 1). Default: one per CPU, except
    /// `bench` (and its worker process): 1, which leaves the other cores to a
    /// PostgreSQL on the same machine (see docs/performance.md).
    #[arg(long, global = true, env = "ONCEFLOW_THREADS", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// The number of runtime threads this command runs on; `None` for the runtime's
    /// default (one per CPU).
    pub fn runtime_threads(&self) -> Option<usize> {
        match (self.threads, &self.command) {
            (Some(n), _) => Some(usize::from(n)),
            (None, Command::Bench(_) | Command::BenchWorker(_)) => Some(1),
            (None, _) => None,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Everything on the embedded default (SQLite at ./.onceflow/dev.db), no database
    /// server needed; prints one token per role and writes them to ./.onceflow/tokens.env.
    Dev(DevArgs),
    /// Run the HTTP server (and the lease reaper) against a database.
    Serve(ServeArgs),
    /// Apply the database migrations (and, with --citus, distribute the tables on Citus).
    Migrate(MigrateArgs),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Operator commands on attempts (against a running server).
    #[command(subcommand)]
    Attempts(AttemptsCommand),
    /// Read jobs (against a running server).
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Cron schedules of the token's owner (against a running server, with a client token).
    #[command(subcommand)]
    Schedules(SchedulesCommand),
    /// Measure throughput and latency (an in-process server, or a running one with --url);
    /// prints one `RESULT …` line per workload.
    Bench(bench::BenchArgs),
    /// The SDK worker of `onceflow bench --worker-process`, run by the bench as a child
    /// process (not for direct use).
    #[command(hide = true)]
    BenchWorker(bench::BenchWorkerArgs),
}

#[derive(Args, Debug)]
struct DatabaseArgs {
    /// postgres://… (several servers: postgres://USER@H1:PORT,H2:PORT/DB?target_session_attrs=read-write)
    /// or sqlite://PATH; else ONCEFLOW_DATABASE_URL, else DATABASE_URL.
    #[arg(long)]
    database_url: Option<String>,
}

#[derive(Args, Debug)]
struct MigrateArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// After migrating, distribute every table not yet distributed on Citus (the database
    /// must have the `citus` extension and its worker nodes): by `owner_id`, colocated with
    /// `jobs`; `api_tokens`, `contracts` and `certifications` as reference tables.
    /// Idempotent: run it again after every upgrade. Fails if a table is left neither
    /// distributed nor a reference table.
    #[arg(long)]
    citus: bool,
    /// With --citus: the number of shards of the tables distributed now (Citus's
    /// `citus.shard_count`, 32, when not given).
    #[arg(long, requires = "citus", value_parser = clap::value_parser!(u32).range(1..))]
    shard_count: Option<u32>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7380")]
    bind: SocketAddr,
    /// Do not apply migrations at start.
    #[arg(long)]
    no_migrate: bool,
    /// How often the lease reaper runs.
    #[arg(long, default_value_t = 1000)]
    reaper_interval_ms: u64,
    /// Largest accepted request body.
    #[arg(long, default_value_t = 1024 * 1024)]
    body_limit_bytes: usize,
    /// Longest a request (other than a long-poll) may take.
    #[arg(long, default_value_t = 30_000)]
    request_timeout_ms: u64,
    /// Database connections in the pool (at least 6 on PostgreSQL: the LISTEN relay, a
    /// worker's poll cycle, the reaper, the scheduler and retention each need theirs). If
    /// the server has room for fewer it is lowered to fit, never below 6: with less room
    /// than that, `serve` exits with a message saying so.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(i64::from(crate::store::postgres::MIN_POOL_CONNECTIONS)..))]
    max_connections: u32,
    /// PostgreSQL `statement_timeout` of every pooled connection, in milliseconds (0: none).
    /// A statement that runs longer is cancelled and its request answers 503 `unavailable`.
    /// Migrations and retention run without it.
    #[arg(long, default_value_t = 30_000)]
    statement_timeout_ms: u64,
    /// PostgreSQL `idle_in_transaction_session_timeout` of every pooled connection, in
    /// milliseconds (0: none): a session holding a transaction open without a statement
    /// this long is ended by the server, its transaction rolled back and its locks released.
    #[arg(long, default_value_t = 60_000)]
    idle_in_transaction_timeout_ms: u64,
    /// Delete finished jobs this long after they finished (e.g. `30d`, `12h`), with their
    /// activities, attempts and events; their idempotency keys are free again afterwards.
    /// Without it, jobs are kept for ever.
    #[arg(long, value_parser = retention_arg)]
    retention: Option<Duration>,
    #[command(flatten)]
    listener: ListenerArgs,
}

/// The HTTP listener: TLS and its limits (`serve` and `dev`).
#[derive(Args, Debug)]
struct ListenerArgs {
    /// Serve HTTPS with this certificate chain (PEM: the server's certificate first, then
    /// any intermediates). Needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Close a connection whose request head (request line and headers), or TLS
    /// handshake, has not fully arrived within this; an idle keep-alive connection is
    /// closed after it too.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    header_read_timeout_ms: u64,
    /// At most this many HTTP connections at once; more wait until one closes (the
    /// database pool is --max-connections).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    max_http_connections: u32,
}

impl ListenerArgs {
    /// `config` with the listener's settings; the certificate and key are read now, so a
    /// bad file stops the command before anything else starts.
    fn apply(&self, config: ServerConfig) -> Result<ServerConfig, String> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(
                ServerTls::from_pem_files(cert, key)
                    .map_err(|e| format!("cannot serve TLS: {e}"))?,
            ),
            (None, None) => None,
            _ => return Err("--tls-cert and --tls-key go together".to_owned()),
        };
        Ok(ServerConfig {
            tls,
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            max_http_connections: usize::try_from(self.max_http_connections).unwrap_or(usize::MAX),
            ..config
        })
    }
}

/// A retention period: a duration such as `30d`, `12h`, `90m` or `1h 30m`, from 1 s to
/// 100 years.
fn retention_arg(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d < Duration::from_secs(1) => Err("a retention must be at least 1s".to_owned()),
        Ok(d) if d > Duration::from_secs(100 * 365 * 24 * 3600) => {
            Err("a retention must be at most 100 years (omit it to keep jobs for ever)".to_owned())
        }
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (expected a duration such as 30d, 12h or 90m)")),
    }
}

#[derive(Args, Debug)]
struct DevArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7380")]
    bind: SocketAddr,
    /// Where the database and tokens.env live.
    #[arg(long, default_value = ".onceflow")]
    dir: std::path::PathBuf,
    /// Also run an in-process worker with demo providers on the `demo` task queue.
    #[arg(long)]
    demo: bool,
    /// How often the lease reaper runs.
    #[arg(long, default_value_t = 1000)]
    reaper_interval_ms: u64,
    /// Delete finished jobs this long after they finished (e.g. `7d`); kept for ever
    /// without it.
    #[arg(long, value_parser = retention_arg)]
    retention: Option<Duration>,
    #[command(flatten)]
    listener: ListenerArgs,
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Mint a token; prints the token alone on stdout.
    Create {
        /// The owner the token acts for (`*` for platform workers).
        #[arg(long)]
        owner: String,
        /// client, worker, operator or admin.
        #[arg(long)]
        role: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

/// Where the server is and how to authenticate, as given on the command line. Its
/// `Debug` shows no token.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The server's base URL (`https://…` trusts the system's roots plus the PEM file
    /// named by ONCEFLOW_CA_CERT), or several servers' separated by commas: a request
    /// moves on from one that cannot be reached. Optional.
    #[arg(long, env = "ONCEFLOW_URL", default_value = DEFAULT_URL)]
    url: String,
    /// The API token. Optional: without it, the role's variable that `onceflow dev`
    /// writes to tokens.env is used (ONCEFLOW_OPERATOR_TOKEN for `attempts`, that or
    /// ONCEFLOW_CLIENT_TOKEN for `jobs show`, ONCEFLOW_CLIENT_TOKEN for `schedules` and `jobs signal`).
    #[arg(long, env = "ONCEFLOW_TOKEN", hide_env_values = true)]
    token: Option<SecretToken>,
}

/// The server's default base URL, `onceflow dev`'s and `serve`'s default address.
const DEFAULT_URL: &str = "http://127.0.0.1:7380";

/// A server to call and the token to call it with, resolved from [`ServerArgs`] and the
/// environment. Its `Debug` shows no token.
#[derive(Debug, Clone)]
pub struct Server {
    url: String,
    token: SecretToken,
}

impl ServerArgs {
    /// The server and token: `--url`, else `ONCEFLOW_URL`, else [`DEFAULT_URL`]; `--token`,
    /// else `ONCEFLOW_TOKEN`, else the first of `role_variables` that is set (non-empty).
    /// The error names every flag and variable that was tried.
    fn resolve(self, role_variables: &[&str]) -> Result<Server, String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let url = self.url;
        let token = self
            .token
            .or_else(|| {
                role_variables
                    .iter()
                    .find_map(|name| env(name).map(SecretToken::from))
            })
            .ok_or_else(|| {
                format!(
                    "no token: pass --token, or set ONCEFLOW_TOKEN or {} (`source .onceflow/tokens.env` after `onceflow dev` sets them)",
                    role_variables.join(" or ")
                )
            })?;
        Ok(Server { url, token })
    }
}

/// The role variables of operator commands (`attempts`).
const OPERATOR_TOKEN: &[&str] = &["ONCEFLOW_OPERATOR_TOKEN"];
/// `jobs show` and `jobs resume`: an operator acts on every owner's jobs, a client on its
/// own.
const READER_TOKEN: &[&str] = &["ONCEFLOW_OPERATOR_TOKEN", "ONCEFLOW_CLIENT_TOKEN"];
/// The role variables of `schedules` and `jobs signal` (a client's own jobs).
const CLIENT_TOKEN: &[&str] = &["ONCEFLOW_CLIENT_TOKEN"];

#[derive(Subcommand, Debug)]
enum AttemptsCommand {
    /// List stuck attempts across owners, oldest first. By default the same list as the
    /// web UI's Stuck page: every `unknown` attempt, whatever its age, and every attempt
    /// `started` for 60s or more.
    Stuck {
        /// Only attempts in their status for at least this long, e.g. 0s, 60s, 5m, 2h
        /// (`unknown` ones included). Default: `unknown` of any age, `started` for 60s.
        #[arg(long)]
        older_than: Option<String>,
        /// Comma-separated statuses (default: started,unknown).
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Cancel a live attempt out-of-band, with a reason.
    Cancel {
        /// The attempt's id.
        id: String,
        /// Why (required; recorded on the attempt).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Subcommand, Debug)]
enum JobsCommand {
    /// Show a job's timeline: activities, attempts, who cancelled what and why, races lost.
    Show {
        /// The job's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Send a signal to a workflow job (`ctx.wait_signal(NAME)` takes it). One signal per
    /// key: sending again with the same --key records nothing new.
    Signal {
        /// The workflow job's id.
        id: String,
        /// The signal's name, e.g. approve.
        name: String,
        /// Its payload, JSON (default: null).
        #[arg(long)]
        payload: Option<String>,
        /// Its Idempotency-Key (default: a fresh one, printed).
        #[arg(long)]
        key: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Resume a failed job (or a parked workflow) under its own id and key: it runs
    /// again, completed steps replayed, the failed step run again. With an operator
    /// token for any owner's job, a client token for the owner's own.
    Resume {
        /// The job's id.
        id: String,
        /// Why (required; recorded in the job's history as `job_resumed`).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Subcommand, Debug)]
enum SchedulesCommand {
    /// List the owner's schedules: cron, state, next and last tick, counters.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show a schedule and its latest events (fired, skipped for overlap, skipped as too old).
    Show {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Pause a schedule: no tick fires until it is resumed.
    Pause {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Resume a schedule from its first tick after now.
    Resume {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

fn database_url(args: &DatabaseArgs) -> Result<String, String> {
    args.database_url
        .clone()
        .or_else(|| std::env::var("ONCEFLOW_DATABASE_URL").ok())
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or_else(|| {
            "no database: pass --database-url postgres://… (or sqlite://PATH), or set \
             ONCEFLOW_DATABASE_URL or DATABASE_URL"
                .to_owned()
        })
}

/// The one-line message for a PostgreSQL database that does not exist (SQLSTATE 3D000)
/// at `url`, saying how to create it; `None` for any other error.
fn missing_database(url: &str, error: &crate::error::StoreError) -> Option<String> {
    let crate::error::StoreError::Database(sqlx::Error::Database(db)) = error else {
        return None;
    };
    if db.code().as_deref() != Some("3D000") {
        return None;
    }
    let options: sqlx::postgres::PgConnectOptions = url.parse().ok()?;
    let name = options.get_database().unwrap_or(options.get_username());
    let (host, port, user) = (
        options.get_host(),
        options.get_port(),
        options.get_username(),
    );
    Some(format!(
        "the database `{name}` does not exist on {host}:{port}: create it first \
         (`createdb -h {host} -p {port} -U {user} {name}`, or `CREATE DATABASE \"{name}\";` \
         in psql), then run this again (migrations create the tables)"
    ))
}

async fn connect(args: &DatabaseArgs, max_connections: u32) -> Result<Engine, String> {
    connect_with(
        args,
        &ConnectSettings::with_max_connections(max_connections),
    )
    .await
}

async fn connect_with(args: &DatabaseArgs, settings: &ConnectSettings) -> Result<Engine, String> {
    let url = database_url(args)?;
    Engine::connect_with(&url, settings)
        .await
        .map_err(|e| match e {
            crate::EngineError::InvalidRequest(message) => message,
            crate::EngineError::Unavailable(source) => missing_database(&url, &source)
                .unwrap_or_else(|| {
                    format!(
                        "cannot connect to the database: {}",
                        onceflow_worker::with_causes(&source)
                    )
                }),
            other => format!(
                "cannot connect to the database: {}",
                onceflow_worker::with_causes(&other)
            ),
        })
}

/// `onceflow migrate --citus`: distributes the tables (see
/// [`crate::store::postgres::PgStore::distribute`]) and fails if any is left neither
/// distributed nor a reference table.
async fn distribute(args: &DatabaseArgs, shard_count: Option<u32>) -> Result<(), String> {
    let url = database_url(args)?;
    if !url.starts_with("postgres") {
        return Err("--citus needs a PostgreSQL database with the citus extension".into());
    }
    let store = crate::store::postgres::PgStore::connect(&url, 2)
        .await
        .map_err(|e| {
            format!(
                "cannot connect to the database: {}",
                onceflow_worker::with_causes(&e)
            )
        })?;
    if !store.citus().await.map_err(|e| e.to_string())? {
        return Err("--citus: the database has no citus extension (CREATE EXTENSION citus, and add the worker nodes, first)".into());
    }
    let left = store.distribute(shard_count).await.map_err(|e| {
        format!(
            "distributing the tables failed: {}",
            onceflow_worker::with_causes(&e)
        )
    })?;
    if !left.is_empty() {
        return Err(format!(
            "tables neither distributed nor reference tables: {} (a table without owner_id?)",
            left.join(", ")
        ));
    }
    eprintln!("tables distributed on Citus");
    Ok(())
}

/// Runs the command line; the error is printed by `main`.
pub async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Dev(args) => {
            let config = args.listener.apply(ServerConfig {
                bind: args.bind,
                reaper_interval: Duration::from_millis(args.reaper_interval_ms.max(10)),
                retention: args.retention,
                ..ServerConfig::default()
            })?;
            let shutdown = CancellationToken::new();
            tokio::spawn(stop_on_signal(shutdown.clone()));
            dev::run(&args.dir, args.demo, config, shutdown).await
        }
        Command::Serve(args) => serve(args).await,
        Command::Migrate(args) => {
            let engine = connect(&args.database, 2).await?;
            engine
                .migrate()
                .await
                .map_err(|e| format!("migration failed: {}", onceflow_worker::with_causes(&e)))?;
            eprintln!("migrations applied");
            if args.citus {
                distribute(&args.database, args.shard_count).await?;
            }
            Ok(())
        }
        Command::Token(TokenCommand::Create {
            owner,
            role,
            database,
        }) => {
            let role = Role::parse(&role)
                .ok_or("--role must be one of client, worker, operator, admin")?;
            let engine = connect(&database, 2).await?;
            let issued = engine
                .create_token(&owner, role)
                .await
                .map_err(|e| e.to_string())?;
            println!("{}", issued.token);
            Ok(())
        }
        Command::Attempts(AttemptsCommand::Stuck {
            older_than,
            status,
            server,
        }) => {
            let ages = match older_than {
                Some(age) => operator::StuckAges::same(parse_age(&age)?),
                None => operator::StuckAges::STUCK_PAGE,
            };
            let server = server.resolve(OPERATOR_TOKEN)?;
            operator::stuck(&server, ages, status.as_deref()).await
        }
        Command::Attempts(AttemptsCommand::Cancel { id, reason, server }) => {
            operator::cancel(&server.resolve(OPERATOR_TOKEN)?, &id, &reason).await
        }
        Command::Jobs(JobsCommand::Show { id, server }) => {
            operator::show_job(&server.resolve(READER_TOKEN)?, &id).await
        }
        Command::Jobs(JobsCommand::Signal {
            id,
            name,
            payload,
            key,
            server,
        }) => {
            jobs::signal(
                &server.resolve(CLIENT_TOKEN)?,
                &id,
                &name,
                payload.as_deref(),
                key,
            )
            .await
        }
        Command::Jobs(JobsCommand::Resume { id, reason, server }) => {
            jobs::resume(&server.resolve(READER_TOKEN)?, &id, &reason).await
        }
        Command::Schedules(SchedulesCommand::List { server }) => {
            schedules::list(&server.resolve(CLIENT_TOKEN)?).await
        }
        Command::Schedules(SchedulesCommand::Show { name, server }) => {
            schedules::show(&server.resolve(CLIENT_TOKEN)?, &name).await
        }
        Command::Schedules(SchedulesCommand::Pause { name, server }) => {
            schedules::set_paused(&server.resolve(CLIENT_TOKEN)?, &name, true).await
        }
        Command::Schedules(SchedulesCommand::Resume { name, server }) => {
            schedules::set_paused(&server.resolve(CLIENT_TOKEN)?, &name, false).await
        }
        Command::Bench(args) => bench::run(args).await,
        Command::BenchWorker(args) => bench::run_worker_process(args).await,
    }
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    // The certificate and key first: a bad file fails at once, before the database.
    let config = args.listener.apply(ServerConfig {
        bind: args.bind,
        body_limit_bytes: args.body_limit_bytes,
        request_timeout: Duration::from_millis(args.request_timeout_ms),
        reaper_interval: Duration::from_millis(args.reaper_interval_ms.max(10)),
        retention: args.retention,
        ..ServerConfig::default()
    })?;
    let settings = ConnectSettings {
        max_connections: args.max_connections,
        statement_timeout: Duration::from_millis(args.statement_timeout_ms),
        idle_in_transaction_timeout: Duration::from_millis(args.idle_in_transaction_timeout_ms),
    };
    let engine = connect_with(&args.database, &settings).await?;
    if !args.no_migrate {
        engine
            .migrate()
            .await
            .map_err(|e| format!("migration failed: {}", onceflow_worker::with_causes(&e)))?;
    }
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.bind))?;
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    crate::http::serve_on(listener, engine, config, shutdown)
        .await
        .map_err(|e| format!("server failed: {e}"))?;
    tracing::info!("onceflow stopped");
    Ok(())
}

async fn stop_on_signal(shutdown: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    shutdown.cancel();
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down: no new connections; finishing in-flight requests");
    shutdown.cancel();
}

/// Parses `60`, `60s`, `5m`, `2h`, `1d` into seconds.
fn parse_age(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("cannot read the age `{text}` (try 60s, 5m, 2h)"))?;
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("unknown unit in `{text}` (use s, m, h or d)")),
    };
    Ok(n * factor)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Cli;

    #[test]
    fn no_debug_output_of_the_parsed_command_line_contains_a_token() {
        const TOKEN: &str = "of_s3cr3t-token-value";
        let command_lines: [&[&str]; 8] = [
            &["onceflow", "attempts", "stuck", "--token", TOKEN],
            &[
                "onceflow", "attempts", "cancel", "a1", "--reason", "stuck", "--token", TOKEN,
            ],
            &["onceflow", "jobs", "show", "j1", "--token", TOKEN],
            &["onceflow", "schedules", "list", "--token", TOKEN],
            &[
                "onceflow",
                "schedules",
                "pause",
                "nightly",
                "--token",
                TOKEN,
            ],
            &[
                "onceflow",
                "bench",
                "--url",
                "http://127.0.0.1:7380",
                "--client-token",
                TOKEN,
                "--worker-token",
                TOKEN,
            ],
            &[
                "onceflow",
                "bench-worker",
                "--url",
                "http://127.0.0.1:7380",
                "--worker-token",
                TOKEN,
                "--worker-id",
                "w",
                "--task-queue",
                "q",
                "--activity",
                "a",
                "--concurrency",
                "1",
            ],
            &[
                "onceflow",
                "--threads",
                "2",
                "schedules",
                "resume",
                "nightly",
                "--token",
                TOKEN,
            ],
        ];
        for args in command_lines {
            let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            for debug in [format!("{cli:?}"), format!("{cli:#?}")] {
                assert!(
                    !debug.contains("s3cr3t"),
                    "{args:?} shows the token: {debug}"
                );
                assert!(debug.contains("<redacted>"), "{args:?}: {debug}");
            }
        }
    }

    #[test]
    fn ages_read_with_units() {
        assert_eq!(super::parse_age("60s"), Ok(60));
        assert_eq!(super::parse_age("5m"), Ok(300));
        assert_eq!(super::parse_age("2h"), Ok(7200));
        assert_eq!(super::parse_age("90"), Ok(90));
        assert!(super::parse_age("5 weeks").is_err());
    }
}
