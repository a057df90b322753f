//! The command line: `checkfu up`, `checkfu serve`.

use anyhow::Context;
use checkfu_core::Role;
use checkfu_node::config::{Config, Env, Loaded, Mode};
use checkfu_node::node::Node;
use checkfu_node::options::NodeOptions;
use clap::{Parser, Subcommand};
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
        #[command(flatten)]
        settings: Settings,
        /// Let web_fetch (and outbound webhooks) reach private, loopback and
        /// link-local addresses: local development only.
        #[arg(long)]
        allow_private_targets: bool,
        /// Offer the `fake` provider for provider triggers (tests and local
        /// development only; never in production).
        #[arg(long)]
        test_providers: bool,
    },
    /// Run the named roles, reaching the others over gRPC.
    Serve {
        /// Comma-separated roles, e.g. `gateway,sessions` (or `all`).
        #[arg(long)]
        roles: String,
        #[command(flatten)]
        settings: Settings,
        /// The mutual-TLS mesh listener (`internal_listen`).
        #[arg(long)]
        internal_listen: Option<String>,
    },
    /// Print the effective configuration (defaults, file, `CHECKFU_*`
    /// environment and flags), secrets redacted, and where each value that
    /// is not a default came from. Exits 1 when it is not valid.
    Config {
        #[command(flatten)]
        settings: Settings,
        /// Which command's defaults to start from.
        #[arg(long, value_enum, default_value = "up")]
        mode: Mode,
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
        #[command(flatten)]
        settings: Settings,
    },
    /// A self-hosted Runner: pair once with a code from `POST
    /// /v1/runner-pairings`, then claim and run the pool's Runs.
    #[command(subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
    Runner {
        #[command(flatten)]
        args: checkfu_node::self_hosted::RunnerArgs,
        #[command(subcommand)]
        action: Option<checkfu_node::self_hosted::RunnerAction>,
    },
    /// The Kubernetes operator: keeps `Runner` and `Sandbox` resources
    /// (docs/operator.md).
    Operator {
        #[command(flatten)]
        args: checkfu_node::operator::OperatorArgs,
    },
    /// The agent in a Kubernetes sandbox pod: serves a Session's sandbox
    /// tools to its runner (the operator's pods run it; not for people).
    SandboxAgent {
        #[command(flatten)]
        args: checkfu_node::sandbox_agent::SandboxAgentArgs,
    },
    /// Inside a local sandbox: relay `--listen` to the egress socket and run
    /// the command (the runner starts it; not for people).
    SandboxRelay {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long, default_value = "127.0.0.1:3128")]
        listen: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Credential keys: `rewrap` after a key rotation (beside the store and
    /// key file; storage as for `serve`).
    Credentials {
        #[command(flatten)]
        settings: Settings,
        #[command(subcommand)]
        action: checkfu_node::credentials::CredentialsAction,
    },
    /// The API client commands (docs/cli.md).
    #[command(flatten)]
    Api(checkfu_cli::Command),
}

/// The flags every command that runs roles shares; each overrides a
/// configuration key (see `checkfu config`).
#[derive(Debug, clap::Args)]
pub struct Settings {
    /// A TOML configuration file (docs/configuration.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// `data_dir`: SQLite stores, workspaces and keys (default `.checkfu`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// `listen`: the public listener.
    #[arg(long)]
    listen: Option<String>,
}

impl Settings {
    /// The validated configuration for `mode`, with `extra` flags on top.
    fn load(&self, mode: Mode, extra: Vec<(&'static str, toml::Value, &'static str)>) -> anyhow::Result<Loaded> {
        let mut flags = extra;
        if let Some(dir) = &self.data_dir {
            flags.push(("data_dir", toml::Value::String(dir.display().to_string()), "data-dir"));
        }
        if let Some(listen) = &self.listen {
            flags.push(("listen", toml::Value::String(listen.clone()), "listen"));
        }
        Ok(Config::load(mode, self.config.as_deref(), &Env::process(), &flags)?)
    }
}

/// Listens for SIGTERM or Ctrl-C. The handlers are installed before this
/// returns, not when the future is first polled: a signal that arrives right
/// after start-up (a supervisor stopping a process it just launched) must
/// take the graceful path, not the default one that kills the process.
fn signal_received() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let listeners = signal(SignalKind::terminate()).and_then(|t| Ok((t, signal(SignalKind::interrupt())?)));
        async move {
            match listeners {
                Ok((mut term, mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A token cancelled on SIGTERM or Ctrl-C (saying `why`).
fn cancelled_on_signal(why: &'static str) -> tokio_util::sync::CancellationToken {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    let signal = signal_received();
    tokio::spawn(async move {
        signal.await;
        tracing::info!("{why}");
        stop.cancel();
    });
    shutdown
}

async fn run_until_signal(node: Node, signal: impl std::future::Future<Output = ()>) {
    signal.await;
    tracing::info!("shutting down: draining in-flight requests");
    node.stop().await;
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Api(command) => checkfu_cli::run(command).await,
        Command::Migrate { settings } => {
            let config = settings.load(Mode::Serve, vec![])?;
            checkfu_node::roles::migrate(&config.location(), |service| println!("migrated {service}")).await
        }
        Command::Config { settings, mode } => {
            let config = settings.load(mode, vec![])?;
            print!("{}", config.render());
            Ok(())
        }
        Command::Certs { out, name, roles, days } => {
            let roles = Role::parse_set(&roles).map_err(anyhow::Error::msg)?;
            let issued = checkfu_node::certs::issue(&out, &name, &roles, days)?;
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
        Command::Runner { action: Some(action), .. } => checkfu_node::self_hosted::act(action).await,
        Command::Runner { args, action: None } => {
            checkfu_node::self_hosted::run(args, cancelled_on_signal("stopping: handing Runs back")).await
        }
        Command::Operator { args } => checkfu_node::operator::run(args, cancelled_on_signal("stopping: giving the leader lease up")).await,
        Command::SandboxAgent { args } => checkfu_node::sandbox_agent::run(args, cancelled_on_signal("stopping")).await,
        Command::SandboxRelay { socket, listen, command } => {
            let code = checkfu_runner::egress::relay(socket, &listen, command).await;
            std::process::exit(code)
        }
        Command::Credentials { settings, action } => {
            let config = settings.load(Mode::Serve, vec![])?;
            checkfu_node::credentials::credentials(&config, action, &mut std::io::stdout()).await
        }
        Command::Up { settings, allow_private_targets, test_providers } => {
            let flag = allow_private_targets.then_some(("allow_private_targets", toml::Value::Boolean(true), "allow-private-targets"));
            let test = test_providers.then_some(("test_providers", toml::Value::Boolean(true), "test-providers"));
            let config = settings.load(Mode::Up, flag.into_iter().chain(test).collect())?;
            let files = checkfu_node::open_files::raise_soft_limit(None);
            tracing::debug!(?files, "open-file limit");
            let listener = tokio::net::TcpListener::bind(&config.listen).await.with_context(|| format!("binding {}", config.listen))?;
            let opts = NodeOptions::from_config(&config, Role::ALL.into_iter().collect(), true)?;
            if config.allow_private_targets {
                tracing::warn!("private, loopback and link-local targets are reachable by web_fetch: for local development only");
            }
            let node = Node::start(listener, opts).await?;
            let signal = signal_received();
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
                    config.data_dir.display(),
                    config.bootstrap_key_file().display()
                ),
            }
            run_until_signal(node, signal).await;
            Ok(())
        }
        Command::Serve { roles, settings, internal_listen } => {
            let roles = Role::parse_set(&roles).map_err(anyhow::Error::msg)?;
            let flag = internal_listen.map(|at| ("internal_listen", toml::Value::String(at), "internal-listen"));
            let config = settings.load(Mode::Serve, flag.into_iter().collect())?;
            let files = checkfu_node::open_files::raise_soft_limit(None);
            tracing::debug!(?files, "open-file limit");
            let listener = tokio::net::TcpListener::bind(&config.listen).await.with_context(|| format!("binding {}", config.listen))?;
            // Only the gateway and the runner have nothing other roles call.
            let internal = if roles.iter().any(|r| !matches!(r, Role::Gateway | Role::Runner)) {
                let at = &config.internal_listen;
                Some(tokio::net::TcpListener::bind(at).await.with_context(|| format!("binding {at}"))?)
            } else {
                None
            };
            let role_names = roles.iter().map(|r| r.name()).collect::<Vec<_>>().join(",");
            let opts = NodeOptions::from_config(&config, roles, false)?;
            let node = Node::start_with(listener, internal, opts).await?;
            let signal = signal_received();
            match node.internal_addr {
                Some(internal) => println!("Checkfu serving {role_names}; mesh (mutual TLS) on {internal}; public on {}", node.addr),
                None => println!("Checkfu serving {role_names}; public on {}", node.addr),
            }
            if let Some(b) = &node.bootstrap {
                println!("Bootstrapped: admin API key written to {}", b.key_file.display());
            }
            run_until_signal(node, signal).await;
            Ok(())
        }
    }
}
