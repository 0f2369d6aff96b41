//! The `onceflow` command line.

use clap::{Parser, Subcommand};
use onceflow_engine::Engine;

/// onceflow: a durable workflow engine whose first promise is one job per intent.
#[derive(Parser)]
#[command(name = "onceflow", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply the database migrations.
    Migrate {
        /// postgres://… (else ONCEFLOW_DATABASE_URL, else DATABASE_URL).
        #[arg(long)]
        database_url: Option<String>,
    },
}

fn database_url(flag: Option<String>) -> Result<String, String> {
    flag.or_else(|| std::env::var("ONCEFLOW_DATABASE_URL").ok())
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .ok_or_else(|| "no database: pass --database-url or set ONCEFLOW_DATABASE_URL".to_owned())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let outcome: Result<(), String> = async {
        match cli.command {
            Command::Migrate { database_url: flag } => {
                let url = database_url(flag)?;
                let engine = Engine::connect_postgres(&url, 2).await.map_err(|e| format!("{e}: {:?}", e))?;
                engine.migrate().await.map_err(|e| format!("{e}: {:?}", e))?;
                eprintln!("migrations applied");
                Ok(())
            }
        }
    }
    .await;
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("onceflow: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
