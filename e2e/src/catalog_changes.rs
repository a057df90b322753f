//! The catalog rows gateways keep (services/gateway/src/catalog_facts.rs)
//! are never older than an answered write: a Session create that starts
//! after a Deployment revision, an Agent's new version or an archive was
//! answered runs on the new rows. Each check first makes `reader` keep the
//! old row (a create through it), then changes the row through `writer`
//! (another gateway replica, or the same one), then creates through
//! `reader` at once — well inside the five seconds a kept row may live.

use crate::{Api, deploy, expect, id};
use serde_json::{Value, json};

const CMA: [(&str, &str); 1] = [("anthropic-beta", "managed-agents-2026-04-01")];

/// Every kind of catalog change a create reads, in Environment `env` (the
/// native part) and the CMA default workspace.
pub async fn every_catalog_change_counts_for_the_next_create(writer: &Api, reader: &Api, env: &str) {
    a_deployment_revision(writer, reader, env).await;
    crate::cma::route_models(writer).await;
    racing_first_creates(reader).await;
    a_cma_agent_version_and_archive(writer, reader).await;
    a_cma_environment_archive(writer, reader).await;
}

async fn native_create(reader: &Api, deployment: &str) -> Value {
    let s = reader.post("/v1/sessions", json!({"agent_deployment_id": deployment})).await;
    expect(&s, 201, None);
    s.1
}

/// A Deployment's new revision (a new agent version) is what the next
/// create pins.
async fn a_deployment_revision(writer: &Api, reader: &Api, env: &str) {
    let d = deploy(writer, env, json!({})).await;
    assert_eq!(native_create(reader, &d.deployment_id).await["deployment_revision"], 1);
    assert_eq!(native_create(reader, &d.deployment_id).await["deployment_revision"], 1, "kept, and still right");
    expect(&writer.post(&format!("/v1/agents/{}/versions", d.agent_id), json!({})).await, 201, None);
    let revision =
        json!({"agent_version": 2, "model_routing_profile_id": d.routing_profile_id, "sandbox_profile_id": d.sandbox_profile_id});
    expect(&writer.post(&format!("/v1/agent-deployments/{}/revisions", d.deployment_id), revision).await, 201, None);
    let s = native_create(reader, &d.deployment_id).await;
    assert_eq!(s["deployment_revision"], 2, "the create after the revision was answered runs on it: {s}");
}

async fn cma_agent(writer: &Api, name: &str) -> String {
    let a = writer.post_with("/cma/v1/agents", json!({"name": name, "model": "claude-sonnet-4-6"}), &CMA).await;
    assert!(a.0.is_success(), "a CMA agent: {}", a.1);
    id(&a.1)
}

async fn cma_environment(writer: &Api) -> String {
    let name = format!("catalog-{}", checkfu_core::id::new_id("x"));
    let e = writer.post_with("/cma/v1/environments", json!({"name": name, "config": {"type": "cloud"}}), &CMA).await;
    assert!(e.0.is_success(), "a CMA environment: {}", e.1);
    id(&e.1)
}

async fn cma_create(reader: &Api, agent: &str, environment: &str) -> (u16, Value) {
    let s = reader.post_with("/cma/v1/sessions", json!({"agent": agent, "environment_id": environment}), &CMA).await;
    (s.0.as_u16(), s.1)
}

/// The first creates of an agent in an environment race to make the
/// projection's Deployment: each loser runs on the winner's, which the
/// conflict tells it to read afresh rather than from what it kept.
async fn racing_first_creates(reader: &Api) {
    let (agent, environment) = (cma_agent(reader, "catalog-race").await, cma_environment(reader).await);
    // The workspace's list of deployments, kept before the race.
    let other = cma_agent(reader, "catalog-race-warm").await;
    assert_eq!(cma_create(reader, &other, &environment).await.0, 200);
    let racing = (0..8).map(|_| cma_create(reader, &agent, &environment));
    for (status, s) in futures_util::future::join_all(racing).await {
        assert_eq!(status, 200, "every racing create starts: {s}");
    }
}

/// An agent's update publishes a version the next create pins; its
/// archive refuses the next create.
async fn a_cma_agent_version_and_archive(writer: &Api, reader: &Api) {
    let (agent, environment) = (cma_agent(writer, "catalog-agent").await, cma_environment(writer).await);
    for _ in 0..2 {
        let (status, s) = cma_create(reader, &agent, &environment).await;
        assert_eq!((status, &s["agent"]["version"]), (200, &json!(1)), "{s}");
    }
    let updated = writer.post_with(&format!("/cma/v1/agents/{agent}"), json!({"version": 1, "system": "two"}), &CMA).await;
    assert!(updated.0.is_success(), "{}", updated.1);
    // The update itself deploys the new version where the old one ran:
    // what it read after its own write was the new agent.
    let keys: Vec<Value> =
        writer.get("/v1/agent-deployments?limit=100").await.1["data"].as_array().unwrap().iter().map(|d| d["key"].clone()).collect();
    assert!(keys.contains(&json!(format!("cma:{environment}:{agent}:v2"))), "{keys:?}");
    let (status, s) = cma_create(reader, &agent, &environment).await;
    assert_eq!((status, &s["agent"]["version"]), (200, &json!(2)), "the create after the update pins its version: {s}");
    assert_eq!(s["agent"]["system"], "two", "{s}");
    let archived = writer.post_with(&format!("/cma/v1/agents/{agent}/archive"), json!({}), &CMA).await;
    assert!(archived.0.is_success(), "{}", archived.1);
    let (status, s) = cma_create(reader, &agent, &environment).await;
    assert_eq!(status, 400, "no session starts on an archived agent: {s}");
    assert!(s.to_string().contains("agent_archived"), "{s}");
}

/// An environment's archive refuses the next create.
async fn a_cma_environment_archive(writer: &Api, reader: &Api) {
    let (agent, environment) = (cma_agent(writer, "catalog-env").await, cma_environment(writer).await);
    for _ in 0..2 {
        assert_eq!(cma_create(reader, &agent, &environment).await.0, 200);
    }
    let archived = writer.post_with(&format!("/cma/v1/environments/{environment}/archive"), json!({}), &CMA).await;
    assert!(archived.0.is_success(), "{}", archived.1);
    let (status, s) = cma_create(reader, &agent, &environment).await;
    assert_eq!(status, 400, "no session starts in an archived environment: {s}");
    assert!(s.to_string().contains("environment_archived"), "{s}");
}
