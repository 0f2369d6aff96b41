//! The `onceflow` command line.

use clap::Parser;
use onceflow_engine::cli::{run, Cli};

/// The process allocator (see engine/Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let telemetry = onceflow_engine::telemetry::init();
    let outcome = run(Cli::parse()).await;
    // Flushing spans blocks on the exporter's thread: off the async workers.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("onceflow: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
