//! The real Kubernetes client, as `checkfu operator` and the runner build
//! it: from a kubeconfig naming an HTTPS API server, its TLS stack builds
//! (one crypto provider in the binary), and a server that is not there is
//! an error to retry, never a panic.
#![cfg(test)]

use kube::config::{KubeConfigOptions, Kubeconfig};

#[tokio::test]
async fn a_client_from_a_kubeconfig_builds_its_tls_and_fails_cleanly() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: agents\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: t\n"
    );
    let kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.expect("config");
    assert_eq!(config.default_namespace, "agents");
    let client = kube::Client::try_from(config).expect("the TLS stack builds");
    let sandboxes: kube::Api<checkfu_operator_api::crd::Sandbox> = kube::Api::default_namespaced(client);
    let e = sandboxes.list(&Default::default()).await.expect_err("nothing listens there");
    let text = e.to_string();
    assert!(!text.is_empty(), "a connection error: {text}");
}
