//! A Session's sandbox and mounted MemoryStores on the mesh, typed. Until
//! the release after 0.1.0 the JSON text fields they replace are written
//! too (docs/architecture.md, "JSON on the mesh").

use crate::model::{MemoryMount, SandboxState};
use checkfu_proto::sessions::v1 as pb;
use serde_json::{Value, json};

pub fn sandbox(x: &SandboxState) -> pb::SandboxSummary {
    pb::SandboxSummary {
        expires_at_ms: x.expires_ms,
        unenforced: x.unenforced.iter().map(|u| pb::UnenforcedField { field: u.field.clone(), reason: u.reason.clone() }).collect(),
    }
}

/// The sandbox as the 0.1.0 text carried it; empty before it materialised.
pub fn sandbox_json(x: Option<&SandboxState>) -> String {
    x.map(|x| json!({"expires_at_ms": x.expires_ms, "unenforced": x.unenforced}).to_string()).unwrap_or_default()
}

pub fn memory_resource(m: &MemoryMount) -> pb::MemoryResource {
    pb::MemoryResource {
        memory_store_id: m.store_id.clone(),
        access: m.access.clone(),
        mount_name: m.mount_name.clone(),
        store_version: m.store_version,
    }
}

/// The mounts as the 0.1.0 text carried them; empty for none.
pub fn resources_json(mounts: &[MemoryMount]) -> String {
    if mounts.is_empty() {
        return String::new();
    }
    let list: Vec<Value> = mounts
        .iter()
        .map(|m| {
            json!({"type": "memory_store", "memory_store_id": m.store_id, "access": m.access, "mount_name": m.mount_name,
                "store_version": m.store_version})
        })
        .collect();
    Value::Array(list).to_string()
}
