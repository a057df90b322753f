//! Session-scoped Budgets.

use crate::model::*;
use checkfu_core::time::rfc3339;
use checkfu_proto::sessions::v1 as pb;

/// The metric when a request leaves it out: spend.
pub(crate) fn metric_or_default(m: &str) -> String {
    if m.is_empty() { "model_spend".into() } else { m.to_string() }
}

pub(crate) fn budget(b: crate::model::Budget, s: &Session) -> pb::Budget {
    pb::Budget {
        id: b.id.into(),
        environment_id: s.environment_id.clone().into(),
        session_id: s.id.clone().into(),
        metric: b.metric.as_str().into(),
        limit: b.limit,
        consumed: b.consumed,
        status: b.status.as_str().into(),
        version: b.version,
        created_at: rfc3339(b.created_ms),
        updated_at: rfc3339(b.updated_ms),
    }
}
