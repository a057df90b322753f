//! The shapes AutomationGraph routes answer (api.md §12.7), rendered here
//! from the scheduler's typed answers (or read from a 0.1.0 scheduler's
//! JSON text) and described for the OpenAPI document (schemathesis checks
//! every answer against them in CI, and the SDK's types come from them).

use crate::json_text::{doc, value};
use crate::views::{Page, opt};
use checkfu_core::Error;
use checkfu_proto::scheduler::v1 as pb;
use pb::graph_answer::Resource;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

/// An AutomationGraph: authored intent, planned and applied into an Automation.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AutomationGraph {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub service_principal_id: String,
    pub created_by_principal_id: String,
    pub latest_revision: i64,
    /// The revision last applied; null before the first apply.
    pub applied_revision: Option<i64>,
    /// The Automation it manages; null before the first apply.
    pub automation_id: Option<String>,
    /// The latest layout (node positions and the like).
    #[schema(value_type = Object)]
    pub layout: Value,
    pub drift: GraphDrift,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
    /// On create and revise: the revision written (or, with the same
    /// document as the latest, the latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<AutomationGraphRevision>,
}

/// Whether the applied Automation still matches what its revision plans to.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GraphDrift {
    /// `not_applied`, `in_sync` or `drifted`.
    pub state: String,
    /// `{code, detail?, node?}` for each difference.
    #[schema(value_type = Vec<Object>)]
    pub reasons: Vec<Issue>,
}

/// One immutable revision: its `document` and `layout` are the export.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AutomationGraphRevision {
    pub graph_id: String,
    pub revision: i64,
    /// `{name, environment_id, service_principal_id, nodes, edges}` as saved.
    #[schema(value_type = Object)]
    pub document: Value,
    pub document_sha256: String,
    #[schema(value_type = Object)]
    pub layout: Value,
    pub created_by: String,
    pub created_at: String,
}

/// A plan of one revision against what is live: `planned` (with its digest,
/// pins, blockers and readiness) or `rejected` (with its errors).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GraphPlan {
    /// `planned` or `rejected`.
    pub kind: String,
    pub graph_id: String,
    pub revision: i64,
    /// On `rejected`: `{code, detail, node?, edge?}` for each error, drawn
    /// on the node or edge it names.
    #[schema(value_type = Option<Vec<Object>>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<Issue>>,
    /// On `planned`: what apply must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_sha256: Option<String>,
    /// On `planned`: `{id, action}`, the Automation and what apply does to it.
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automation: Option<PlannedAutomation>,
    /// On `planned`: `agent` or `steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_kind: Option<String>,
    /// On `planned`: each Agent node's pinned version and deployment.
    #[schema(value_type = Option<Vec<Object>>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<Vec<Pin>>,
    /// On `planned`: each Connection node's `{node, tool_source_id,
    /// connection_id}`, resolved now and pinned by apply.
    #[schema(value_type = Option<Vec<Object>>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<Value>>,
    /// On `planned`: what stops apply, as errors are.
    #[schema(value_type = Option<Vec<Object>>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blockers: Option<Vec<Issue>>,
    /// On `planned`: the Automation's readiness if applied now.
    #[schema(value_type = Option<Object>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Value>,
    /// On `planned`: inputs apply takes (`ingest_secret`).
    #[schema(value_type = Option<Vec<Object>>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_inputs: Option<Vec<RequiredInput>>,
}

/// One apply of a revision.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GraphApplication {
    pub id: String,
    pub graph_id: String,
    pub revision: i64,
    pub plan_sha256: String,
    pub automation_id: String,
    /// `create`, `update` or `unchanged`.
    pub action: String,
    pub applied_by: String,
    pub created_at: String,
}

/// What an apply did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GraphApplied {
    pub graph_id: String,
    pub revision: i64,
    pub application: GraphApplication,
    pub automation_id: String,
    /// `create`, `update` or `unchanged`.
    pub action: String,
    /// Generated for a webhook trigger when none was given: shown this once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingest_secret: Option<String>,
}

/// A node test (`prompt_preview`): the Agent block's prompt rendered from an
/// event, and what a Session to run it once would pin.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NodeTestPreview {
    /// `prompt_preview`.
    pub mode: String,
    pub graph_id: String,
    pub revision: i64,
    pub node: String,
    /// `literal`, `event_template` or `previous_output`.
    pub prompt_source: String,
    pub rendered_prompt: String,
    /// `{{event.x}}` references the event did not hold.
    pub missing_event_references: Vec<String>,
    pub agent_id: Option<String>,
    pub agent_version: Option<i64>,
    pub agent_deployment_id: String,
    pub environment_id: String,
}

/// A Check's rule tried offline on given answers (`test-rule`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RuleTestResult {
    /// `yes`, `no` or `uncertain`.
    pub verdict: String,
    /// The arm a Decision takes (`continue`, `otherwise`, `uncertain`), or
    /// `then` for a `step_check`, which completes whatever the verdict.
    pub branch: String,
}

impl From<pb::RuleTest> for RuleTestResult {
    fn from(t: pb::RuleTest) -> Self {
        RuleTestResult { verdict: t.verdict, branch: t.branch }
    }
}

// The parts of the views; the OpenAPI document shows them as objects.

/// A plan's error or blocker, or a drift's reason.
#[derive(Debug, Serialize, Deserialize)]
pub struct Issue {
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The edge as the document holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PlannedAutomation {
    pub id: Option<String>,
    pub action: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Pin {
    pub node: String,
    pub agent_id: String,
    pub agent_version: i64,
    pub release_sha256: String,
    pub agent_deployment_id: String,
    pub deployment_revision: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct RequiredInput {
    pub name: String,
    pub generated_if_absent: bool,
}

/// `x` on a planned plan; `None` on a rejected one.
fn on<T>(planned: bool, x: T) -> Option<T> {
    planned.then_some(x)
}

fn issue(i: pb::PlanIssue) -> Issue {
    Issue { code: i.code, detail: i.detail, node: i.node, edge: i.edge_json.map(|e| doc(&e)) }
}

impl From<pb::GraphRevision> for AutomationGraphRevision {
    fn from(r: pb::GraphRevision) -> Self {
        AutomationGraphRevision {
            graph_id: r.graph_id,
            revision: r.revision,
            document: doc(&r.document_json),
            document_sha256: r.document_sha256,
            layout: doc(&r.layout_json),
            created_by: r.created_by,
            created_at: r.created_at,
        }
    }
}

impl From<pb::AutomationGraph> for AutomationGraph {
    fn from(g: pb::AutomationGraph) -> Self {
        let drift = g.drift.unwrap_or_default();
        AutomationGraph {
            id: g.id,
            environment_id: g.environment_id,
            name: g.name,
            service_principal_id: g.service_principal_id,
            created_by_principal_id: g.created_by_principal_id,
            latest_revision: g.latest_revision,
            applied_revision: (g.applied_revision > 0).then_some(g.applied_revision),
            automation_id: opt(&g.automation_id),
            layout: doc(&g.layout_json),
            drift: GraphDrift { state: drift.state, reasons: drift.reasons.into_iter().map(issue).collect() },
            version: g.version,
            created_at: g.created_at,
            updated_at: g.updated_at,
            revision: g.revision.map(Into::into),
        }
    }
}

impl From<pb::GraphPlan> for GraphPlan {
    fn from(p: pb::GraphPlan) -> Self {
        let planned = p.kind == "planned";
        GraphPlan {
            kind: p.kind,
            graph_id: p.graph_id,
            revision: p.revision,
            errors: (!planned).then(|| p.errors.into_iter().map(issue).collect()),
            plan_sha256: on(planned, p.plan_sha256),
            automation: on(planned, PlannedAutomation { id: p.automation_id, action: p.action }),
            target_kind: on(planned, p.target_kind),
            pins: on(
                planned,
                p.pins
                    .into_iter()
                    .map(|x| Pin {
                        node: x.node,
                        agent_id: x.agent_id,
                        agent_version: x.agent_version,
                        release_sha256: x.release_sha256,
                        agent_deployment_id: x.agent_deployment_id,
                        deployment_revision: x.deployment_revision,
                    })
                    .collect(),
            ),
            resources: on(
                planned,
                p.resources
                    .into_iter()
                    .map(|r| json!({"node": r.node, "tool_source_id": r.tool_source_id, "connection_id": r.connection_id}))
                    .collect(),
            ),
            blockers: on(planned, p.blockers.into_iter().map(issue).collect()),
            readiness: on(planned, p.readiness.as_ref().map(crate::automation_wire::readiness_of).unwrap_or(Value::Null)),
            required_inputs: on(
                planned,
                p.required_inputs.into_iter().map(|i| RequiredInput { name: i.name, generated_if_absent: i.generated_if_absent }).collect(),
            ),
        }
    }
}

impl From<pb::GraphApplication> for GraphApplication {
    fn from(a: pb::GraphApplication) -> Self {
        GraphApplication {
            id: a.id,
            graph_id: a.graph_id,
            revision: a.revision,
            plan_sha256: a.plan_sha256,
            automation_id: a.automation_id,
            action: a.action,
            applied_by: a.applied_by,
            created_at: a.created_at,
        }
    }
}

impl From<pb::GraphApplied> for GraphApplied {
    fn from(a: pb::GraphApplied) -> Self {
        GraphApplied {
            graph_id: a.graph_id,
            revision: a.revision,
            application: a.application.unwrap_or_default().into(),
            automation_id: a.automation_id,
            action: a.action,
            ingest_secret: a.ingest_secret,
        }
    }
}

impl From<pb::NodePreview> for NodeTestPreview {
    fn from(p: pb::NodePreview) -> Self {
        NodeTestPreview {
            mode: p.mode,
            graph_id: p.graph_id,
            revision: p.revision,
            node: p.node,
            prompt_source: p.prompt_source,
            rendered_prompt: p.rendered_prompt,
            missing_event_references: p.missing_event_references,
            agent_id: p.agent_id,
            agent_version: p.agent_version,
            agent_deployment_id: p.agent_deployment_id,
            environment_id: p.environment_id,
        }
    }
}

/// A graph answer's public JSON: its typed resource rendered, or a 0.1.0
/// scheduler's text.
#[allow(deprecated)] // json: a 0.1.0 scheduler's
pub fn answer(a: pb::GraphAnswer) -> Result<Value, Error> {
    match a.resource {
        Some(Resource::Graph(g)) => value(AutomationGraph::from(g)),
        Some(Resource::Revision(r)) => value(AutomationGraphRevision::from(r)),
        Some(Resource::Plan(p)) => value(GraphPlan::from(p)),
        Some(Resource::Applied(x)) => value(GraphApplied::from(x)),
        Some(Resource::Preview(p)) => value(NodeTestPreview::from(p)),
        Some(Resource::RuleTest(t)) => value(RuleTestResult::from(t)),
        None => Ok(doc(&a.json)),
    }
}

/// A page of graphs, revisions or applications: the typed list it holds,
/// or a 0.1.0 scheduler's text.
#[allow(deprecated)] // data_json: a 0.1.0 scheduler's
pub fn page(r: pb::ListGraphsResponse) -> Result<Value, Error> {
    let next_page = opt(&r.next_page);
    if !r.typed {
        return Ok(json!({"data": r.data_json.iter().map(|d| doc(d)).collect::<Vec<_>>(), "next_page": next_page}));
    }
    let data: Vec<Value> = if !r.revisions.is_empty() {
        r.revisions.into_iter().map(AutomationGraphRevision::from).map(value).collect::<Result<_, _>>()?
    } else if !r.applications.is_empty() {
        r.applications.into_iter().map(GraphApplication::from).map(value).collect::<Result<_, _>>()?
    } else {
        r.graphs.into_iter().map(AutomationGraph::from).map(value).collect::<Result<_, _>>()?
    };
    value(Page { data, next_page })
}

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use super::*;

    fn typed(resource: Resource) -> pb::GraphAnswer {
        pb::GraphAnswer { resource: Some(resource), ..Default::default() }
    }

    fn text(v: &Value) -> pb::GraphAnswer {
        pb::GraphAnswer { json: v.to_string(), ..Default::default() }
    }

    /// Rendered from the typed answer and read from the 0.1.0 text, alike.
    fn same(resource: Resource, want: Value) {
        assert_eq!(answer(typed(resource)).expect("typed"), want);
        assert_eq!(answer(text(&want)).expect("0.1.0 text"), want);
    }

    fn revision() -> (pb::GraphRevision, Value) {
        let doc = json!({"name": "triage", "environment_id": "env_1", "service_principal_id": "prin_1", "nodes": [], "edges": []});
        let typed = pb::GraphRevision {
            graph_id: "agr_1".into(),
            revision: 2,
            document_json: doc.to_string(),
            document_sha256: "ab".into(),
            layout_json: r#"{"n1":{"x":1}}"#.into(),
            created_by: "prin_1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
        };
        let text = json!({"graph_id": "agr_1", "revision": 2, "document": doc, "document_sha256": "ab", "layout": {"n1": {"x": 1}},
            "created_by": "prin_1", "created_at": "2026-01-01T00:00:00Z"});
        (typed, text)
    }

    #[test]
    fn graphs_and_revisions_render_the_same_typed_or_from_a_0_1_0_schedulers_text() {
        let (rev, rev_text) = revision();
        let g = pb::AutomationGraph {
            id: "agr_1".into(),
            environment_id: "env_1".into(),
            name: "triage".into(),
            service_principal_id: "prin_1".into(),
            created_by_principal_id: "prin_1".into(),
            latest_revision: 2,
            applied_revision: 1,
            automation_id: "aut_1".into(),
            layout_json: "{}".into(),
            drift: Some(pb::GraphDrift {
                state: "drifted".into(),
                reasons: vec![
                    pb::PlanIssue {
                        code: "pin_changed".into(),
                        detail: Some("dep_1 moved".into()),
                        node: Some("ask".into()),
                        edge_json: None,
                    },
                    pb::PlanIssue {
                        code: "edge_invalid".into(),
                        detail: Some("no target".into()),
                        node: None,
                        edge_json: Some(r#"{"from":"a","index":0}"#.into()),
                    },
                ],
            }),
            version: 3,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:01Z".into(),
            revision: None,
        };
        let text = json!({"id": "agr_1", "environment_id": "env_1", "name": "triage", "service_principal_id": "prin_1",
            "created_by_principal_id": "prin_1", "latest_revision": 2, "applied_revision": 1, "automation_id": "aut_1", "layout": {},
            "drift": {"state": "drifted", "reasons": [{"code": "pin_changed", "detail": "dep_1 moved", "node": "ask"},
                {"code": "edge_invalid", "detail": "no target", "edge": {"from": "a", "index": 0}}]},
            "version": 3, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01Z"});
        same(Resource::Graph(g.clone()), text.clone());
        let mut written = text.clone();
        written["revision"] = rev_text.clone();
        same(Resource::Graph(pb::AutomationGraph { revision: Some(rev.clone()), ..g.clone() }), written);
        let fresh = pb::AutomationGraph { applied_revision: 0, automation_id: String::new(), ..g };
        let v = answer(typed(Resource::Graph(fresh))).expect("typed");
        assert_eq!((v["applied_revision"].clone(), v["automation_id"].clone()), (Value::Null, Value::Null), "null before the first apply");
        same(Resource::Revision(rev.clone()), rev_text.clone());

        let page = page(pb::ListGraphsResponse { revisions: vec![rev], next_page: "p2".into(), typed: true, ..Default::default() });
        assert_eq!(page.expect("typed"), json!({"data": [rev_text.clone()], "next_page": "p2"}));
        let old = pb::ListGraphsResponse { data_json: vec![rev_text.to_string()], ..Default::default() };
        assert_eq!(super::page(old).expect("0.1.0 text"), json!({"data": [rev_text], "next_page": null}));
        let empty = pb::ListGraphsResponse { typed: true, ..Default::default() };
        assert_eq!(super::page(empty).expect("typed"), json!({"data": [], "next_page": null}));
    }

    #[test]
    fn plans_applies_and_previews_render_the_same_typed_or_from_a_0_1_0_schedulers_text() {
        let rejected = pb::GraphPlan {
            kind: "rejected".into(),
            graph_id: "agr_1".into(),
            revision: 2,
            errors: vec![pb::PlanIssue { code: "cycle".into(), detail: Some("a loop".into()), node: Some("a".into()), edge_json: None }],
            ..Default::default()
        };
        same(
            Resource::Plan(rejected),
            json!({"kind": "rejected", "graph_id": "agr_1", "revision": 2, "errors": [{"code": "cycle", "detail": "a loop", "node": "a"}]}),
        );
        let planned = pb::GraphPlan {
            kind: "planned".into(),
            graph_id: "agr_1".into(),
            revision: 2,
            plan_sha256: "cd".into(),
            automation_id: None,
            action: "create".into(),
            target_kind: "agent".into(),
            pins: vec![pb::GraphPin {
                node: "ask".into(),
                agent_id: "agt_1".into(),
                agent_version: 4,
                release_sha256: "ef".into(),
                agent_deployment_id: "dep_1".into(),
                deployment_revision: 5,
            }],
            readiness: Some(pb::Readiness { state: "ready".into(), checked_at: "2026-01-01T00:00:00Z".into(), checks: vec![] }),
            required_inputs: vec![pb::RequiredInput { name: "ingest_secret".into(), generated_if_absent: true }],
            ..Default::default()
        };
        same(
            Resource::Plan(planned),
            json!({"kind": "planned", "graph_id": "agr_1", "revision": 2, "plan_sha256": "cd", "automation": {"id": null, "action": "create"},
                "target_kind": "agent", "pins": [{"node": "ask", "agent_id": "agt_1", "agent_version": 4, "release_sha256": "ef",
                "agent_deployment_id": "dep_1", "deployment_revision": 5}], "resources": [], "blockers": [],
                "readiness": {"state": "ready", "checked_at": "2026-01-01T00:00:00Z", "checks": []},
                "required_inputs": [{"name": "ingest_secret", "generated_if_absent": true}]}),
        );
        let application = pb::GraphApplication {
            id: "agap_1".into(),
            graph_id: "agr_1".into(),
            revision: 2,
            plan_sha256: "cd".into(),
            automation_id: "aut_1".into(),
            action: "create".into(),
            applied_by: "prin_1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
        };
        let app_text = json!({"id": "agap_1", "graph_id": "agr_1", "revision": 2, "plan_sha256": "cd", "automation_id": "aut_1",
            "action": "create", "applied_by": "prin_1", "created_at": "2026-01-01T00:00:00Z"});
        let applied = pb::GraphApplied {
            graph_id: "agr_1".into(),
            revision: 2,
            application: Some(application),
            automation_id: "aut_1".into(),
            action: "create".into(),
            ingest_secret: None,
        };
        same(
            Resource::Applied(applied.clone()),
            json!({"graph_id": "agr_1", "revision": 2, "application": app_text, "automation_id": "aut_1", "action": "create"}),
        );
        let v = answer(typed(Resource::Applied(pb::GraphApplied { ingest_secret: Some("whsec".into()), ..applied }))).expect("typed");
        assert_eq!(v["ingest_secret"], "whsec", "a generated secret shows once");
        let preview = pb::NodePreview {
            mode: "prompt_preview".into(),
            graph_id: "agr_1".into(),
            revision: 2,
            node: "ask".into(),
            prompt_source: "event_template".into(),
            rendered_prompt: "hi".into(),
            missing_event_references: vec!["event.x".into()],
            agent_id: None,
            agent_version: None,
            agent_deployment_id: "dep_1".into(),
            environment_id: "env_1".into(),
        };
        same(
            Resource::Preview(preview),
            json!({"mode": "prompt_preview", "graph_id": "agr_1", "revision": 2, "node": "ask", "prompt_source": "event_template",
                "rendered_prompt": "hi", "missing_event_references": ["event.x"], "agent_id": null, "agent_version": null,
                "agent_deployment_id": "dep_1", "environment_id": "env_1"}),
        );
    }
}
