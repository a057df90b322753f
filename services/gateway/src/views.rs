//! Public JSON shapes (api.md), built from the services' wire types. The
//! JSON documents services carry as strings are inlined as objects here.

use checkfu_proto::governance::v1 as gov;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};

/// Parses a JSON document a service sent; empty means null.
pub fn doc(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { serde_json::from_str(s).unwrap_or(Value::Null) }
}

fn opt(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { Value::String(s.to_string()) }
}

pub fn list(data: Vec<Value>, next_page: &str) -> Value {
    json!({"data": data, "next_page": opt(next_page)})
}

pub fn principal(p: &gov::Principal) -> Value {
    json!({"id": p.id, "kind": p.kind, "name": p.name, "disabled": p.disabled, "created_at": p.created_at})
}

pub fn api_key(k: &gov::ApiKey) -> Value {
    json!({"id": k.id, "principal_id": k.principal_id, "name": k.name, "created_at": k.created_at, "revoked_at": opt(&k.revoked_at)})
}

pub fn group(g: &gov::Group) -> Value {
    json!({"id": g.id, "name": g.name, "member_ids": g.member_ids, "created_at": g.created_at})
}

pub fn environment(e: &gov::Environment) -> Value {
    json!({"id": e.id, "name": e.name, "version": e.version, "disabled": e.disabled, "created_at": e.created_at})
}

fn rref(r: &Option<gov::ResourceRef>) -> Value {
    r.as_ref().map(|r| json!({"kind": r.kind, "id": r.id})).unwrap_or(Value::Null)
}

pub fn assignment(a: &gov::PermissionAssignment) -> Value {
    json!({
        "id": a.id, "subject": rref(&a.subject), "permission": a.permission, "resource": rref(&a.resource),
        "environment_id": opt(&a.environment_id), "created_by": a.created_by, "created_at": a.created_at,
    })
}

pub fn agent(a: &ss::Agent) -> Value {
    json!({
        "id": a.id, "environment_id": a.environment_id, "name": a.name, "draft": doc(&a.draft_json),
        "latest_version": if a.latest_version == 0 { Value::Null } else { json!(a.latest_version) },
        "version": a.version, "archived": a.archived, "created_at": a.created_at, "updated_at": a.updated_at,
    })
}

pub fn agent_version(v: &ss::AgentVersion) -> Value {
    json!({
        "agent_id": v.agent_id, "version": v.version, "release_sha256": v.release_sha256, "definition": doc(&v.definition_json),
        "published_by": v.published_by, "published_at": v.published_at,
    })
}

pub fn sandbox_profile(p: &ss::SandboxProfile) -> Value {
    json!({"id": p.id, "environment_id": p.environment_id, "name": p.name, "latest_revision": p.latest_revision, "created_at": p.created_at})
}

pub fn sandbox_revision(r: &ss::SandboxRevision) -> Value {
    let mut v = doc(&r.spec_json);
    if let Some(o) = v.as_object_mut() {
        o.insert("profile_id".into(), json!(r.profile_id));
        o.insert("revision".into(), json!(r.revision));
        o.insert("created_at".into(), json!(r.created_at));
    }
    v
}

pub fn routing_profile(p: &mg::RoutingProfile) -> Value {
    let candidates: Vec<Value> = p
        .candidates
        .iter()
        .map(|c| {
            let mut v = json!({"provider": c.provider, "model": c.model, "effort": c.effort});
            if !c.connection_id.is_empty() {
                v["connection_id"] = json!(c.connection_id);
            }
            if !c.base_url.is_empty() {
                v["base_url"] = json!(c.base_url);
            }
            v
        })
        .collect();
    json!({"id": p.id, "environment_id": p.environment_id, "name": p.name, "candidates": candidates, "created_at": p.created_at})
}

pub fn deployment(d: &ss::Deployment) -> Value {
    let p = d.pins.clone().unwrap_or_default();
    json!({
        "id": d.id, "environment_id": d.environment_id, "key": d.key, "agent_id": d.agent_id, "revision": d.revision,
        "pins": {
            "agent_version": p.agent_version, "release_sha256": p.release_sha256, "harness": p.harness,
            "model_routing_profile_id": p.model_routing_profile_id, "sandbox_profile_id": p.sandbox_profile_id,
            "sandbox_profile_revision": p.sandbox_profile_revision,
        },
        "execution": doc(&p.execution_json),
        "created_at": d.created_at, "updated_at": d.updated_at,
    })
}

fn usage(u: &Option<ss::Usage>) -> Value {
    let u = u.unwrap_or_default();
    json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "model_spend_micro_usd": u.model_spend_micro_usd})
}

pub fn session(s: &ss::Session) -> Value {
    json!({
        "id": s.id, "environment_id": s.environment_id, "agent_deployment_id": s.agent_deployment_id,
        "deployment_revision": s.deployment_revision, "principal_id": s.principal_id, "status": s.status,
        "stop_reason": doc(&s.stop_reason_json), "title": s.title, "metadata": doc(&s.metadata_json),
        "budget_id": opt(&s.budget_id), "usage": usage(&s.usage), "created_at": s.created_at, "updated_at": s.updated_at,
        "version": s.version,
    })
}

pub fn event(e: &ss::Event) -> Value {
    json!({
        "id": e.id, "session_id": e.session_id, "seq": e.seq, "type": e.r#type, "created_at": e.created_at,
        "run_id": opt(&e.run_id), "session_thread_id": opt(&e.session_thread_id),
        "authored_by": doc(&e.authored_by_json), "caused_by": doc(&e.caused_by_json), "payload": doc(&e.payload_json),
    })
}

pub fn run(r: &ss::Run) -> Value {
    json!({
        "id": r.id, "session_id": r.session_id, "status": r.status, "stop_reason": doc(&r.stop_reason_json),
        "execution_pins": doc(&r.execution_pins_json), "usage": usage(&r.usage), "created_at": r.created_at,
        "completed_at": opt(&r.completed_at),
    })
}
