//! ActionPolicies, the evaluate dry run, and the audit trail, through the API.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn policies_evaluate_strictest_first_and_defaults_by_tool_class() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let env = p.env_id.clone();
    let alice = id(&a.post("/v1/principals", json!({"kind": "human", "name": "alice"})).await.1);
    let ops = id(&a.post("/v1/groups", json!({"name": "ops"})).await.1);
    a.post(&format!("/v1/groups/{ops}/members"), json!({"principal_id": alice})).await;
    let eval = |tool: serde_json::Value, name: &str| json!({"environment_id": env, "subject": {"kind": "principal", "id": alice}, "resource": {"kind": "tool", "id": name}, "permission": "invoke", "tool": tool});
    let audit_before = a.get("/v1/audit-events?limit=100").await.1["data"].as_array().unwrap().len();

    // No policy: the tool's class decides.
    for (tool, name, want) in [
        (json!({"type": "builtin", "name": "read"}), "read", "allow"),
        (json!({"type": "builtin", "name": "write"}), "write", "require_approval"),
        (json!({"type": "builtin", "name": "bash"}), "bash", "require_approval"),
        (json!({"type": "custom", "name": "lookup", "read_only": true, "destructive": false}), "lookup", "allow"),
        (json!({"type": "custom", "name": "wipe", "read_only": true, "destructive": true}), "wipe", "require_approval"),
        (
            json!({"type": "tool_source", "tool_source_id": "tsrc_01m8n5w2381sjtydkyxnv11e90", "tools": ["search"]}),
            "search",
            "require_approval",
        ),
    ] {
        let r = a.post("/v1/action-policies/evaluate", eval(tool, name)).await;
        expect(&r, 200, None);
        assert_eq!(r.1["disposition"], want, "{name}: {}", r.1);
        assert_eq!(r.1["matched_rule_ids"], json!([]));
    }

    // Rules: deny > require_approval > allow; group subjects match members.
    let created = a
        .post(
            "/v1/action-policies",
            json!({"environment_id": env, "name": "tools", "rules": [
                {"subject": {"kind": "principal", "id_glob": "prin_*"}, "resource": {"kind": "tool", "id_glob": "*"}, "permission_glob": "invoke", "disposition": "allow"},
                {"subject": {"kind": "group", "id_glob": ops}, "resource": {"kind": "tool", "id_glob": "bash"}, "disposition": "require_approval"},
                {"subject": {"kind": "*"}, "resource": {"kind": "tool", "id_glob": "rm*"}, "disposition": "deny"}
            ]}),
        )
        .await;
    expect(&created, 201, None);
    let pid = id(&created.1);
    assert_eq!(created.1["rules"][1]["id"], format!("{pid}#1"));
    let r = a.post("/v1/action-policies/evaluate", eval(json!({"type": "builtin", "name": "bash"}), "bash")).await;
    assert_eq!(
        (r.1["disposition"].clone(), r.1["matched_rule_ids"].clone()),
        (json!("require_approval"), json!([format!("{pid}#1")])),
        "{}",
        r.1
    );
    let r = a.post("/v1/action-policies/evaluate", eval(json!({"type": "custom", "name": "rm_all"}), "rm_all")).await;
    assert_eq!(r.1["disposition"], "deny");
    let r = a.post("/v1/action-policies/evaluate", eval(json!({"type": "builtin", "name": "write"}), "write")).await;
    assert_eq!(r.1["disposition"], "allow", "a matching allow rule overrides the default");
    assert!(r.1["reason"].as_str().unwrap().contains("allow"));

    // The dry run records nothing; the policy change does.
    let audit = a.get("/v1/audit-events?limit=100").await.1;
    let actions: Vec<&str> = audit["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions.len(), audit_before + 1, "only the policy creation was audited: {actions:?}");
    assert_eq!(actions[0], "action_policy.created");

    // Bad rules are refused with the envelope.
    let bad_kind = json!({"environment_id": env, "name": "x", "rules": [{"subject": {"kind": "robot"}, "resource": {"kind": "tool"}, "disposition": "allow"}]});
    expect(&a.post("/v1/action-policies", bad_kind).await, 400, Some("validation.invalid"));
    let bad_disp = json!({"environment_id": env, "name": "x", "rules": [{"subject": {"kind": "*"}, "resource": {"kind": "tool"}, "disposition": "maybe"}]});
    expect(&a.post("/v1/action-policies", bad_disp).await, 400, Some("validation.invalid"));
    expect(&a.post("/v1/action-policies/evaluate", json!({"subject": {"kind": "principal", "id": alice}, "resource": {"kind": "tool", "id": "x"}, "permission": "invoke", "tool": {"type": "builtin", "name": "read"}})).await, 400, Some("validation.invalid"));

    // Optimistic concurrency, update, delete, all audited with before/after.
    expect(
        &a.post(&format!("/v1/action-policies/{pid}"), json!({"name": "renamed", "expected_version": 9})).await,
        409,
        Some("validation.conflict"),
    );
    let upd = a.post(&format!("/v1/action-policies/{pid}"), json!({"rules": [], "expected_version": 1})).await;
    expect(&upd, 200, None);
    assert_eq!((upd.1["version"].clone(), upd.1["rules"].clone()), (json!(2), json!([])));
    let r = a.post("/v1/action-policies/evaluate", eval(json!({"type": "builtin", "name": "write"}), "write")).await;
    assert_eq!(r.1["disposition"], "require_approval", "the edit takes effect at the next evaluation");
    expect(&a.delete(&format!("/v1/action-policies/{pid}")).await, 200, None);
    expect(&a.get(&format!("/v1/action-policies/{pid}")).await, 404, Some("not_found"));
    let trail = a.get(&format!("/v1/audit-events?resource_id={pid}")).await.1;
    let acts: Vec<&str> = trail["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(acts, vec!["action_policy.deleted", "action_policy.updated", "action_policy.created"]);
    assert!(trail["data"][1]["details"]["before"]["rules"].as_array().unwrap().len() == 3);

    // Only managers write policies; only admins read the audit trail.
    let key = a.post(&format!("/v1/principals/{alice}/api-keys"), json!({})).await.1["secret"].as_str().unwrap().to_string();
    let alice_api = Api::new(&p.base, &key);
    expect(
        &alice_api.post("/v1/action-policies", json!({"environment_id": env, "name": "mine", "rules": []})).await,
        403,
        Some("permission.denied"),
    );
    expect(&alice_api.get("/v1/audit-events").await, 403, Some("permission.denied"));
    let mine = a.get(&format!("/v1/audit-events?actor_id={}", p.admin_id)).await.1;
    assert!(mine["data"].as_array().unwrap().iter().all(|e| e["actor_id"] == p.admin_id.as_str()));
    p.stop().await;
}
