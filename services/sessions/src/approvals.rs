//! The Session's side of ActionApprovals. Governance owns the approval and
//! takes its one response; the Session records the outcome in its log and
//! ends the wait. Because those are two stores, the outcome is delivered at
//! least once: right after a response (by whoever took it), and by a
//! sweeper that settles every decided or expired approval the Session has
//! not recorded yet, so a crash between the two writes loses nothing and an
//! expired approval resolves its wait as denied.

use crate::draft::Resolved;
use crate::input::Input;
use crate::log::Log;
use crate::model::Event;
use crate::upstream::Governance;
use checkfu_core::id::SessionId;
use checkfu_core::{Error, Result};
use checkfu_proto::governance::v1 as gov;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn resolved(a: &gov::ActionApproval) -> Resolved {
    Resolved {
        approval_id: a.id.clone(),
        tool_use_id: a.tool_use_id.clone(),
        decision: a.decision.clone(),
        status: a.status.clone(),
        responder_principal_id: a.responder_principal_id.clone(),
        deny_message: a.deny_message.clone(),
    }
}

/// The Session's side of ActionApprovals, over the log and governance.
#[derive(Clone)]
pub struct Approvals {
    pub(crate) log: Log,
    pub(crate) governance: Option<Governance>,
}

impl Approvals {
    fn governance(&self) -> Result<Governance> {
        self.governance.clone().ok_or_else(|| Error::unavailable("approvals need the governance service, which this node cannot reach"))
    }

    /// A `user.tool_confirmation` for a gated tool use: governance takes the
    /// decision (checking the author holds `approve`), then the Session
    /// records the echo and the outcome. `None` when no approval waits on
    /// that tool use, so the ordinary rules answer.
    pub(crate) async fn confirm_in_session(&self, session_id: &SessionId, input: &Input) -> Result<Option<Event>> {
        let tool_use_id = input.payload.get("tool_use_id").and_then(Value::as_str).unwrap_or_default();
        let Some(approval_id) = self.log.session(session_id).await?.any_waiting_approval(tool_use_id) else {
            return Ok(None);
        };
        let decision = if input.payload.get("result").and_then(Value::as_str) == Some("allow") { "approve" } else { "deny" };
        let req = gov::RespondToApprovalRequest {
            id: approval_id,
            decision: decision.into(),
            response_token: String::new(),
            standing_ttl_seconds: 0,
            responder_id: input.authored_by.clone(),
            in_session: true,
            // Kept with the decision: whoever records the outcome in the
            // Session (this call, or the sweeper racing it) delivers it.
            deny_message: if decision == "deny" {
                input.payload.get("deny_message").and_then(Value::as_str).unwrap_or_default().to_string()
            } else {
                String::new()
            },
        };
        let approval = self.governance()?.respond_to_approval(req).await.map_err(Error::from)?.into_inner();
        let r = resolved(&approval);
        let (id, _, events) = self.log.transact(session_id, |d| d.confirm(input, &r)).await?;
        self.acknowledge(&approval.id).await;
        let e = events.into_iter().find(|e| e.id == id).ok_or_else(|| Error::internal("appended event missing from the commit"))?;
        Ok(Some(e))
    }

    /// Records a decided approval in its Session. Returns whether the
    /// Session was still waiting on it.
    pub async fn resolve_approval(&self, approval_id: &str) -> Result<bool> {
        let a = self.governance()?.get_action_approval(gov::GetByIdRequest { id: approval_id.into() }).await.map_err(Error::from)?;
        self.settle(&a.into_inner()).await
    }

    async fn settle(&self, a: &gov::ActionApproval) -> Result<bool> {
        if a.status == "pending" {
            return Err(Error::conflict("the approval has not been decided yet"));
        }
        let r = resolved(a);
        let cause = json!({"kind": "action_approval", "id": a.id});
        let outcome = self
            .log
            .transact(&SessionId::parse("session_id", &a.session_id)?, |d| {
                let recorded = d.resolve_approval(&r, cause.clone()).is_some();
                d.unfocus();
                // The Run that asked may not have settled into its wait yet:
                // then the outcome must be delivered again later.
                let may_wait_later = !recorded && d.run.iter().chain(&d.child_runs).any(|run| run.id == a.run_id);
                Ok((recorded, may_wait_later))
            })
            .await;
        let (recorded, may_wait_later) = match outcome {
            Ok((x, _, _)) => x,
            // The Session is gone: nothing waits on the approval.
            Err(e) if e.code == checkfu_core::Code::NotFound => (false, false),
            Err(e) => return Err(e),
        };
        if !may_wait_later {
            self.acknowledge(&a.id).await;
        }
        Ok(recorded)
    }

    /// Tells governance the outcome is recorded; if this is lost, the
    /// sweeper delivers it again and the Session ignores the repeat.
    async fn acknowledge(&self, approval_id: &str) {
        if let Ok(mut g) = self.governance()
            && let Err(status) = g.mark_approval_settled(gov::GetByIdRequest { id: approval_id.into() }).await
        {
            tracing::warn!(%status, approval_id, "could not acknowledge an approval outcome; it will be delivered again");
        }
    }

    /// Withdraws approvals the Session stopped waiting for. Best effort: if
    /// governance cannot be reached they stay pending until they expire,
    /// and a late approval then changes nothing (the Session no longer waits).
    pub(crate) async fn withdraw_approvals(&self, ids: &[String], actor: &str) {
        let Ok(g) = self.governance() else { return };
        for id in ids {
            let req = gov::ActorRequest { id: id.clone(), actor_id: actor.into() };
            if let Err(status) = g.clone().withdraw_approval(req).await {
                tracing::warn!(%status, approval_id = %id, "could not withdraw an approval the Session no longer waits for; it expires on its own");
            }
        }
    }

    /// One sweep: settles every decided or expired approval not yet recorded.
    pub async fn sweep_approvals(&self) -> Result<usize> {
        let list = self.governance()?.list_unsettled_approvals(gov::ListRequest { limit: 100, page: String::new() }).await;
        let mut n = 0;
        for a in list.map_err(Error::from)?.into_inner().data {
            if self.settle(&a).await? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Sweeps every `every` until `stop`.
    pub async fn run_approval_sweeper(self, every: Duration, stop: CancellationToken) {
        crate::sweeps::every(every, stop, "approval", || self.sweep_approvals()).await
    }
}
