//! An Automation's `step_connection` (api.md §18.3), as the capability
//! gateway serves it to the scheduler: where a step's tool is and how it
//! stands, and the one `tools/call` governance allowed.
//!
//! The scheduler records the call (a ConnectionCall, `sent_at` set) before
//! asking, and never asks twice for it; what it needs back is not only the
//! answer but whether the call may have left: a failure before the
//! `tools/call` was written is `not_sent` (safe to try again on a later
//! attempt), a timeout or a lost transport after it is `indeterminate`
//! (never sent again).

use crate::connections::ReachService;
use crate::model::*;
use crate::tool_sources::Dispatch;
use checkfu_core::id::{ConnectionId, ToolSourceId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};

use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a step's tool is and how it stands now.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTool {
    pub tool_source_id: String,
    pub connection_id: String,
    pub tool_source_status: String,
    /// `""` when the Connection is gone.
    pub connection_status: String,
    pub offered: bool,
    /// `None` when the tool is not in the last good listing.
    pub input_schema: Option<Value>,
    pub call_timeout_seconds: i64,
}

/// How a step's call ended.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCallAnswer {
    /// `succeeded`, `failed`, `not_sent` or `indeterminate`.
    pub outcome: &'static str,
    /// The §16.4 failure code, or `tool.is_error`; `""` on success.
    pub code: String,
    pub content: String,
    pub structured: Option<Value>,
}

/// The most ToolSources read when finding one by name.
const MAX_SCANNED: usize = 2_000;

impl ReachService {
    /// A step's ToolSource (a `ts_…` or its name in `environment_id`) and
    /// tool: NOT_FOUND when the Environment has no such ToolSource.
    pub async fn resolve_step_tool(&self, environment_id: &str, tool_source: &str, tool: &str) -> Result<StepTool> {
        self.require("tool_sources")?;
        let t = if ToolSourceId::check("tool_source", tool_source).is_ok() {
            self.tool_source(tool_source).await.ok()
        } else {
            self.tool_source_named(environment_id, tool_source).await?
        };
        let t = t.filter(|t| t.environment_id.as_str() == environment_id).ok_or_else(|| Error::not_found("tool_source", tool_source))?;
        let connection = self.store.get_connection(&t.connection_id).await?;
        Ok(StepTool {
            tool_source_id: t.id.to_string(),
            connection_id: t.connection_id.to_string(),
            tool_source_status: t.status.as_str().to_string(),
            connection_status: connection.map(|c| c.status.as_str().to_string()).unwrap_or_default(),
            offered: t.offers(tool),
            input_schema: t.tool(tool).map(|x| x.input_schema.clone()),
            call_timeout_seconds: t.call_timeout_seconds,
        })
    }

    async fn tool_source_named(&self, environment_id: &str, name: &str) -> Result<Option<ToolSource>> {
        let mut page = PageRequest { limit: 100, before_id: None };
        let mut scanned = 0;
        loop {
            let rows = self.store.list_tool_sources(&[environment_id.to_string()], &page).await?;
            scanned += rows.len();
            if let Some(t) = rows.iter().find(|t| t.name == name) {
                return Ok(Some(t.clone()));
            }
            match rows.last() {
                Some(last) if rows.len() >= 100 && scanned < MAX_SCANNED => page.before_id = Some(last.id.to_string()),
                _ => return Ok(None),
            }
        }
    }

    /// One step's `tools/call`, already allowed by governance, with `_meta`
    /// naming its ConnectionCall. Every failure is an answer.
    pub async fn call_for_step(
        &self,
        environment_id: &str,
        tool_source_id: &str,
        connection_id: &str,
        tool: &str,
        arguments: Value,
        connection_call_id: &str,
    ) -> StepCallAnswer {
        let not_sent = |code: &str, message: String| StepCallAnswer {
            outcome: "not_sent",
            code: code.into(),
            content: format!("{code}: {message}"),
            structured: None,
        };
        if ConnectionId::check("connection_id", connection_id).is_err() {
            return not_sent("connection.unavailable", format!("{connection_id:?} is not a Connection id"));
        }
        let sent = AtomicBool::new(false);
        let meta = json!({"checkfu/connection_call_id": connection_call_id});
        let d = Dispatch { environment_id: Some(environment_id), tool_source_id, connection_id, tool, arguments, meta: Some(meta) };
        match self.dispatch(&d, &sent).await {
            Ok(c) if c.is_error => {
                StepCallAnswer { outcome: "failed", code: "tool.is_error".into(), content: c.text, structured: c.structured }
            }
            Ok(c) => StepCallAnswer { outcome: "succeeded", code: String::new(), content: c.text, structured: c.structured },
            Err(f) => {
                let outcome = match (sent.load(Ordering::SeqCst), f.code.as_str()) {
                    (false, _) => "not_sent",
                    // No definite answer came back after the request left.
                    (true, "mcp.timeout" | "mcp.unreachable") => "indeterminate",
                    (true, _) => "failed",
                };
                StepCallAnswer { outcome, content: f.text(), code: f.code, structured: None }
            }
        }
    }
}
