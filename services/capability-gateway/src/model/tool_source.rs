//! A ToolSource (api.md §16.4): an MCP server reached through a
//! Connection, the tools it last listed, and which of them agents may be
//! offered.

use checkfu_core::id::{ConnectionId, EnvironmentId, ToolSourceId};
use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

string_enum!(ToolSourceStatus { Active = "active", Archived = "archived" });

string_enum!(SyncStatus { Ok = "ok", Failed = "failed" });

/// At most this many tools are kept from one listing.
pub const MAX_TOOLS: usize = 500;
/// A tool's input schema is at most this many bytes of JSON.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
pub const DEFAULT_CALL_TIMEOUT_SECONDS: i64 = 120;
pub const MAX_CALL_TIMEOUT_SECONDS: i64 = 600;
pub const DEFAULT_SYNC_INTERVAL_SECONDS: i64 = 21_600;
/// The shortest automatic re-sync; 0 means manual only.
pub const MIN_SYNC_INTERVAL_SECONDS: i64 = 60;

/// A tool as the server last described it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub input_schema: Value,
    #[serde(default)]
    pub annotations: Value,
}

/// Why the last sync failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncError {
    /// `authentication_failed`, `unreachable`, `timeout`, `protocol_error`,
    /// `credential.refresh_failed`, `credential.unreadable`.
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSource {
    pub id: ToolSourceId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub description: String,
    pub connection_id: ConnectionId,
    /// The subsetting posture, fixed at creation: `true` offers every
    /// discovered tool not disabled, `false` only tools enabled explicitly.
    pub default_enabled: bool,
    pub call_timeout_seconds: i64,
    pub sync_interval_seconds: i64,
    /// The last good listing.
    pub tools: Vec<SourceTool>,
    /// Per-tool enablement, by name; no sync changes it.
    pub overrides: BTreeMap<String, bool>,
    pub sync_status: Option<SyncStatus>,
    pub sync_error: Option<SyncError>,
    pub synced_ms: Option<i64>,
    pub status: ToolSourceStatus,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

/// §5's rule for a tool's name.
pub fn nameable(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl ToolSource {
    /// `true`, `false`, or `None` (follows `default_enabled`).
    pub fn enabled(&self, name: &str) -> Option<bool> {
        self.overrides.get(name).copied()
    }

    /// In the last good list, named by §5's rule, and enabled (or unset
    /// under `default_enabled`), on an active ToolSource.
    pub fn offers(&self, name: &str) -> bool {
        self.status == ToolSourceStatus::Active
            && nameable(name)
            && self.tools.iter().any(|t| t.name == name)
            && self.enabled(name).unwrap_or(self.default_enabled)
    }

    pub fn tool(&self, name: &str) -> Option<&SourceTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// When the next automatic sync is due; `None` for manual only.
    pub fn next_sync_ms(&self) -> Option<i64> {
        (self.sync_interval_seconds > 0 && self.status == ToolSourceStatus::Active)
            .then(|| self.synced_ms.unwrap_or(self.created_ms) + self.sync_interval_seconds * 1000)
    }
}

pub fn check_timeouts(call_timeout_seconds: i64, sync_interval_seconds: i64) -> Result<()> {
    if !(1..=MAX_CALL_TIMEOUT_SECONDS).contains(&call_timeout_seconds) {
        return Err(Error::invalid_field("call_timeout_seconds", format!("call_timeout_seconds must be 1 to {MAX_CALL_TIMEOUT_SECONDS}")));
    }
    if sync_interval_seconds != 0 && !(MIN_SYNC_INTERVAL_SECONDS..=30 * 86_400).contains(&sync_interval_seconds) {
        return Err(Error::invalid_field(
            "sync_interval_seconds",
            format!("sync_interval_seconds must be 0 (manual) or {MIN_SYNC_INTERVAL_SECONDS} to 2592000"),
        ));
    }
    Ok(())
}

/// Keeps what a listing may hold: at most [`MAX_TOOLS`] tools, each schema
/// an object of at most [`MAX_SCHEMA_BYTES`]; a tool with a larger or
/// malformed schema is dropped (it could not be offered faithfully).
pub fn bounded(tools: Vec<SourceTool>) -> std::result::Result<Vec<SourceTool>, String> {
    if tools.len() > MAX_TOOLS {
        return Err(format!("the server lists {} tools; at most {MAX_TOOLS} are kept", tools.len()));
    }
    Ok(tools.into_iter().filter(|t| t.input_schema.is_object() && t.input_schema.to_string().len() <= MAX_SCHEMA_BYTES).collect())
}

impl crate::versioned::Versioned for ToolSource {
    const KIND: &'static str = "tool source";

    fn version(&self) -> i64 {
        self.version
    }

    fn bump(&mut self, now_ms: i64) {
        self.version += 1;
        self.updated_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_core::testing::tid;
    use serde_json::json;

    fn source(default_enabled: bool) -> ToolSource {
        ToolSource {
            id: tid("tsrc_1"),
            environment_id: tid("env_1"),
            name: "t".into(),
            description: String::new(),
            connection_id: tid("conn_1"),
            default_enabled,
            call_timeout_seconds: 2,
            sync_interval_seconds: 0,
            tools: vec![
                SourceTool {
                    name: "add".into(),
                    description: String::new(),
                    input_schema: json!({"type": "object"}),
                    annotations: json!({}),
                },
                SourceTool {
                    name: "Bad.Name".into(),
                    description: String::new(),
                    input_schema: json!({"type": "object"}),
                    annotations: json!({}),
                },
            ],
            overrides: BTreeMap::new(),
            sync_status: Some(SyncStatus::Ok),
            sync_error: None,
            synced_ms: Some(1),
            status: ToolSourceStatus::Active,
            created_by: "prin_1".into(),
            created_ms: 1,
            updated_ms: 1,
            version: 1,
        }
    }

    #[test]
    fn offering_follows_the_posture_overrides_names_and_status() {
        let mut s = source(true);
        assert!(s.offers("add"));
        assert!(!s.offers("Bad.Name"), "named by §5's rule");
        assert!(!s.offers("gone"), "only listed tools");
        s.overrides.insert("add".into(), false);
        assert!(!s.offers("add"));
        let mut s = source(false);
        assert!(!s.offers("add"));
        s.overrides.insert("add".into(), true);
        assert!(s.offers("add"));
        s.status = ToolSourceStatus::Archived;
        assert!(!s.offers("add"));
    }

    #[test]
    fn limits_are_checked() {
        assert!(check_timeouts(0, 0).is_err());
        assert!(check_timeouts(601, 0).is_err());
        assert!(check_timeouts(2, 30).is_err());
        assert!(check_timeouts(120, 21_600).is_ok());
        let big = SourceTool {
            name: "b".into(),
            description: String::new(),
            input_schema: json!({"d": "x".repeat(MAX_SCHEMA_BYTES)}),
            annotations: json!({}),
        };
        assert!(bounded(vec![big]).expect("kept").is_empty());
        let many = vec![source(true).tools[0].clone(); MAX_TOOLS + 1];
        assert!(bounded(many).is_err());
    }
}
