//! `checkfu sandbox-agent`: the agent in a Kubernetes sandbox pod (see
//! `checkfu_runner::agent`). Its init container runs it with `--install`
//! to copy this binary into the pod's agent volume, so the pod's own image
//! needs nothing of Checkfu.

use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct SandboxAgentArgs {
    /// Copy this binary to DIR/checkfu and exit (the init container).
    #[arg(long, value_name = "DIR")]
    install: Option<PathBuf>,
    /// The workspace the tools work in.
    #[arg(long, default_value = "/workspace")]
    workspace: PathBuf,
    /// Where to listen.
    #[arg(long, default_value = "0.0.0.0:7070")]
    listen: String,
}

pub async fn run(args: SandboxAgentArgs, shutdown: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
    if let Some(dir) = args.install {
        let me = std::env::current_exe().context("finding this executable")?;
        let to = dir.join("checkfu");
        std::fs::copy(&me, &to).with_context(|| format!("copying {} to {}", me.display(), to.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o555)).context("making the agent executable")?;
        println!("installed the sandbox agent at {}", to.display());
        return Ok(());
    }
    use crate::config::env::{Env, SANDBOX_AGENT_TOKEN};
    let token = Env::process()
        .get(SANDBOX_AGENT_TOKEN)
        .with_context(|| format!("{SANDBOX_AGENT_TOKEN} is not set (the Sandbox's Secret provides it)"))?;
    // Commands the tools start get a clean environment: the token is not in it.
    let agent = checkfu_runner::agent::Agent::new(args.workspace.clone(), &token).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&args.workspace).with_context(|| format!("creating {}", args.workspace.display()))?;
    let listener = tokio::net::TcpListener::bind(&args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    println!("sandbox agent listening on {} for {}", listener.local_addr()?, args.workspace.display());
    agent.serve(listener, shutdown).await.map_err(anyhow::Error::msg)
}
