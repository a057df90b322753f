//! The command line: `checkfu up`, `checkfu serve`.

use crate::config::FileConfig;
use crate::node::{Node, NodeOptions};
use anyhow::Context;
use checkfu_core::Role;
use checkfu_store::Location;
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "checkfu", version, about = "Checkfu: a governed managed-agents platform")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every role in one process with embedded defaults (SQLite, the
    /// in-process bus, the scripted model).
    Up {
        #[arg(long, default_value = ".checkfu")]
        data_dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:7420")]
        listen: String,
        /// Let web_fetch (and outbound webhooks) reach private, loopback and
        /// link-local addresses: local development only. Also
        /// `CHECKFU_ALLOW_PRIVATE_TARGETS=true`.
        #[arg(long)]
        allow_private_targets: bool,
        /// A config file; `up` reads its `[model_endpoints]`.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run the named roles, reaching the others over gRPC.
    Serve {
        /// Comma-separated roles, e.g. `gateway,sessions` (or `all`).
        #[arg(long)]
        roles: String,
        #[arg(long)]
        config: PathBuf,
        /// Overrides `listen` from the config file.
        #[arg(long)]
        listen: Option<String>,
        /// Overrides `internal_listen` (the mutual-TLS mesh listener).
        #[arg(long)]
        internal_listen: Option<String>,
    },
    /// Make the internal mesh's certificates: an installation CA (once, in
    /// DIR) and a certificate for one process naming the roles it plays.
    /// The Helm chart makes its own; this is for other installations.
    Certs {
        #[arg(long)]
        out: PathBuf,
        /// The file stem: writes OUT/NAME.pem and OUT/NAME-key.pem.
        #[arg(long)]
        name: String,
        /// Comma-separated roles the certificate names (or `all`).
        #[arg(long)]
        roles: String,
        #[arg(long, default_value_t = 365)]
        days: i64,
    },
    /// Apply every service's database migrations and exit (the Helm chart's
    /// pre-install/pre-upgrade hook). Storage as for `serve`.
    Migrate {
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Work with Sessions from the command line.
    Session {
        #[command(flatten)]
        client: crate::client::ClientArgs,
        #[command(subcommand)]
        action: crate::client::SessionAction,
    },
    /// List and answer ActionApprovals.
    Approvals {
        #[command(flatten)]
        client: crate::client::ClientArgs,
        #[command(subcommand)]
        action: crate::approvals_cli::ApprovalsAction,
    },
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(t) => t,
            Err(_) => {
                let _ = ctrl_c.await;
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
}

async fn run_until_signal(node: Node) {
    wait_for_signal().await;
    tracing::info!("shutting down: draining in-flight requests");
    node.stop().await;
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Session { client, action } => crate::client::session(client, action, &mut std::io::stdout()).await,
        Command::Migrate { config } => {
            let file = match config {
                Some(c) => FileConfig::load(&c)?,
                None => FileConfig::default(),
            };
            let storage = std::env::var("CHECKFU_DATABASE_URL").ok().or(file.storage.clone()).unwrap_or_else(|| ".checkfu".into());
            let location = Location::parse(&storage);
            for (service, m) in [
                ("governance", &checkfu_governance::MIGRATIONS),
                ("sessions", &checkfu_sessions::MIGRATIONS),
                ("model_gateway", &checkfu_model_gateway::MIGRATIONS),
                ("gateway", &checkfu_gateway::MIGRATIONS),
                ("webhooks", &checkfu_webhooks::MIGRATIONS),
            ] {
                checkfu_store::Db::open(&location, service, m).await.with_context(|| format!("migrating {service}"))?;
                println!("migrated {service}");
            }
            Ok(())
        }
        Command::Certs { out, name, roles, days } => {
            let roles = Role::parse_set(&roles).map_err(anyhow::Error::msg)?;
            let issued = crate::certs::issue(&out, &name, &roles, days)?;
            if issued.created_ca {
                println!("created the installation CA: {} (its key, keep it safe: {}/ca-key.pem)", issued.ca.display(), out.display());
            }
            println!(
                "wrote {} and {} for {}",
                issued.cert.display(),
                issued.key.display(),
                roles.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
            );
            Ok(())
        }
        Command::Approvals { client, action } => crate::approvals_cli::approvals(client, action, &mut std::io::stdout()).await,
        Command::Up { data_dir, listen, allow_private_targets, config } => {
            let file = match &config {
                Some(c) => FileConfig::load(c)?,
                None => FileConfig::default(),
            };
            let listener = tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("binding {listen}"))?;
            let key_file = data_dir.join("admin.key");
            let opts = NodeOptions {
                roles: Role::ALL.into_iter().collect(),
                storage: Location::SqliteDir(data_dir.clone()),
                remotes: BTreeMap::new(),
                mesh: None,
                bootstrap_key_file: Some(key_file.clone()),
                embedded: true,
                runner: checkfu_runner::RunnerConfig { workspaces: data_dir.join("workspaces"), ..Default::default() },
                sse_ping: crate::node::sse_ping_from_env(),
                approvals: crate::node::ApprovalTiming::from_env(),
                allow_private_targets: allow_private_targets || crate::node::private_targets_from_env(),
                kafka_brokers: std::env::var("CHECKFU_KAFKA_BROKERS").ok().filter(|b| !b.is_empty()),
                redis_url: std::env::var("CHECKFU_REDIS_URL").ok().filter(|u| !u.is_empty()),
                rate_limit_per_second: crate::node::rate_limit_from_env(),
                max_streams_per_principal: crate::node::max_streams_from_env(),
                auth_failures_per_window: crate::node::auth_failures_from_env(),
                sealer: crate::node::sealer_from_env()?,
                model_endpoints: file.model_endpoints(false)?,
            };
            if allow_private_targets {
                tracing::warn!("private, loopback and link-local targets are reachable by web_fetch: for local development only");
            }
            let node = Node::start(listener, opts).await?;
            println!("Checkfu is up: API base URL http://{}/v1", node.addr);
            match &node.bootstrap {
                Some(b) => println!(
                    "Bootstrapped: admin principal {} in environment {}; admin API key written to {}",
                    b.admin_principal_id,
                    b.environment_id,
                    b.key_file.display()
                ),
                None => println!(
                    "Existing installation in {}; the admin API key is in {} (if you kept it)",
                    data_dir.display(),
                    key_file.display()
                ),
            }
            run_until_signal(node).await;
            Ok(())
        }
        Command::Serve { roles, config, listen, internal_listen } => {
            let roles = Role::parse_set(&roles).map_err(anyhow::Error::msg)?;
            let file = FileConfig::load(&config)?;
            let listen = listen.or(file.listen.clone()).unwrap_or_else(|| "0.0.0.0:7420".into());
            let storage = std::env::var("CHECKFU_DATABASE_URL").ok().or(file.storage.clone()).unwrap_or_else(|| ".checkfu".into());
            let listener = tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("binding {listen}"))?;
            // Only the gateway and the runner have nothing other roles call.
            let internal = if roles.iter().any(|r| !matches!(r, Role::Gateway | Role::Runner)) {
                let at = internal_listen.or(file.internal_listen.clone()).unwrap_or_else(|| "0.0.0.0:7421".into());
                Some(tokio::net::TcpListener::bind(&at).await.with_context(|| format!("binding {at}"))?)
            } else {
                None
            };
            let mesh = file.mesh.as_ref().map(|m| crate::mesh::MeshTls::load(&m.files())).transpose()?;
            let role_names = roles.iter().map(|r| r.name()).collect::<Vec<_>>().join(",");
            let opts = NodeOptions {
                storage: Location::parse(&storage),
                remotes: file.remotes()?,
                mesh,
                bootstrap_key_file: file.bootstrap_key_file.clone(),
                embedded: false,
                runner: checkfu_runner::RunnerConfig::from_env(),
                sse_ping: crate::node::sse_ping_from_env(),
                approvals: crate::node::ApprovalTiming::from_env(),
                allow_private_targets: crate::node::private_targets_from_env(),
                kafka_brokers: std::env::var("CHECKFU_KAFKA_BROKERS").ok().filter(|b| !b.is_empty()).or(file.kafka_brokers.clone()),
                redis_url: std::env::var("CHECKFU_REDIS_URL").ok().filter(|u| !u.is_empty()).or(file.redis_url.clone()),
                rate_limit_per_second: crate::node::rate_limit_from_env(),
                max_streams_per_principal: crate::node::max_streams_from_env(),
                auth_failures_per_window: crate::node::auth_failures_from_env(),
                sealer: crate::node::sealer_from_env()?,
                model_endpoints: file.model_endpoints(false)?,
                roles,
            };
            let node = Node::start_with(listener, internal, opts).await?;
            match node.internal_addr {
                Some(internal) => println!("Checkfu serving {role_names}; mesh (mutual TLS) on {internal}; public on {}", node.addr),
                None => println!("Checkfu serving {role_names}; public on {}", node.addr),
            }
            if let Some(b) = &node.bootstrap {
                println!("Bootstrapped: admin API key written to {}", b.key_file.display());
            }
            run_until_signal(node).await;
            Ok(())
        }
    }
}
