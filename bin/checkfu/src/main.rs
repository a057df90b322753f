//! The `checkfu` binary: the command line (`cli.rs`) over the node crate
//! (`checkfu-node`) and the API client commands (`checkfu-cli`).

mod cli;

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    // Logs to stderr; spans to OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    let otlp = checkfu_node::config::Env::process().get(checkfu_node::config::env::OTLP_ENDPOINT);
    let telemetry = checkfu_telemetry::init_with("checkfu", otlp.as_deref(), true);
    let result = cli::run(cli).await;
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The chain of causes on one line, without a backtrace: the
            // messages say what to change. 2 for a usage error, else 1 (a
            // refusal prints the API's error type first).
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(checkfu_cli::exit_code(&e))
        }
    }
}
