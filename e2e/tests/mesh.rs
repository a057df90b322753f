//! The internal mesh is not public: the public listener answers no internal
//! RPC, the internal listener accepts only certificates from the
//! installation CA, and each RPC is authorized by the role that calls it.
#![cfg(test)]

use checkfu_e2e::*;
use checkfu_node::Role;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::runner::v1 as rp;
use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The attack from the report: list principals, then mint a key for the
/// admin, with a plain gRPC client and no credentials.
async fn mint_admin_key(mut g: GovernanceServiceClient<Channel>) -> Result<String, tonic::Status> {
    let principals = g.list_principals(gov::ListRequest { limit: 100, page: String::new() }).await?.into_inner();
    let admin = principals.data.into_iter().find(|p| p.name == "admin").map(|p| p.id).unwrap_or_default();
    let key = g.create_api_key(gov::CreateApiKeyRequest { principal_id: admin, name: "stolen".into(), actor_id: String::new() }).await?;
    Ok(key.into_inner().secret)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_public_listener_serves_no_internal_rpc() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let channel = Endpoint::from_shared(p.base.clone()).unwrap().connect().await.unwrap();
    let stolen = mint_admin_key(GovernanceServiceClient::new(channel.clone())).await;
    assert!(stolen.is_err(), "governance answered on the public port");
    let claim = RunnerServiceClient::new(channel).claim(rp::ClaimRequest { runner_id: "intruder".into(), wait_ms: 0 }).await;
    assert!(claim.is_err(), "the managed runner protocol answered on the public port");
    // The API itself still answers there.
    expect(&p.admin.get("/v1/principals").await, 200, None);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn in_process_calls_are_authorized_by_the_calling_role() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let mut as_runner = GovernanceServiceClient::new(p.internal(Role::Runner, Role::Governance));
    let e = as_runner.list_principals(gov::ListRequest { limit: 1, page: String::new() }).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    let e = as_runner
        .create_api_key(gov::CreateApiKeyRequest { principal_id: p.admin_id.clone(), name: "x".into(), actor_id: p.admin_id.clone() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "only the gateway asserts an actor");
    let mut as_gateway = GovernanceServiceClient::new(p.internal(Role::Gateway, Role::Governance));
    assert!(as_gateway.list_principals(gov::ListRequest { limit: 1, page: String::new() }).await.is_ok());
    // An answer "from inside a Session" skips the response token: only the
    // sessions role may say so, not even the gateway.
    let forged = gov::RespondToApprovalRequest {
        id: "aapr_01jxxxxxxxxxxxxxxxxxxxxxxx".into(),
        decision: "approve".into(),
        responder_id: p.admin_id.clone(),
        in_session: true,
        ..Default::default()
    };
    let e = as_gateway.respond_to_approval(forged.clone()).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let mut as_sessions = GovernanceServiceClient::new(p.internal(Role::Sessions, Role::Governance));
    let e = as_sessions.respond_to_approval(forged).await.unwrap_err();
    assert_ne!(e.code(), tonic::Code::PermissionDenied, "sessions may record in-session answers (this one names no approval): {e:?}");
    p.stop().await;
}

fn tls(p: &Platform) -> (String, Certificate) {
    let ca = std::fs::read(mesh_dir(&p.data_dir).join("ca.pem")).unwrap();
    (p.internal_base.clone().unwrap(), Certificate::from_pem(ca))
}

async fn connect(url: &str, cfg: ClientTlsConfig) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_shared(url.to_string()).unwrap().tls_config(cfg).unwrap().connect().await
}

/// A client certificate for `roles` from the CA in `dir`.
fn identity(dir: &std::path::Path, name: &str, roles: &[Role]) -> Identity {
    let set = roles.iter().copied().collect();
    let issued = checkfu_node::certs::issue(dir, name, &set, 1).unwrap();
    Identity::from_pem(std::fs::read(issued.cert).unwrap(), std::fs::read(issued.key).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_internal_listener_accepts_only_installation_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { mesh: true, ..Default::default() }).await;
    let (url, ca) = tls(&p);
    let name = Role::Governance.mesh_name();

    // Plaintext: no TLS handshake, no answer.
    let plain = Endpoint::from_shared(url.replace("https://", "http://")).unwrap().connect().await;
    if let Ok(ch) = plain {
        assert!(mint_admin_key(GovernanceServiceClient::new(ch)).await.is_err(), "plaintext reached governance");
    }

    // TLS without a client certificate.
    let anonymous = connect(&url, ClientTlsConfig::new().ca_certificate(ca.clone()).domain_name(name.clone())).await;
    if let Ok(ch) = anonymous {
        assert!(mint_admin_key(GovernanceServiceClient::new(ch)).await.is_err(), "a client without a certificate reached governance");
    }

    // A gateway certificate from another CA.
    let rogue_dir = tempfile::tempdir().unwrap();
    let rogue = identity(rogue_dir.path(), "rogue", &[Role::Gateway]);
    let forged = connect(&url, ClientTlsConfig::new().ca_certificate(ca.clone()).identity(rogue).domain_name(name.clone())).await;
    if let Ok(ch) = forged {
        assert!(mint_admin_key(GovernanceServiceClient::new(ch)).await.is_err(), "a certificate from another CA reached governance");
    }

    // A real runner certificate: authenticated, but not allowed to act for a person.
    let runner = identity(&mesh_dir(&p.data_dir), "runner", &[Role::Runner]);
    let ch = connect(&url, ClientTlsConfig::new().ca_certificate(ca.clone()).identity(runner).domain_name(name.clone())).await.unwrap();
    let e = mint_admin_key(GovernanceServiceClient::new(ch.clone())).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    let mut health = tonic_health::pb::health_client::HealthClient::new(ch);
    assert!(
        health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.is_ok(),
        "the runner role is authenticated"
    );

    // The gateway's certificate may act for a person: the table, not the
    // channel, decides.
    let gateway = identity(&mesh_dir(&p.data_dir), "gateway", &[Role::Gateway]);
    let ch = connect(&url, ClientTlsConfig::new().ca_certificate(ca.clone()).identity(gateway).domain_name(name)).await.unwrap();
    let listed = GovernanceServiceClient::new(ch).list_principals(gov::ListRequest { limit: 100, page: String::new() }).await;
    assert!(listed.is_ok(), "{listed:?}");

    // A client that expects another role's name refuses this server: a
    // process cannot answer for a role its certificate does not name.
    let runner2 = identity(&mesh_dir(&p.data_dir), "runner2", &[Role::Runner]);
    let wrong_name = connect(&url, ClientTlsConfig::new().ca_certificate(ca).identity(runner2).domain_name("nope.role.checkfu")).await;
    if let Ok(ch) = wrong_name {
        let mut h = tonic_health::pb::health_client::HealthClient::new(ch);
        assert!(h.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.is_err(), "server name not verified");
    }
    p.stop().await;
}
