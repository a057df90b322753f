use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs to stderr; spans to OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    let telemetry = checkfu_telemetry::init("checkfu");
    let result = checkfu::cli::run(checkfu::cli::Cli::parse()).await;
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    result
}
