//! The internal listener and the channels that reach it: mutual TLS with
//! certificates from the installation CA.
//!
//! Each process holds one certificate that names the roles it plays
//! (`<role>.role.checkfu` DNS SANs). The internal listener accepts only
//! clients whose certificate chains to the installation CA, and turns the
//! roles it names into the request's [`Caller`], which the table in
//! `checkfu_proto::mesh` then authorizes per RPC. A client verifies the
//! server by the name of the role it means to reach, so a process that
//! does not play a role cannot answer for it either.

use anyhow::Context;
use checkfu_core::Role;
use checkfu_proto::mesh::Caller;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::path::{Path, PathBuf};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

/// The files of a process's mesh identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshFiles {
    /// The installation CA certificate (PEM).
    pub ca: PathBuf,
    /// This process's role certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
}

/// A loaded mesh identity.
#[derive(Clone)]
pub struct MeshTls {
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
    /// The roles this process's own certificate names.
    pub roles: Caller,
}

impl std::fmt::Debug for MeshTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshTls").field("roles", &self.roles.roles()).finish_non_exhaustive()
    }
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

impl MeshTls {
    pub fn load(files: &MeshFiles) -> anyhow::Result<MeshTls> {
        let (ca, cert, key) = (read(&files.ca)?, read(&files.cert)?, read(&files.key)?);
        let der = CertificateDer::pem_slice_iter(&cert)
            .next()
            .with_context(|| format!("{} holds no certificate", files.cert.display()))?
            .with_context(|| format!("{} is not a PEM certificate", files.cert.display()))?;
        let roles = caller_of(&[der]);
        anyhow::ensure!(!roles.is_empty(), "{} names no mesh role (DNS SANs like sessions.role.checkfu)", files.cert.display());
        Ok(MeshTls { ca, cert, key, roles })
    }

    /// A lazily connecting channel to `callee` at `urls` (an `[endpoints]`
    /// value: one URL, or several separated by commas, see
    /// [`crate::peers`]), authenticated both ways: this process's
    /// certificate as the client, the callee's checked against the CA and
    /// the callee's role name — whatever address it was reached at.
    pub fn channel(&self, urls: &str, callee: Role) -> anyhow::Result<Channel> {
        let targets = crate::peers::parse(urls).map_err(|e| anyhow::anyhow!("the {callee} endpoint: {e}"))?;
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca))
            .identity(Identity::from_pem(&self.cert, &self.key))
            .domain_name(callee.mesh_name());
        crate::peers::channel(targets, move |authority| {
            let url = format!("https://{authority}");
            Ok(Endpoint::from_shared(url.clone())
                .with_context(|| format!("invalid service address {url}"))?
                .tls_config(tls.clone())
                .with_context(|| format!("TLS for {url}"))?
                .tcp_nodelay(true)
                .http2_keep_alive_interval(std::time::Duration::from_secs(30)))
        })
    }

    fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&self.cert, &self.key))
            .client_ca_root(Certificate::from_pem(&self.ca))
            .client_auth_optional(false)
    }
}

/// The roles a verified peer certificate chain names (its leaf's DNS SANs).
pub fn caller_of(chain: &[CertificateDer<'_>]) -> Caller {
    let Some(leaf) = chain.first() else { return Caller::default() };
    let Ok(cert) = webpki::EndEntityCert::try_from(leaf) else { return Caller::default() };
    Caller::of(
        Role::ALL
            .into_iter()
            .filter(|r| ServerName::try_from(r.mesh_name()).is_ok_and(|n| cert.verify_is_valid_for_subject_name(&n).is_ok())),
    )
}

/// Serves `routes` (each behind `checkfu_proto::mesh::Authorized`) on
/// `listener` with mutual TLS until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    tls: &MeshTls,
    routes: tonic::service::Routes,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let identify = tower::util::MapRequestLayer::new(|mut req: http::Request<tonic::body::Body>| {
        // Only the TLS layer may say who is calling: drop anything else
        // first, then name the roles the verified certificate carries.
        req.extensions_mut().remove::<Caller>();
        // Per replica, so a scrape shows how the callers spread their work.
        metrics::counter!("checkfu_mesh_requests_total", "route" => req.uri().path().to_string()).increment(1);
        let caller = req.extensions().get::<TlsConnectInfo<TcpConnectInfo>>().and_then(|i| i.peer_certs()).map(|c| caller_of(&c));
        if let Some(c) = caller {
            req.extensions_mut().insert(c);
        }
        req
    });
    tonic::transport::Server::builder()
        .tls_config(tls.server_config())
        .context("the internal listener's TLS configuration")?
        .layer(identify)
        .add_routes(routes)
        // Accepted from our own listener, so the builder's `tcp_nodelay`
        // would not reach the sockets: small frames must not wait for Nagle
        // (a 40 ms delayed-ACK stall on every call between processes).
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown.cancelled_owned(),
        )
        .await
        .context("the internal listener failed")
}
