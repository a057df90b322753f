//! `checkfu operator`: the Kubernetes operator (`checkfu_operator`) in
//! Checkfu's own image, with its calls to the installation made over the
//! public API: `POST /v1/runner-pairings` with the Runner's installation API
//! key, `Redeem` on the runner protocol, `POST /v1/runners/{id}/revoke`.

use anyhow::Context;
use checkfu_operator::error::Error;
use checkfu_operator::installation::{Fut, Installation, PairRequest, Paired};
use checkfu_proto::runner::v1 as rp;
use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct OperatorArgs {
    /// Watch only this namespace (default: every namespace its RBAC allows).
    #[arg(long, env = "CHECKFU_OPERATOR_NAMESPACE")]
    namespace: Option<String>,
    /// Checkfu's image: the sandbox pods' agent comes from it, and it is the
    /// runner pods' default image.
    #[arg(long, env = "CHECKFU_OPERATOR_IMAGE")]
    image: String,
    /// Where the leader Lease lives (the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// This replica's name (its pod's).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, default_value = "0.0.0.0:9090")]
    metrics_listen: String,
}

pub async fn run(args: OperatorArgs, shutdown: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
    crate::health::prometheus();
    let listener = tokio::net::TcpListener::bind(&args.metrics_listen).await.with_context(|| format!("binding {}", args.metrics_listen))?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let app = crate::health::router(crate::health::Readiness::default());
        let _ = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await;
    });
    let client = kube::Client::try_default().await.context("reaching the Kubernetes API (in-cluster or from KUBECONFIG)")?;
    let pod = crate::config::env::Pod::of(&crate::config::env::Env::process());
    let identity = args.identity.or(pod.name).unwrap_or_else(|| "checkfu-operator".into());
    let opts = checkfu_operator::Options {
        namespace: args.namespace,
        image: args.image,
        identity,
        lease_namespace: args.lease_namespace,
        lease_duration: Duration::from_secs(15),
    };
    checkfu_operator::run(client, opts, Arc::new(PublicApi::new()?), shutdown).await.map_err(|e| anyhow::anyhow!("{e}"))
}

/// The installation's public API.
pub struct PublicApi {
    http: reqwest::Client,
}

impl PublicApi {
    pub fn new() -> anyhow::Result<PublicApi> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().context("building the HTTP client")?;
        Ok(PublicApi { http })
    }
}

fn failed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Installation(format!("{what}: {e}"))
}

/// An error answer as one line: status and the envelope's message.
async fn refused(what: &str, r: reqwest::Response) -> Error {
    let status = r.status();
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    let message = body["error"]["message"].as_str().unwrap_or("no message").to_string();
    Error::Installation(format!("{what}: {status}: {message}"))
}

impl Installation for PublicApi {
    fn pair<'a>(&'a self, req: &'a PairRequest) -> Fut<'a, Paired> {
        Box::pin(async move {
            let base = crate::self_hosted::base_url(&req.server).map_err(|e| Error::Invalid(format!("server: {e}")))?;
            let body = serde_json::json!({"environment_id": req.environment_id, "principal_id": req.principal_id, "pool": req.pool});
            let r = self
                .http
                .post(format!("{base}/v1/runner-pairings"))
                .bearer_auth(&req.api_key)
                .json(&body)
                .send()
                .await
                .map_err(|e| failed("minting a pairing code", e))?;
            if !r.status().is_success() {
                return Err(refused("minting a pairing code", r).await);
            }
            let minted: serde_json::Value = r.json().await.map_err(|e| failed("minting a pairing code", e))?;
            let code = minted["code"].as_str().ok_or_else(|| failed("minting a pairing code", "no code in the answer"))?;
            let channel = crate::self_hosted::channel(&base).map_err(|e| failed("redeeming the code", e))?;
            let mut client = RunnerServiceClient::new(checkfu_proto::transport::remote(channel));
            let r = client
                .redeem(rp::RedeemRequest { pairing_code: code.into(), name: req.name.clone() })
                .await
                .map_err(|s| failed("redeeming the code", s.message()))?
                .into_inner();
            Ok(Paired {
                server: base,
                runner_id: r.runner_id,
                credential: r.credential,
                environment_id: r.environment_id,
                pool: r.pool,
                principal_id: r.principal_id,
            })
        })
    }

    fn revoke<'a>(&'a self, server: &'a str, api_key: &'a str, runner_id: &'a str) -> Fut<'a, ()> {
        Box::pin(async move {
            let base = crate::self_hosted::base_url(server).map_err(|e| Error::Invalid(format!("server: {e}")))?;
            let r = self
                .http
                .post(format!("{base}/v1/runners/{runner_id}/revoke"))
                .bearer_auth(api_key)
                .json(&serde_json::json!({}))
                .send()
                .await
                .map_err(|e| failed("revoking a Runner", e))?;
            // Already revoked, or gone: nothing left to do.
            if r.status().is_success() || r.status() == reqwest::StatusCode::NOT_FOUND || r.status() == reqwest::StatusCode::CONFLICT {
                return Ok(());
            }
            Err(refused("revoking a Runner", r).await)
        })
    }
}
