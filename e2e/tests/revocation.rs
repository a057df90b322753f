//! The revocation contract with the gateway's decision cache on, embedded
//! (the epoch in process): every request that starts after a key is
//! revoked, a Principal disabled, or a grant or membership removed is
//! decided on the new rows, and a new grant counts at once
//! (`checkfu_e2e::revocation`). The distributed e2e runs the same with two
//! gateway replicas on Redis.
#![cfg(test)]

use checkfu_e2e::Platform;

#[tokio::test(flavor = "multi_thread")]
async fn every_change_counts_for_every_request_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    checkfu_e2e::revocation::every_change_counts_for_every_later_request(&p.admin, &p.base, &p.env_id).await;
    p.stop().await;
}

/// Catalog rows the gateway keeps (a Deployment, an Agent, a
/// SandboxProfile, the projection's Deployments) are read again by the
/// first create after a change to them was answered
/// (`checkfu_e2e::catalog_changes`).
#[tokio::test(flavor = "multi_thread")]
async fn every_catalog_change_counts_for_the_next_create() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    checkfu_e2e::catalog_changes::every_catalog_change_counts_for_the_next_create(&p.admin, &p.admin, &p.env_id).await;
    p.stop().await;
}
