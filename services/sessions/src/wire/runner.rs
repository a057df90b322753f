//! Self-hosted Runners.

use crate::model::*;
use checkfu_core::time::{rfc3339, rfc3339_opt};
use checkfu_proto::sessions::v1 as pb;

pub(crate) fn runner(r: Runner) -> pb::Runner {
    pb::Runner {
        id: r.id.into(),
        environment_id: r.environment_id.into(),
        pool: r.pool,
        principal_id: r.principal_id.into(),
        name: r.name,
        status: r.status.as_str().into(),
        last_seen_at: rfc3339_opt(r.last_seen_ms),
        created_at: rfc3339(r.created_ms),
        revoked_at: rfc3339_opt(r.revoked_ms),
    }
}
