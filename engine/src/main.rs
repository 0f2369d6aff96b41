//! The `onceflow` command line.

use clap::Parser;
use onceflow_engine::cli::{run, Cli};

/// The process allocator (see engine/Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // One rustls crypto provider for the whole process, before any TLS is set up (sqlx's
    // verify-ca relies on the process default).
    onceflow_engine::store::postgres::ensure_crypto_provider();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = cli.runtime_threads() {
        runtime.worker_threads(threads);
    }
    let runtime = match runtime.build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("onceflow: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(async_main(cli))
}

async fn async_main(cli: Cli) -> std::process::ExitCode {
    let telemetry = onceflow_engine::telemetry::init();
    let outcome = run(cli).await;
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
