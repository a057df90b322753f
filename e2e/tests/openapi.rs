//! The OpenAPI document is served without auth and describes every
//! endpoint of docs/api.md, with request and response schemas.
#![cfg(test)]

use checkfu_e2e::*;

const CONTRACT: &[(&str, &str)] = &[
    ("post", "/v1/automation-graphs/{id}/revisions/{n}/test-rule"),
    ("post", "/v1/evaluator-qualifications"),
    ("get", "/v1/evaluator-qualifications"),
    ("get", "/v1/evaluator-qualifications/{id}"),
    ("post", "/v1/evaluator-qualifications/{id}/revoke"),
    ("post", "/v1/principals"),
    ("get", "/v1/principals"),
    ("get", "/v1/principals/{id}"),
    ("post", "/v1/principals/{id}"),
    ("post", "/v1/principals/{id}/api-keys"),
    ("get", "/v1/principals/{id}/api-keys"),
    ("delete", "/v1/api-keys/{id}"),
    ("post", "/v1/groups"),
    ("post", "/v1/groups/{id}/members"),
    ("delete", "/v1/groups/{id}/members/{principal_id}"),
    ("post", "/v1/environments"),
    ("get", "/v1/environments"),
    ("post", "/v1/environments/{id}"),
    ("post", "/v1/permission-assignments"),
    ("get", "/v1/permission-assignments"),
    ("delete", "/v1/permission-assignments/{id}"),
    ("post", "/v1/agents"),
    ("get", "/v1/agents"),
    ("post", "/v1/agents/{id}"),
    ("post", "/v1/agents/{id}/archive"),
    ("post", "/v1/agents/{id}/versions"),
    ("get", "/v1/agents/{id}/versions"),
    ("get", "/v1/agents/{id}/versions/{n}"),
    ("post", "/v1/sandbox-profiles"),
    ("post", "/v1/sandbox-profiles/{id}/revisions"),
    ("get", "/v1/sandbox-profiles/{id}"),
    ("get", "/v1/sandbox-profiles/{id}/revisions/{n}"),
    ("post", "/v1/model-routing-profiles"),
    ("post", "/v1/agent-deployments"),
    ("post", "/v1/agent-deployments/{id}/revisions"),
    ("get", "/v1/agent-deployments"),
    ("post", "/v1/sessions"),
    ("get", "/v1/sessions"),
    ("get", "/v1/sessions/{id}"),
    ("post", "/v1/sessions/{id}/archive"),
    ("post", "/v1/sessions/{id}/selection"),
    ("get", "/v1/sessions/{id}/runs"),
    ("get", "/v1/runs/{id}"),
    ("post", "/v1/sessions/{id}/events"),
    ("get", "/v1/sessions/{id}/events"),
    ("get", "/v1/sessions/{id}/events/stream"),
    ("get", "/v1/price-catalog"),
    ("post", "/v1/action-policies"),
    ("get", "/v1/action-policies"),
    ("get", "/v1/action-policies/{id}"),
    ("post", "/v1/action-policies/{id}"),
    ("delete", "/v1/action-policies/{id}"),
    ("post", "/v1/action-policies/evaluate"),
    ("get", "/v1/audit-events"),
    ("post", "/v1/connections"),
    ("get", "/v1/connections"),
    ("get", "/v1/connections/{id}"),
    ("post", "/v1/connections/{id}"),
    ("post", "/v1/connections/{id}/revoke"),
    ("post", "/v1/connections/{id}/credential"),
    ("delete", "/v1/connections/{id}/credential"),
    ("get", "/v1/capabilities"),
    ("post", "/v1/connection-vaults"),
    ("get", "/v1/connection-vaults"),
    ("get", "/v1/connection-vaults/{id}"),
    ("post", "/v1/connection-vaults/{id}"),
    ("delete", "/v1/connection-vaults/{id}"),
    ("post", "/v1/tool-sources"),
    ("get", "/v1/tool-sources"),
    ("get", "/v1/tool-sources/{id}"),
    ("post", "/v1/tool-sources/{id}"),
    ("post", "/v1/tool-sources/{id}/archive"),
    ("post", "/v1/tool-sources/{id}/sync"),
    ("post", "/v1/tool-sources/{id}/tools/{name}"),
];

#[tokio::test(flavor = "multi_thread")]
async fn the_document_describes_every_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let doc = Api::new(&p.base, "").get("/v1/openapi.json").await;
    expect(&doc, 200, None);
    let d = doc.1;
    assert!(d["openapi"].as_str().unwrap().starts_with("3."));
    for (method, path) in CONTRACT {
        let op = &d["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is missing from the document");
        assert!(op["responses"].as_object().unwrap().keys().any(|k| k.starts_with('2')), "{method} {path} documents its success");
        if *method == "post" && !["/archive", "/revoke", "/sync"].iter().any(|s| path.ends_with(s)) {
            assert!(op["requestBody"].is_object(), "{method} {path} documents its body");
        }
    }
    let schemas = d["components"]["schemas"].as_object().unwrap();
    for s in ["Session", "Event", "Agent", "AgentVersion", "ErrorEnvelope", "CreateSession", "InputEvent", "AgentDeployment"] {
        assert!(schemas.contains_key(s), "schema {s} is missing");
    }
    assert_eq!(d["components"]["securitySchemes"]["api_key"]["scheme"], "bearer");
    // Every path in the document is served (the router and the document are one).
    for (path, ops) in d["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            let concrete = path.replace("{id}", "x").replace("{n}", "1").replace("{principal_id}", "x");
            let r = match method.as_str() {
                "get" => p.admin.get(&concrete).await,
                "post" => p.admin.post(&concrete, serde_json::json!({})).await,
                "delete" => p.admin.delete(&concrete).await,
                other => panic!("unexpected method {other}"),
            };
            assert!(r.0.as_u16() != 404 || r.1["error"]["message"] != "no such endpoint", "{method} {path} is documented but not served");
            assert!(r.0.as_u16() < 500, "{method} {path} answered {}: {}", r.0, r.1);
        }
    }
    p.stop().await;
}

/// The document carries the constraints the server enforces (schemathesis
/// checks them at length in CI; these are the landmarks).
#[tokio::test(flavor = "multi_thread")]
async fn the_document_states_what_the_server_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = Api::new(&p.base, "").get("/v1/openapi.json").await.1;
    let param = |path: &str, name: &str| {
        d["paths"][path]["get"]["parameters"].as_array().unwrap().iter().find(|x| x["name"] == name).unwrap()["schema"].clone()
    };
    assert_eq!(param("/v1/sessions/{id}", "id")["pattern"], "^sess_[0-9a-z]{26}$");
    assert_eq!(param("/v1/agents/{id}", "id")["pattern"], "^agt_[0-9a-z]{26}$");
    assert_eq!(param("/v1/sessions", "limit")["maximum"], 100);
    assert_eq!(param("/v1/sessions/{id}/events", "limit")["maximum"], 1000);
    let create = &d["components"]["schemas"]["CreateSession"]["properties"];
    assert_eq!(create["agent_deployment_id"]["pattern"], "^dep_[0-9a-z]{26}$");
    let kinds = &d["components"]["schemas"]["CreatePrincipal"]["properties"]["kind"]["enum"];
    assert_eq!(kinds, &serde_json::json!(["human", "service"]));
    let hook = &d["components"]["schemas"]["CreateWebhookEndpoint"]["properties"]["event_types"]["items"]["enum"];
    assert!(hook.as_array().unwrap().contains(&serde_json::json!("session.status_idle")));
    // A request the document calls valid is accepted: the id's form alone
    // no longer earns a 400 (an unknown one is 404).
    let unknown = p.admin.get("/v1/sessions/sess_00000000000000000000000000").await;
    expect(&unknown, 404, Some("not_found"));
    p.stop().await;
}

/// Every operation has an explicit, stable id `<tag>.<verb><Resource>` in
/// lowerCamel, unique, under its one tag, and each tag names its resource
/// (`x-resource`): the SDK's namespaces and method names come from them.
#[tokio::test(flavor = "multi_thread")]
async fn every_operation_has_a_stable_unique_id() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = Api::new(&p.base, "").get("/v1/openapi.json").await.1;
    let tags: std::collections::BTreeMap<&str, &str> =
        d["tags"].as_array().unwrap().iter().map(|t| (t["name"].as_str().unwrap(), t["x-resource"].as_str().unwrap_or_default())).collect();
    let lower_camel = |s: &str| s.starts_with(|c: char| c.is_ascii_lowercase()) && s.chars().all(|c| c.is_ascii_alphabetic());
    let mut seen = std::collections::BTreeMap::new();
    for (path, ops) in d["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            let (tag, verb_resource) = id.split_once('.').unwrap_or_else(|| panic!("{id} is not <tag>.<verb><Resource>"));
            assert!(lower_camel(tag) && lower_camel(verb_resource), "{id} is not lowerCamel");
            assert!(verb_resource.contains(|c: char| c.is_ascii_uppercase()), "{id} names no resource after its verb");
            assert_eq!(op["tags"], serde_json::json!([tag]), "{id} is under exactly its own tag");
            assert!(!tags.get(tag).copied().unwrap_or_default().is_empty(), "{id}: the tag {tag} is declared with its x-resource");
            assert!(seen.insert(id.to_string(), format!("{method} {path}")).is_none(), "{id} is used twice");
        }
    }
    for id in
        ["automationGraphs.createAutomationGraph", "sessions.createSession", "sessions.listSessionEvents", "approvals.answerActionApproval"]
    {
        assert!(seen.contains_key(id), "{id} is missing");
    }
    p.stop().await;
}

/// The schema the document gives a 2xx JSON answer of `method path`.
fn answer_schema(doc: &serde_json::Value, method: &str, path: &str, status: u16) -> serde_json::Value {
    let schema = &doc["paths"][path][method]["responses"][status.to_string()]["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "{method} {path} documents no {status} JSON answer");
    // Refs resolve against the document's own components.
    serde_json::json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "allOf": [schema], "components": doc["components"]})
}

/// Answers conform to the schemas the document gives them — the typed
/// answers of the graph, memory, Dream, thread and Outcome routes among
/// them, which their services render as JSON for the gateway to pass on
/// (schemathesis checks every answer it meets in CI; these are answers it
/// rarely meets, on resources that exist).
#[tokio::test(flavor = "multi_thread")]
async fn typed_answers_conform_to_their_schemas() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let doc = Api::new(&p.base, "").get("/v1/openapi.json").await.1;
    let check = |method: &'static str, path: &'static str, r: &Reply, status: u16| {
        expect(r, status, None);
        let schema = answer_schema(&doc, method, path, status);
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator.iter_errors(&r.1).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{method} {path} answered outside its schema: {errors:?}\n{}", r.1);
    };

    // The check bites: an empty object is not a MemoryStore.
    let store_schema = answer_schema(&doc, "get", "/v1/memory-stores/{id}", 200);
    assert!(!jsonschema::validator_for(&store_schema).unwrap().is_valid(&json!({})));

    // Memory: a store, a document written, read, listed; versions; a
    // proposal on a reviewed store; a Dream.
    let owned = a
        .post("/v1/memory-stores", json!({"environment_id": p.env_id, "name": "mine", "owner": {"kind": "principal", "id": p.admin_id}}))
        .await;
    check("post", "/v1/memory-stores", &owned, 201);
    let s = id(&owned.1);
    let w = a.post(&format!("/v1/memory-stores/{s}/document"), json!({"path": "/a.md", "content": "one", "expected_sha256": null})).await;
    check("post", "/v1/memory-stores/{id}/document", &w, 200);
    check("get", "/v1/memory-stores/{id}/document", &a.get(&format!("/v1/memory-stores/{s}/document?path=/a.md")).await, 200);
    check("get", "/v1/memory-stores/{id}/documents", &a.get(&format!("/v1/memory-stores/{s}/documents")).await, 200);
    check("get", "/v1/memory-stores/{id}/versions", &a.get(&format!("/v1/memory-stores/{s}/versions")).await, 200);
    check("get", "/v1/memory-stores/{id}/versions/{n}", &a.get(&format!("/v1/memory-stores/{s}/versions/1")).await, 200);
    check("get", "/v1/memory-stores", &a.get("/v1/memory-stores").await, 200);
    let shared = a
        .post("/v1/memory-stores", json!({"environment_id": p.env_id, "name": "team", "owner": {"kind": "environment", "id": p.env_id}}))
        .await;
    let t = id(&shared.1);
    let proposed = a
        .post(
            "/v1/memory-proposals",
            json!({"memory_store_id": t, "changes": [{"path": "/b.md", "content": "b", "expected_sha256": null}], "rationale": "seed"}),
        )
        .await;
    check("post", "/v1/memory-proposals", &proposed, 201);
    check("get", "/v1/memory-proposals", &a.get(&format!("/v1/memory-proposals?memory_store_id={t}")).await, 200);
    check(
        "post",
        "/v1/memory-proposals/{id}/approve",
        &a.post(&format!("/v1/memory-proposals/{}/approve", id(&proposed.1)), json!({})).await,
        200,
    );
    let dream = a.post("/v1/dreams", json!({"memory_store_id": s})).await;
    check("post", "/v1/dreams", &dream, 201);
    check("get", "/v1/dreams", &a.get("/v1/dreams").await, 200);
    let deleted = a.delete(&format!("/v1/memory-stores/{s}/document?path=/a.md&expected_sha256={}", checkfu_core::sha256_hex("one"))).await;
    check("delete", "/v1/memory-stores/{id}/document", &deleted, 200);

    // A Session with an Outcome: its threads and Outcomes.
    let d = deploy(a, &p.env_id, json!({})).await;
    let define =
        input(&p.admin_id, "user.define_outcome", json!({"description": "say hello", "rubric": "require: hello", "max_iterations": 2}));
    let r = a
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id, "initial_events": [define]}))
        .await;
    let sid = id(&r.1);
    settle(a, &sid).await;
    let threads = a.get(&format!("/v1/sessions/{sid}/threads")).await;
    check("get", "/v1/sessions/{id}/threads", &threads, 200);
    let primary = threads.1["data"][0]["id"].as_str().unwrap().to_string();
    let one = a.get(&format!("/v1/sessions/{sid}/threads/{primary}")).await;
    check("get", "/v1/sessions/{id}/threads/{thread_id}", &one, 200);
    let outcomes = a.get(&format!("/v1/sessions/{sid}/outcomes")).await;
    check("get", "/v1/sessions/{id}/outcomes", &outcomes, 200);
    check("get", "/v1/outcomes/{id}", &a.get(&format!("/v1/outcomes/{}", id(&outcomes.1["data"][0]))).await, 200);

    // A graph: created, revised, planned, applied, a node tested.
    let svc = id(&a.post("/v1/principals", json!({"kind": "service", "name": "svc"})).await.1);
    let document = json!({"name": "g", "environment_id": p.env_id, "service_principal_id": svc,
        "nodes": [{"kind": "trigger", "id": "t", "trigger": {"kind": "schedule", "cron": "0 9 * * 1-5", "timezone": "UTC"}},
                  {"kind": "step_agent", "id": "a", "agent": d.deployment_id, "prompt": "P"}],
        "edges": [{"kind": "starts", "from": "t", "to": "a"}]});
    let g = a.post("/v1/automation-graphs", json!({"created_by_principal_id": p.admin_id, "document": document})).await;
    check("post", "/v1/automation-graphs", &g, 201);
    let gid = id(&g.1);
    check("get", "/v1/automation-graphs", &a.get("/v1/automation-graphs").await, 200);
    check("get", "/v1/automation-graphs/{id}/revisions/{n}", &a.get(&format!("/v1/automation-graphs/{gid}/revisions/1")).await, 200);
    let plan = a.post(&format!("/v1/automation-graphs/{gid}/plan"), json!({"revision": 1})).await;
    check("post", "/v1/automation-graphs/{id}/plan", &plan, 200);
    let applied = a.post(&format!("/v1/automation-graphs/{gid}/apply"), json!({"revision": 1, "plan_sha256": plan.1["plan_sha256"]})).await;
    check("post", "/v1/automation-graphs/{id}/apply", &applied, 200);
    check("get", "/v1/automation-graphs/{id}/applications", &a.get(&format!("/v1/automation-graphs/{gid}/applications")).await, 200);
    let tested =
        a.post(&format!("/v1/automation-graphs/{gid}/node-tests"), json!({"mode": "prompt_preview", "revision": 1, "node": "a"})).await;
    check("post", "/v1/automation-graphs/{id}/node-tests", &tested, 200);
    let check_doc = json!({"name": "c", "environment_id": p.env_id, "service_principal_id": svc,
        "nodes": [{"kind": "trigger", "id": "t", "trigger": {"kind": "schedule", "cron": "0 9 * * 1-5", "timezone": "UTC"}},
                  {"kind": "step_check", "id": "c", "check": {"modelRoutingProfileId": "mrp_01jx0000000000000000000001",
                   "questions": [{"name": "ok", "question": "require: ok"}], "rule": "ok"}}],
        "edges": [{"kind": "starts", "from": "t", "to": "c"}]});
    let cg = id(&a.post("/v1/automation-graphs", json!({"created_by_principal_id": p.admin_id, "document": check_doc})).await.1);
    let ruled = a.post(&format!("/v1/automation-graphs/{cg}/revisions/1/test-rule"), json!({"node": "c", "answers": {"ok": "no"}})).await;
    check("post", "/v1/automation-graphs/{id}/revisions/{n}/test-rule", &ruled, 200);
    let now = checkfu_core::time::now_ms();
    let q = a
        .post(
            "/v1/evaluator-qualifications",
            json!({"provider": "scripted", "model": "scripted-1", "purpose": "decision", "evidence": "suite",
            "reviewed_at": checkfu_core::time::rfc3339(now - 60_000), "expires_at": checkfu_core::time::rfc3339(now + 86_400_000)}),
        )
        .await;
    check("post", "/v1/evaluator-qualifications", &q, 201);
    let qid = id(&q.1);
    check("get", "/v1/evaluator-qualifications", &a.get("/v1/evaluator-qualifications").await, 200);
    check("get", "/v1/evaluator-qualifications/{id}", &a.get(&format!("/v1/evaluator-qualifications/{qid}")).await, 200);
    let revoked = a.post(&format!("/v1/evaluator-qualifications/{qid}/revoke"), json!({})).await;
    check("post", "/v1/evaluator-qualifications/{id}/revoke", &revoked, 200);
    check("get", "/v1/automation-graphs/{id}", &a.get(&format!("/v1/automation-graphs/{gid}")).await, 200);
    p.stop().await;
}
