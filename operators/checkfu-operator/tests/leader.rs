//! Leader election over a Lease on kube's mock API service: one holder at a
//! time, takeover when the holder stops renewing or lets go, a race for an
//! expired Lease won once, and a replica that does not lead never acts.
#![cfg(test)]

use checkfu_operator::installation::Unconfigured;
use checkfu_operator::leader::Elector;
use checkfu_operator_api::mock_api::MockApi;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const NS: &str = "checkfu";

fn elector(client: &kube::Client, who: &str) -> Elector {
    Elector::new(client.clone(), NS, "checkfu-operator", who, Duration::from_secs(1))
}

fn holder(mock: &MockApi) -> String {
    let lease = mock.get("apis/coordination.k8s.io/v1", NS, "leases", "checkfu-operator").expect("lease");
    lease["spec"]["holderIdentity"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn one_replica_holds_the_lease_until_it_stops_renewing_or_lets_go() {
    let (mock, client) = MockApi::start();
    let (a, b) = (elector(&client, "op-a"), elector(&client, "op-b"));
    assert!(a.try_acquire_or_renew().await.expect("a"), "the first candidate takes a missing lease");
    assert!(!b.try_acquire_or_renew().await.expect("b"), "a held lease is not taken");
    assert!(a.try_acquire_or_renew().await.expect("a renews"));
    assert!(!b.try_acquire_or_renew().await.expect("b"));
    assert_eq!(holder(&mock), "op-a");

    // A stops renewing: once the lease has run out, B takes it, and A's
    // next renewal finds it lost.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert!(b.try_acquire_or_renew().await.expect("b takes over"));
    assert!(!a.try_acquire_or_renew().await.expect("a lost it"));
    let lease = mock.get("apis/coordination.k8s.io/v1", NS, "leases", "checkfu-operator").expect("lease");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);

    // B lets go on shutdown: A takes it at once.
    b.release().await.expect("release");
    assert!(a.try_acquire_or_renew().await.expect("a takes the released lease"));
    assert_eq!(holder(&mock), "op-a");
}

#[tokio::test]
async fn two_candidates_racing_for_an_expired_lease_win_it_once() {
    let (mock, client) = MockApi::start();
    let old = elector(&client, "op-old");
    assert!(old.try_acquire_or_renew().await.expect("old"));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    for round in 0..5 {
        let (a, b) = (elector(&client, &format!("op-a{round}")), elector(&client, &format!("op-b{round}")));
        let (x, y) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
        let winners = [x.expect("a"), y.expect("b")].iter().filter(|w| **w).count();
        assert_eq!(winners, 1, "round {round}: exactly one wins");
        let h = holder(&mock);
        assert!(h == format!("op-a{round}") || h == format!("op-b{round}"));
        tokio::time::sleep(Duration::from_millis(2100)).await;
    }
}

#[tokio::test]
async fn a_replica_that_does_not_lead_never_reconciles() {
    let (mock, client) = MockApi::start();
    let holder = elector(&client, "op-a");
    assert!(holder.try_acquire_or_renew().await.expect("a"));
    let stop = CancellationToken::new();
    let opts = checkfu_operator::Options {
        namespace: Some("agents".into()),
        image: "img".into(),
        identity: "op-b".into(),
        lease_namespace: NS.into(),
        lease_duration: Duration::from_secs(1),
    };
    let b = tokio::spawn(checkfu_operator::run(client.clone(), opts, Arc::new(Unconfigured), stop.clone()));
    // A keeps renewing; B waits.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(holder.try_acquire_or_renew().await.expect("renew"));
    }
    stop.cancel();
    b.await.expect("join").expect("a standby stops cleanly");
    let acted: Vec<String> = mock.requests().into_iter().filter(|r| !r.contains("/leases")).collect();
    assert!(acted.is_empty(), "the standby touched nothing but the lease: {acted:?}");
}
