//! `checkfu runner`: a self-hosted Runner. It pairs with an installation
//! once (a pairing code minted by `POST /v1/runner-pairings`), keeps the
//! Runner credential it receives in its data directory (mode 0600), and then
//! claims the Runs of its Environment's pool over outbound connections to the
//! installation's public port only. It runs the same agent loop and sandbox
//! tools as the managed plane; model calls, `web_fetch` and governance go to
//! the installation with the Run's capability token, so no provider or
//! Connection credential ever reaches this machine.
//!
//! On SIGTERM or Ctrl-C it stops claiming, hands its Runs back (another
//! Runner resumes them at once) and exits 0. A revoked credential ends it
//! with an error.

use anyhow::{Context, bail};
use checkfu_proto::runner::v1 as rp;
use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
use checkfu_proto::transport::{self, Transport};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

#[derive(Debug, clap::Args)]
pub struct RunnerArgs {
    /// The installation's public URL (as for the API, with or without `/v1`).
    /// Required; optional in the type only so `checkfu runner redeem` does
    /// not need it twice.
    #[arg(long, required = true)]
    server: Option<String>,
    /// The single-use code from `POST /v1/runner-pairings`; needed only the
    /// first time (the credential is kept in the data directory).
    #[arg(long)]
    pairing_code: Option<String>,
    /// The pool this Runner serves; it must be the pool the pairing named.
    #[arg(long)]
    pool: Option<String>,
    /// Where the credential and the Session workspaces are kept.
    #[arg(long, default_value = ".checkfu-runner")]
    data_dir: PathBuf,
    /// Runs executed at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// A name for this Runner, shown in `GET /v1/runners`.
    #[arg(long)]
    name: Option<String>,
    /// Run with the pairing in this file (written by the Kubernetes
    /// operator into a runner pod's credentials Secret), waiting for it to
    /// appear, instead of pairing with a code.
    #[arg(long, conflicts_with = "pairing_code")]
    credential_file: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
pub enum RunnerAction {
    /// Redeems a pairing code for a Runner credential without running: for
    /// a worker that is not `checkfu runner`, such as the Anthropic SDK's
    /// `EnvironmentWorker` on a self_hosted CMA environment, whose
    /// environment key is this credential (docs/cma.md).
    Redeem {
        /// The installation's public URL.
        #[arg(long)]
        server: String,
        /// The single-use code from `POST /v1/runner-pairings`.
        #[arg(long)]
        pairing_code: String,
        /// A name for this Runner, shown in `GET /v1/runners`.
        #[arg(long)]
        name: Option<String>,
        /// Print the credential alone on stdout (shown once: it is stored
        /// only as its digest). Without it, the pairing is written to
        /// `--data-dir` as `checkfu runner` keeps it.
        #[arg(long)]
        print_credential: bool,
        #[arg(long, default_value = ".checkfu-runner")]
        data_dir: PathBuf,
    },
}

/// Runs a `checkfu runner` subcommand.
pub async fn act(action: RunnerAction) -> anyhow::Result<()> {
    match action {
        RunnerAction::Redeem { server, pairing_code, name, print_credential, data_dir } => {
            let p = redeem(&base_url(&server)?, &pairing_code, name).await?;
            if print_credential {
                println!("{}", p.credential);
                return Ok(());
            }
            std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
            let file = data_dir.join(CREDENTIAL_FILE);
            write_paired(&file, &p)?;
            println!("paired Runner {}; its credential is in {}", p.runner_id, file.display());
            Ok(())
        }
    }
}

/// What pairing left in the data directory (or the operator wrote).
use checkfu_operator::installation::Paired;

const CREDENTIAL_FILE: &str = "runner.json";

pub(crate) fn base_url(server: &str) -> anyhow::Result<String> {
    let s = server.trim().trim_end_matches('/').trim_end_matches("/v1").trim_end_matches('/');
    if !(s.starts_with("http://") || s.starts_with("https://")) {
        bail!("--server must be an http:// or https:// URL, got {server:?}");
    }
    Ok(s.to_string())
}

pub(crate) fn channel(url: &str) -> anyhow::Result<tonic::transport::Channel> {
    let mut endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
        .with_context(|| format!("{url:?} is not a URL"))?
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30));
    if url.starts_with("https://") {
        endpoint = endpoint.tls_config(tonic::transport::ClientTlsConfig::new().with_native_roots())?;
    }
    Ok(endpoint.connect_lazy())
}

/// Every call carries the Runner credential.
fn authorized(channel: tonic::transport::Channel, credential: &str) -> anyhow::Result<Transport> {
    let value: http::HeaderValue = format!("Bearer {credential}").parse().context("the stored credential is malformed")?;
    let inner = transport::remote(channel);
    Ok(tower::util::BoxCloneSyncService::new(inner.map_request(move |mut req: transport::Request| {
        req.headers_mut().insert(http::header::AUTHORIZATION, value.clone());
        req
    })))
}

fn read_paired(path: &Path) -> anyhow::Result<Option<Paired>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            Ok(Some(serde_json::from_str(&text).with_context(|| format!("{} is damaged; remove it and pair again", path.display()))?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Written whole, then renamed over the old one: a crash leaves one or
/// the other.
fn write_paired(path: &Path, p: &Paired) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    crate::certs::write(&tmp, serde_json::to_string_pretty(p)?.as_bytes(), true)?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

/// The stored pairing, or a new one made with the code.
async fn pair(args: &RunnerArgs, url: &str, file: &Path) -> anyhow::Result<Paired> {
    if let Some(p) = read_paired(file)? {
        if p.server == url {
            return Ok(p);
        }
        if args.pairing_code.is_none() {
            bail!("{} holds a credential for {}, not {url}: pass --pairing-code to pair with {url}", file.display(), p.server);
        }
    }
    let Some(code) = &args.pairing_code else {
        bail!("this Runner is not paired yet: pass --pairing-code (from POST /v1/runner-pairings)");
    };
    let p = redeem(url, code, args.name.clone()).await?;
    write_paired(file, &p)?;
    Ok(p)
}

/// Redeems a pairing code at `url` for a new Runner.
async fn redeem(url: &str, code: &str, name: Option<String>) -> anyhow::Result<Paired> {
    let mut client = RunnerServiceClient::new(transport::remote(channel(url)?));
    let pod = crate::config::env::Pod::of(&crate::config::env::Env::process());
    let name = name.or(pod.name).unwrap_or_else(|| "runner".into());
    let r = client
        .redeem(rp::RedeemRequest { pairing_code: code.to_string(), name })
        .await
        .map_err(|s| anyhow::anyhow!("pairing failed: {}", s.message()))?
        .into_inner();
    Ok(Paired {
        server: url.to_string(),
        runner_id: r.runner_id,
        credential: r.credential,
        environment_id: r.environment_id,
        pool: r.pool,
        principal_id: r.principal_id,
    })
}

/// Waits for the operator to write this pod's pairing (a Secret volume
/// is updated by the kubelet within a minute or so).
async fn given(file: &Path, url: &str, shutdown: &CancellationToken) -> anyhow::Result<Option<Paired>> {
    let mut said = false;
    loop {
        if let Some(p) = read_paired(file)? {
            if p.server.trim_end_matches('/') != url {
                bail!("{} holds a credential for {}, not {url}", file.display(), p.server);
            }
            return Ok(Some(p));
        }
        if !said {
            println!("waiting for this Runner's credential at {}", file.display());
            said = true;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

pub async fn run(args: RunnerArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let url = base_url(args.server.as_deref().unwrap_or_default())?;
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("creating {}", args.data_dir.display()))?;
    let (paired, file) = match &args.credential_file {
        Some(f) => match given(f, &url, &shutdown).await? {
            Some(p) => (p, f.clone()),
            None => return Ok(()),
        },
        None => {
            let file = args.data_dir.join(CREDENTIAL_FILE);
            (pair(&args, &url, &file).await?, file)
        }
    };
    if let Some(pool) = &args.pool
        && pool != &paired.pool
    {
        bail!("this Runner was paired for pool {:?}, not {pool:?}: pair again with a code for {pool:?}", paired.pool);
    }
    println!(
        "Checkfu runner {} serving pool {:?} of environment {} at {url} (credential in {})",
        paired.runner_id,
        paired.pool,
        paired.environment_id,
        file.display()
    );
    let t = authorized(channel(&url)?, &paired.credential)?;
    let cfg = checkfu_runner::RunnerConfig {
        runner_id: paired.runner_id.clone(),
        concurrency: args.concurrency.clamp(1, 256),
        workspaces: args.data_dir.join("workspaces"),
        ..checkfu_runner::RunnerConfig::default()
    };
    let runner = checkfu_runner::Runner::new(t.clone(), t.clone(), t.clone(), t, cfg);
    match runner.serve(shutdown).await {
        checkfu_runner::Ended::Shutdown => {
            println!("Checkfu runner {} stopped; its Runs were handed back", paired.runner_id);
            Ok(())
        }
        checkfu_runner::Ended::Refused(why) => {
            bail!("the installation refused this Runner ({why}); if it was revoked, remove {} and pair again", file.display())
        }
    }
}
