//! Skill nodes through the public API (api.md §18.7): a graph proposes a
//! `SKILL.md` learnt from the Sessions it selected — one SkillProposal per
//! firing and step, nothing changing until a human adopts it — and
//! observes, once, whether its skill was adopted. Acceptance check of
//! §18.13 numbered 18.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::*;
use serde_json::{Value, json};

const SKILL: &str = "---\nname: triage-notes\ndescription: How the team triages incoming notes\n---\n# Triage\nRead, then sort.\n";

/// `hook → sel(select "learn") → prop(skill_proposal content ← /skill) → obs(observe prop)`.
fn graph(f: &Fixture) -> Value {
    let nodes = json!([
        hook_node(),
        {"kind": "step_select_history", "id": "sel", "frontier": "learn", "limit": 10},
        {"kind": "step_skill_proposal", "id": "prop", "selection": "sel", "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/skill"}}},
        {"kind": "step_observe_skill_proposal", "id": "obs", "proposal": "prop"}
    ]);
    let edges = json!([graph_edge("starts", "hook", "sel"), graph_edge("then", "sel", "prop"), graph_edge("then", "prop", "obs")]);
    graph_document(f, "learn-skills", nodes, edges)
}

/// The trace's Skill receipts: `(operation, result, disposition, skill_id, version)`.
async fn skills(a: &Api, firing: &str) -> Vec<(String, String, Value, Value, Value)> {
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    assert_eq!(trace["evidence"]["complete"], true, "{trace}");
    assert!(!trace["receipts"].to_string().contains("Read, then sort"), "no SKILL.md in the receipts: {trace}");
    trace["receipts"]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (text("operation"), text("result"), r["disposition"].clone(), r["skill_id"].clone(), r["version"].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_18_a_skill_is_proposed_from_a_selection_and_its_adoption_observed_by_later_firings() {
    let f = fixture().await;
    let a = &f.p.admin;
    let (hooks, url) = hook_receiver().await;
    let types = ["skill_proposal.created", "skill_proposal.adopted", "skill_proposal.rejected"];
    expect(&a.post("/v1/webhook-endpoints", json!({"environment_id": f.p.env_id, "url": url, "event_types": types})).await, 201, None);
    let (auto, secret) = apply_graph(&f, graph(&f)).await;
    let auto_id = auto["id"].as_str().unwrap().to_string();
    let fire = |id: &str, skill: &str| {
        let (f, auto_id, secret) = (&f, auto_id.clone(), secret.clone());
        let body = json!({"id": id, "skill": skill});
        async move { fire_signed(f, &auto_id, &secret, body).await }
    };

    // Nothing selected: nothing proposed, observed empty.
    let empty = fire("1", SKILL).await;
    assert_eq!(settled(a, &empty).await["state"], "succeeded");
    let seen = skills(a, &empty).await;
    assert_eq!((seen[0].1.as_str(), seen[1].2.clone()), ("empty", json!("empty")), "{seen:?}");
    let listed = a.get(&format!("/v1/skill-proposals?environment_id={}", f.p.env_id)).await.1;
    assert_eq!(listed["data"], json!([]));

    // A Session to learn from: one open proposal, observed pending.
    idle_session(a, &f.svc, &f.d.deployment_id, json!({})).await;
    let first = fire("2", SKILL).await;
    assert_eq!(settled(a, &first).await["state"], "succeeded");
    let seen = skills(a, &first).await;
    assert_eq!((seen[0].1.as_str(), seen[1].2.clone()), ("proposed", json!("pending")), "{seen:?}");
    let proposals = a.get(&format!("/v1/skill-proposals?environment_id={}&status=open", f.p.env_id)).await.1["data"].clone();
    assert_eq!(proposals.as_array().unwrap().len(), 1, "{proposals}");
    let p1 = proposals[0].clone();
    let p1_id = p1["id"].as_str().unwrap().to_string();
    assert!(p1_id.starts_with("skprop_"));
    assert_eq!((p1["name"].clone(), p1["content"].clone(), p1["skill_id"].clone()), (json!("triage-notes"), json!(SKILL), Value::Null));
    assert_eq!(p1["source"], json!({"kind": "automation_firing", "id": first, "automation_id": auto_id, "step_id": "prop"}));
    wait_for_hook(&hooks, "skill_proposal.created", &p1_id).await;

    // The service Principal cannot adopt it: a human with manage does.
    let svc_key =
        a.post(&format!("/v1/principals/{}/api-keys", f.svc), json!({"name": "k"})).await.1["secret"].as_str().unwrap().to_string();
    let svc = Api::new(&f.p.base, &svc_key);
    let g = json!({"subject": {"kind": "principal", "id": f.svc}, "permission": "manage", "resource": {"kind": "environment", "id": f.p.env_id}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let refused = svc.post(&format!("/v1/skill-proposals/{p1_id}/adopt"), json!({})).await;
    expect(&refused, 403, None);
    let adopted = a.post(&format!("/v1/skill-proposals/{p1_id}/adopt"), json!({"note": "good"})).await;
    expect(&adopted, 200, None);
    let skill_id = adopted.1["adopted"]["skill_id"].as_str().unwrap().to_string();
    assert_eq!((adopted.1["status"].clone(), adopted.1["adopted"]["version"].clone()), (json!("adopted"), json!(1)), "{}", adopted.1);
    let skill = a.get(&format!("/v1/skills/{skill_id}")).await;
    expect(&skill, 200, None);
    assert_eq!(skill.1["name"], "triage-notes");
    wait_for_hook(&hooks, "skill_proposal.adopted", &p1_id).await;
    expect(&a.post(&format!("/v1/skill-proposals/{p1_id}/reject"), json!({})).await, 409, None);

    // A later firing proposes again (for that skill now) and sees the
    // adoption as evidence; the earlier observation stays pending.
    let second = fire("3", SKILL).await;
    assert_eq!(settled(a, &second).await["state"], "succeeded");
    let seen = skills(a, &second).await;
    assert_eq!((seen[1].2.clone(), seen[1].3.clone(), seen[1].4.clone()), (json!("evidence"), json!(skill_id), json!(1)), "{seen:?}");
    assert_eq!(skills(a, &first).await[1].2, json!("pending"), "saved once, never rewritten");
    let open = a.get(&format!("/v1/skill-proposals?environment_id={}&status=open", f.p.env_id)).await.1["data"].clone();
    let p2 = &open[0];
    assert_eq!((p2["skill_id"].clone(), open.as_array().unwrap().len()), (json!(skill_id), 1), "{open}");
    let p2_id = p2["id"].as_str().unwrap();
    // From the command line: the open one, its text, then rejected.
    let listed = f.cli(&["skills", "proposals", "--status", "open"]);
    assert_eq!(listed, format!("{p2_id}  open     triage-notes  for {skill_id}  from {second}\n"));
    assert!(f.cli(&["skills", "proposal", &p1_id]).ends_with("Read, then sort.\n"));
    assert!(f.cli(&["skills", "reject", p2_id, "--note", "not now"]).starts_with(&format!("{p2_id}  rejected")));
    let rejected = a.get(&format!("/v1/skill-proposals/{p2_id}")).await;
    assert_eq!((rejected.1["status"].clone(), rejected.1["adopted"].clone()), (json!("rejected"), Value::Null));
    assert_eq!(rejected.1["decision_note"], "not now");
    wait_for_hook(&hooks, "skill_proposal.rejected", p2_id).await;

    // Content that is no SKILL.md is refused at the step.
    let bad = fire("4", "no front matter").await;
    let done = settled(a, &bad).await;
    assert_eq!(
        (done["state"].clone(), firing_step(&done, "prop")["outcome"]["reason"].clone()),
        (json!("failed"), json!("skill_md_invalid"))
    );
    let audit = a.get(&format!("/v1/audit-events?resource_id={p1_id}")).await.1;
    let actions: Vec<&str> = audit["data"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    assert!(actions.contains(&"skill_proposal.created") && actions.contains(&"skill_proposal.adopted"), "{actions:?}");

    // An observation without its proposal upstream is refused when planned.
    let nodes = json!([hook_node(), {"kind": "step_observe_skill_proposal", "id": "obs", "proposal": "nope"}]);
    let g = save_graph(&f, graph_document(&f, "orphan", nodes, json!([graph_edge("starts", "hook", "obs")]))).await;
    assert_eq!(plan_errors(&f, &g).await, ["selection_not_ancestor"]);
    f.p.stop().await;
}
