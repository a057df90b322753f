//! Graph resources as the typed answers the gateway renders (api.md
//! §12.7), made in one place from the domain types. Documents, layouts
//! and edges stay the JSON their authors wrote.

use super::plan::{Pin, PlanError};
use super::service::{Applied, Drift, Plan, Preview};
use super::{Application, Graph, Revision};
use checkfu_core::time::rfc3339;
use checkfu_proto::scheduler::v1 as pb;

pub fn issue(e: &PlanError) -> pb::PlanIssue {
    pb::PlanIssue {
        code: e.code.into(),
        detail: Some(e.detail.clone()),
        node: e.node.clone(),
        edge_json: e.edge.as_ref().map(|x| x.to_string()),
    }
}

pub fn drift(d: &Drift) -> pb::GraphDrift {
    pb::GraphDrift { state: d.state.into(), reasons: d.reasons.iter().map(issue).collect() }
}

/// The graph, with the revision a write made when given.
pub fn graph(g: &Graph, d: &Drift, written: Option<&Revision>) -> pb::AutomationGraph {
    pb::AutomationGraph {
        id: g.id.to_string(),
        environment_id: g.environment_id.to_string(),
        name: g.name.clone(),
        service_principal_id: g.service_principal_id.to_string(),
        created_by_principal_id: g.created_by_principal_id.clone(),
        latest_revision: g.latest_revision,
        applied_revision: g.applied_revision,
        automation_id: g.automation_id.clone(),
        layout_json: g.layout.to_string(),
        drift: Some(drift(d)),
        version: g.version,
        created_at: rfc3339(g.created_ms),
        updated_at: rfc3339(g.updated_ms),
        revision: written.map(revision),
    }
}

pub fn revision(r: &Revision) -> pb::GraphRevision {
    pb::GraphRevision {
        graph_id: r.graph_id.to_string(),
        revision: r.revision,
        document_json: r.document.to_string(),
        document_sha256: r.document_sha256.clone(),
        layout_json: r.layout.to_string(),
        created_by: r.created_by.clone(),
        created_at: rfc3339(r.created_ms),
    }
}

fn pin(p: &Pin) -> pb::GraphPin {
    pb::GraphPin {
        node: p.node.clone(),
        agent_id: p.agent_id.clone(),
        agent_version: p.agent_version,
        release_sha256: p.release_sha256.clone(),
        agent_deployment_id: p.agent_deployment_id.clone(),
        deployment_revision: p.deployment_revision,
    }
}

pub fn plan(p: &Plan) -> pb::GraphPlan {
    match p {
        Plan::Rejected { graph_id, revision, errors } => pb::GraphPlan {
            kind: "rejected".into(),
            graph_id: graph_id.clone(),
            revision: *revision,
            errors: errors.iter().map(issue).collect(),
            ..Default::default()
        },
        Plan::Planned(p) => pb::GraphPlan {
            kind: "planned".into(),
            graph_id: p.graph_id.clone(),
            revision: p.revision,
            errors: vec![],
            plan_sha256: p.plan_sha256.clone(),
            automation_id: p.automation_id.clone(),
            action: p.action.into(),
            target_kind: p.target["kind"].as_str().unwrap_or_default().into(),
            pins: p.pins.iter().map(pin).collect(),
            resources: p
                .resources
                .iter()
                .map(|r| pb::GraphResource {
                    node: r.node.clone(),
                    tool_source_id: r.tool_source_id.clone(),
                    connection_id: r.connection_id.clone(),
                })
                .collect(),
            blockers: p.blockers.iter().map(issue).collect(),
            readiness: Some(crate::automation_wire::readiness(&p.readiness)),
            required_inputs: if p.needs_ingest_secret() {
                vec![pb::RequiredInput { name: "ingest_secret".into(), generated_if_absent: true }]
            } else {
                vec![]
            },
        },
    }
}

pub fn application(a: &Application) -> pb::GraphApplication {
    pb::GraphApplication {
        id: a.id.to_string(),
        graph_id: a.graph_id.to_string(),
        revision: a.revision,
        plan_sha256: a.plan_sha256.clone(),
        automation_id: a.automation_id.clone(),
        action: a.action.clone(),
        applied_by: a.applied_by.clone(),
        created_at: rfc3339(a.created_ms),
    }
}

pub fn applied(graph_id: &str, revision: i64, a: &Applied) -> pb::GraphApplied {
    pb::GraphApplied {
        graph_id: graph_id.into(),
        revision,
        application: Some(application(&a.application)),
        automation_id: a.automation_id.clone(),
        action: a.action.clone(),
        ingest_secret: a.generated_secret.clone(),
    }
}

pub fn preview(p: &Preview) -> pb::NodePreview {
    pb::NodePreview {
        mode: "prompt_preview".into(),
        graph_id: p.graph_id.clone(),
        revision: p.revision,
        node: p.node.clone(),
        prompt_source: p.prompt_source.into(),
        rendered_prompt: p.rendered_prompt.clone(),
        missing_event_references: p.missing_event_references.clone(),
        agent_id: p.pin.as_ref().map(|x| x.agent_id.clone()),
        agent_version: p.pin.as_ref().map(|x| x.agent_version),
        agent_deployment_id: p.agent_deployment_id.clone(),
        environment_id: p.environment_id.clone(),
    }
}
