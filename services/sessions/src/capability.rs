//! Capability tokens (see `checkfu_core::capability`): signed here for the
//! lease a claim or a heartbeat holds, and checked here against the Run
//! itself for the public edge, so a token stops working the moment its
//! lease expires, moves to another runner (a new generation) or its Runner
//! is revoked (the Run is taken back). Nothing about a token is stored, and
//! it never enters the log.

use crate::model::Lease;
use crate::model::*;
use crate::runs::Runs;
use checkfu_core::capability::Claims;
use checkfu_core::id::RunId;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};

/// The tools a gateway serves outside the sandbox: what a token scopes. A
/// ToolSource tool is also named with its ToolSource (`tsrc_…/name`), so a
/// call cannot borrow another ToolSource's tool of the same name.
fn served_outside_sandbox(tools: &[ToolDecl]) -> Vec<String> {
    let mut out = vec![];
    for t in tools {
        match t {
            ToolDecl::Builtin { name } if name == "web_fetch" => out.push(name.clone()),
            ToolDecl::ToolSource { tool_source_id, tools, .. } => {
                for n in tools {
                    out.push(n.clone());
                    out.push(format!("{tool_source_id}/{n}"));
                }
            }
            _ => {}
        }
    }
    out
}

fn refused(why: &str) -> Error {
    Error::new(Code::PermissionDenied, format!("the capability token is not valid: {why}"))
        .with_details(serde_json::json!({"reason": "capability_invalid"}))
}

impl Runs {
    fn token_key(&self) -> Result<&checkfu_core::capability::TokenKey> {
        self.token_key.as_ref().ok_or_else(|| Error::unavailable("this sessions service signs no capability tokens (no installation key)"))
    }

    /// The token for the lease `run` is held under now; `tools` are the
    /// Run's (`run_tools`).
    pub(crate) fn mint_capability(&self, session: &Session, run: &Run, tools: &[ToolDecl]) -> Result<String> {
        let tools = served_outside_sandbox(tools);
        self.token_key()?.sign(&Claims {
            session_id: run.session_id.to_string(),
            run_id: run.id.to_string(),
            generation: run.generation,
            environment_id: session.environment_id.to_string(),
            routing_profile_id: session.pins.model_routing_profile_id.to_string(),
            tools,
            runner_id: run.runner_id.clone(),
            expires_ms: run.lease_expires_ms,
        })
    }

    /// A fresh token for a lease a heartbeat just extended.
    pub async fn capability_for(&self, lease: &Lease) -> Result<String> {
        let run = self.log.run(&lease.run_id).await?;
        if !lease.holds(&run) {
            return Err(refused("the run is no longer held under this lease"));
        }
        let session = match self.log.cached_state(&run.session_id) {
            Some((s, _)) => s,
            None => self.log.session(&run.session_id).await?,
        };
        let (tools, _) = self.thread_tools(&session, &run).await?;
        self.mint_capability(&session, &run, &tools)
    }

    /// The claims of a token whose lease is still held now.
    pub async fn verify_capability(&self, token: &str) -> Result<Claims> {
        let claims = self.token_key()?.open(token, now_ms())?;
        let run_id = RunId::parse("capability", &claims.run_id).map_err(|_| refused("malformed"))?;
        let run = match self.log.cached_active_run(&claims.session_id).filter(|r| r.id == run_id) {
            Some(r) => r,
            None => self.store.get_run(&run_id).await?.ok_or_else(|| refused("no such run"))?,
        };
        if run.generation != claims.generation || run.status != RunStatus::Running || run.lease_expires_ms < now_ms() {
            return Err(refused("the run is no longer held under this lease"));
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_token_scopes_only_tools_served_outside_the_sandbox() {
        let tools: Vec<ToolDecl> = serde_json::from_value(json!([
            {"type": "builtin", "name": "bash"},
            {"type": "builtin", "name": "web_fetch"},
            {"type": "custom", "name": "lookup"},
            {"type": "tool_source", "tool_source_id": "tsrc_1", "tools": ["search"]}
        ]))
        .expect("tools");
        assert_eq!(served_outside_sandbox(&tools), vec!["web_fetch", "search", "tsrc_1/search"]);
    }
}
