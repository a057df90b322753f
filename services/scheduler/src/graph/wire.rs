//! Graph resources as their API JSON, the text a 0.1.0 gateway reads from
//! the deprecated `json` fields (a 0.2.0 gateway renders the typed answers
//! of `answers.rs` itself); goes with those fields in the release after
//! 0.1.0.

use super::service::Drift;
use super::{Graph, Revision};
use checkfu_core::time::rfc3339;
use serde_json::{Value, json};

pub fn graph(g: &Graph, drift: &Drift) -> Value {
    json!({
        "id": g.id, "environment_id": g.environment_id, "name": g.name, "service_principal_id": g.service_principal_id,
        "created_by_principal_id": g.created_by_principal_id, "latest_revision": g.latest_revision,
        "applied_revision": (g.applied_revision > 0).then_some(g.applied_revision),
        "automation_id": (!g.automation_id.is_empty()).then(|| g.automation_id.clone()),
        "layout": g.layout, "drift": drift.to_json(), "version": g.version,
        "created_at": rfc3339(g.created_ms), "updated_at": rfc3339(g.updated_ms),
    })
}

pub fn revision(r: &Revision) -> Value {
    json!({
        "graph_id": r.graph_id, "revision": r.revision, "document": r.document, "document_sha256": r.document_sha256,
        "layout": r.layout, "created_by": r.created_by, "created_at": rfc3339(r.created_ms),
    })
}
