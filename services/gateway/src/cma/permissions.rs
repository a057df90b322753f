//! CMA permission policies as native ActionPolicy rules: shared by agents
//! (their built-in tools) and MCP servers (their toolsets).

use super::wire::CmaResult;
use checkfu_core::Error;
use serde_json::Value;

/// One rule of an agent's ActionPolicy: `(tool name, disposition)`.
pub type Rule = (String, String);

/// A CMA permission policy → a native disposition; `auto` (or none) → no
/// rule, so Checkfu's defaults decide.
pub fn policy(p: &Value) -> CmaResult<Option<String>> {
    match p["type"].as_str() {
        None | Some("auto") => Ok(None),
        Some("always_allow") => Ok(Some("allow".into())),
        Some("always_ask") => Ok(Some("require_approval".into())),
        Some(other) => Err(Error::invalid_field("permission_policy", format!("unknown permission policy {other:?}")).into()),
    }
}
