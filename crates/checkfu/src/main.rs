use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn,h2=warn,tower=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    checkfu::cli::run(checkfu::cli::Cli::parse()).await
}
