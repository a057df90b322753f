//! ActionApprovals and StandingApprovals: the third check after
//! PermissionAssignment and ActionPolicy. An approval freezes what it decides
//! (who, which agent, which tool, which arguments) when it is asked for, takes
//! exactly one response from a holder of `approve`, and expires as denied. A
//! StandingApproval is only ever minted by an approve response that asks for
//! one, covers one exact tuple, and ends at its TTL or when revoked.

use crate::model::*;
use crate::service::GovernanceService;
use checkfu_core::id::{AgentId, ApprovalId, EnvironmentId, PrincipalId, RunId, SessionId, StandingApprovalId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result, sha256_hex};
use serde_json::json;

fn new_token() -> String {
    checkfu_core::new_secret("art_")
}

/// Compares tokens without leaking where they differ.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl GovernanceService {
    /// Answers a call that resolved to `require_approval`: allowed by a
    /// StandingApproval on the exact tuple, or a pending ActionApproval
    /// (the same one when the same call asks again).
    pub async fn request_approval(&self, ask: &ApprovalAsk) -> Result<Asked> {
        let environment_id = EnvironmentId::parse("environment_id", &ask.environment_id)?;
        let session_id = SessionId::parse("session_id", &ask.session_id)?;
        PrincipalId::check("principal_id", &ask.principal_id)?;
        if ask.tool_use_id.is_empty() || ask.tool.is_empty() || ask.tool_use_id.len() > 200 || ask.tool.len() > 200 {
            return Err(Error::invalid("tool_use_id and tool are required (at most 200 bytes)"));
        }
        let arguments = ask.arguments.to_string();
        if arguments.len() > MAX_ARGUMENTS_BYTES {
            return Err(Error::invalid_field("frozen.arguments", "arguments are limited to 256 KiB"));
        }
        let now = now_ms();
        if let Some(s) =
            self.store.covering_standing(&ask.environment_id, &ask.principal_id, &ask.agent_id, &ask.tool, &ask.connection_id, now).await?
        {
            return Ok(Asked::Standing(s.id.into()));
        }
        if let Some(a) = self.store.approval_for(&ask.session_id, &ask.tool_use_id).await? {
            return Ok(Asked::Pending(Box::new(a)));
        }
        let a = ActionApproval {
            id: ApprovalId::mint(),
            environment_id,
            status: ApprovalStatus::Pending,
            session_id,
            run_id: RunId::parse("run_id", &ask.run_id)?,
            tool_use_id: ask.tool_use_id.clone(),
            frozen: Frozen {
                principal_id: ask.principal_id.clone(),
                agent_id: ask.agent_id.clone(),
                tool: ask.tool.clone(),
                connection_id: ask.connection_id.clone(),
                arguments: ask.arguments.clone(),
                arguments_sha256: sha256_hex(&arguments),
            },
            response_token: new_token(),
            expires_ms: now + self.approval_ttl_ms,
            responder_principal_id: String::new(),
            responded_ms: None,
            decision: String::new(),
            standing_approval_id: String::new(),
            deny_message: String::new(),
            settled: false,
            created_ms: now,
            automation_firing_id: String::new(),
            step_id: String::new(),
        };
        if !self.store.insert_approval(&a).await? {
            // The same call asked concurrently: answer with the first one.
            let first = self.store.approval_for(&ask.session_id, &ask.tool_use_id).await?;
            return first
                .map(|a| Asked::Pending(Box::new(a)))
                .ok_or_else(|| Error::internal("the approval vanished after a conflicting insert"));
        }
        Ok(Asked::Pending(Box::new(a)))
    }

    pub async fn approval(&self, id: &str) -> Result<ActionApproval> {
        ApprovalId::check("id", id)?;
        let a = self.store.get_approval(id).await?.ok_or_else(|| Error::not_found("action_approval", id))?;
        self.expire_if_overdue(a).await
    }

    pub async fn list_approvals(
        &self,
        environment_ids: &[String],
        status: &str,
        session_id: &str,
        page: &PageRequest,
    ) -> Result<Vec<ActionApproval>> {
        if !status.is_empty() {
            ApprovalStatus::parse("status", status)?;
        }
        self.expire_overdue().await?;
        self.store.list_approvals(environment_ids, status, session_id, page).await
    }

    /// Expires one approval whose time ran out while pending.
    async fn expire_if_overdue(&self, a: ActionApproval) -> Result<ActionApproval> {
        if a.status != ApprovalStatus::Pending || a.expires_ms >= now_ms() {
            return Ok(a);
        }
        let expired = ActionApproval { status: ApprovalStatus::Expired, decision: "deny".into(), response_token: String::new(), ..a };
        if self.store.decide_approval(&expired).await? {
            self.audit("system", "action_approval.expired", "action_approval", &expired.id, json!({"session_id": expired.session_id}))
                .await?;
            return Ok(expired);
        }
        self.store.get_approval(&expired.id).await?.ok_or_else(|| Error::not_found("action_approval", &expired.id))
    }

    /// Expires every approval whose time ran out.
    pub async fn expire_overdue(&self) -> Result<usize> {
        let overdue = self.store.overdue_approvals(now_ms(), 500).await?;
        let n = overdue.len();
        for a in overdue {
            self.expire_if_overdue(a).await?;
        }
        Ok(n)
    }

    /// Takes the one response an approval accepts. A second response, a
    /// wrong token or a late one is a conflict; the responder must hold
    /// `approve` on the approval's Environment.
    pub async fn respond(&self, r: &Response) -> Result<ActionApproval> {
        let approve = match r.decision.as_str() {
            "approve" => true,
            "deny" => false,
            _ => return Err(Error::invalid_field("decision", "decision must be approve or deny")),
        };
        if r.standing_ttl_seconds < 0 {
            return Err(Error::invalid_field("standing.ttl_seconds", "ttl_seconds must be positive"));
        }
        if !r.deny_message.is_empty() && (approve || !r.in_session || r.deny_message.len() > 4096) {
            return Err(Error::invalid_field("deny_message", "a deny_message (at most 4 KiB) goes with a denial given inside the Session"));
        }
        if r.standing_ttl_seconds > 0 && !approve {
            return Err(Error::invalid_field("standing", "a StandingApproval can only come from an approve response"));
        }
        let a = self.approval(&r.id).await?;
        if a.for_step() && (r.standing_ttl_seconds > 0 || r.in_session) {
            return Err(Error::invalid_field(
                "standing",
                "an Automation's approval step takes a plain approve or deny: no StandingApproval comes from it",
            ));
        }
        let (may, _) = self.check(&r.responder_id, "approve", "environment", &a.environment_id, Some(&a.environment_id)).await?;
        if !may {
            return Err(Error::denied(format!("responding to an ActionApproval needs approve on environment {}", a.environment_id)));
        }
        match a.status {
            ApprovalStatus::Pending => {}
            ApprovalStatus::Expired => {
                let why = "the approval expired (its time ran out, or its Session stopped waiting) before this response";
                return Err(Error::conflict(why).with_details(json!({"status": "expired"})));
            }
            s => {
                return Err(Error::conflict("the approval was already responded to").with_details(json!({"status": s.as_str()})));
            }
        }
        if !r.in_session && !same_token(&r.response_token, &a.response_token) {
            return Err(Error::conflict("the response token does not match this approval"));
        }
        let now = now_ms();
        let mut decided = ActionApproval {
            status: if approve { ApprovalStatus::Approved } else { ApprovalStatus::Denied },
            decision: r.decision.clone(),
            responder_principal_id: r.responder_id.clone(),
            responded_ms: Some(now),
            response_token: String::new(),
            deny_message: r.deny_message.clone(),
            ..a.clone()
        };
        let standing = if r.standing_ttl_seconds > 0 {
            Some(StandingApproval {
                id: StandingApprovalId::mint(),
                environment_id: a.environment_id.clone(),
                principal_id: PrincipalId::parse("frozen.principal_id", &a.frozen.principal_id)?,
                agent_id: AgentId::parse("frozen.agent_id", &a.frozen.agent_id)?,
                tool: a.frozen.tool.clone(),
                connection_id: a.frozen.connection_id.clone(),
                expires_ms: now + r.standing_ttl_seconds.min(MAX_STANDING_TTL_SECONDS) * 1000,
                created_from_approval_id: a.id.clone(),
                created_by: r.responder_id.clone(),
                revoked_ms: None,
                created_ms: now,
            })
        } else {
            None
        };
        if let Some(s) = &standing {
            decided.standing_approval_id = s.id.clone().into();
        }
        if !self.store.decide_approval(&decided).await? {
            return Err(Error::conflict("the approval was already responded to"));
        }
        let via = if r.in_session { "session" } else { "api" };
        self.audit(
            &r.responder_id,
            &format!("action_approval.{}", decided.status.as_str()),
            "action_approval",
            &a.id,
            json!({"session_id": a.session_id, "tool": a.frozen.tool, "via": via}),
        )
        .await?;
        if let Some(s) = standing {
            self.store.insert_standing(&s).await?;
            self.audit(
                &r.responder_id,
                "standing_approval.created",
                "standing_approval",
                &s.id,
                json!({"tuple": {"principal_id": s.principal_id, "agent_id": s.agent_id, "tool": s.tool, "connection_id": s.connection_id},
                       "created_from_approval_id": a.id, "expires_ms": s.expires_ms}),
            )
            .await?;
        }
        Ok(decided)
    }

    /// Decided or expired approvals whose Session (or, `steps`, whose
    /// Automation firing) has not recorded them.
    pub async fn unsettled_approvals(&self, steps: bool, limit: u32) -> Result<Vec<ActionApproval>> {
        self.expire_overdue().await?;
        self.store.unsettled_approvals(steps, i64::from(limit.clamp(1, 500))).await
    }

    /// An Automation's approval step (api.md §12.8 rule 6): a pending
    /// ActionApproval with no Session, Run or tool use, frozen as
    /// `{principal_id: the service Principal, tool:"automation.approval",
    /// arguments:{title}}`; asking again answers the same one. No
    /// StandingApproval answers it, and none can come from it.
    ///
    /// A `step_connection`'s call (§18.3) is frozen as the call itself —
    /// `{principal_id, agent_id: null, tool, connection_id, arguments}` —
    /// once per (firing, step, attempt). A StandingApproval's tuple names
    /// an agent, which an Automation's call has none of, so none covers it
    /// and every such call that needs approval asks.
    pub async fn request_step_approval(&self, ask: &StepAsk) -> Result<ActionApproval> {
        let environment_id = EnvironmentId::parse("environment_id", &ask.environment_id)?;
        checkfu_core::id::FiringId::check("automation_firing_id", &ask.automation_firing_id)?;
        PrincipalId::check("principal_id", &ask.principal_id)?;
        if ask.step_id.is_empty() || ask.step_id.len() > 128 || ask.title.is_empty() || ask.title.len() > 500 {
            return Err(Error::invalid("step_id (at most 128 bytes) and title (at most 500 bytes) are required"));
        }
        if !(60..=86_400).contains(&ask.ttl_seconds) {
            return Err(Error::invalid_field("ttl_seconds", "ttl_seconds is 60 to 86,400"));
        }
        let key = match &ask.call {
            Some(c) => format!("{}/{}/{}", ask.automation_firing_id, ask.step_id, c.attempt),
            None => format!("{}/{}", ask.automation_firing_id, ask.step_id),
        };
        if let Some(a) = self.store.approval_for("", &key).await? {
            return Ok(a);
        }
        let now = now_ms();
        let (tool, connection_id, arguments) = match &ask.call {
            Some(c) => {
                if c.tool.is_empty() || c.tool.len() > 200 || c.connection_id.len() > 200 {
                    return Err(Error::invalid("a step call's tool (at most 200 bytes) is required"));
                }
                if c.arguments.to_string().len() > MAX_ARGUMENTS_BYTES {
                    return Err(Error::invalid_field("frozen.arguments", "arguments are limited to 256 KiB"));
                }
                (c.tool.clone(), c.connection_id.clone(), c.arguments.clone())
            }
            None => ("automation.approval".to_string(), String::new(), json!({"title": ask.title})),
        };
        let a = ActionApproval {
            id: ApprovalId::mint(),
            environment_id,
            status: ApprovalStatus::Pending,
            session_id: checkfu_core::id::TypedId::stored(String::new()),
            run_id: checkfu_core::id::TypedId::stored(String::new()),
            tool_use_id: key.clone(),
            frozen: Frozen {
                principal_id: ask.principal_id.clone(),
                agent_id: String::new(),
                tool,
                connection_id,
                arguments_sha256: sha256_hex(arguments.to_string()),
                arguments,
            },
            response_token: new_token(),
            expires_ms: now + ask.ttl_seconds * 1000,
            responder_principal_id: String::new(),
            responded_ms: None,
            decision: String::new(),
            standing_approval_id: String::new(),
            deny_message: String::new(),
            settled: false,
            created_ms: now,
            automation_firing_id: ask.automation_firing_id.clone(),
            step_id: ask.step_id.clone(),
        };
        if !self.store.insert_approval(&a).await? {
            return self
                .store
                .approval_for("", &key)
                .await?
                .ok_or_else(|| Error::internal("the approval vanished after a conflicting insert"));
        }
        self.audit(
            "system",
            "action_approval.requested",
            "action_approval",
            &a.id,
            json!({"automation_firing_id": a.automation_firing_id, "step_id": a.step_id}),
        )
        .await?;
        Ok(a)
    }

    /// Ends a pending approval its Session no longer waits for, so no
    /// approver answers a call that will never run. It expires now (the
    /// status a pending approval takes when nobody decides it in time).
    pub async fn withdraw(&self, id: &str, actor: &str) -> Result<ActionApproval> {
        let a = self.approval(id).await?;
        if a.status != ApprovalStatus::Pending {
            return Ok(a);
        }
        let expired = ActionApproval { status: ApprovalStatus::Expired, decision: "deny".into(), response_token: String::new(), ..a };
        if self.store.decide_approval(&expired).await? {
            let why = json!({"session_id": expired.session_id, "reason": "the Session stopped waiting for it (interrupted)"});
            self.audit(actor, "action_approval.withdrawn", "action_approval", &expired.id, why).await?;
            return Ok(expired);
        }
        self.store.get_approval(id).await?.ok_or_else(|| Error::not_found("action_approval", id))
    }

    pub async fn mark_settled(&self, id: &str) -> Result<ActionApproval> {
        ApprovalId::check("id", id)?;
        self.store.mark_settled(id).await?;
        self.store.get_approval(id).await?.ok_or_else(|| Error::not_found("action_approval", id))
    }

    pub async fn standing_approval(&self, id: &str) -> Result<StandingApproval> {
        StandingApprovalId::check("id", id)?;
        self.store.get_standing(id).await?.ok_or_else(|| Error::not_found("standing_approval", id))
    }

    pub async fn list_standing(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<StandingApproval>> {
        self.store.list_standing(environment_ids, page).await
    }

    /// Revokes at once; the next call with the tuple asks again.
    pub async fn revoke_standing(&self, id: &str, actor: &str) -> Result<StandingApproval> {
        let s = self.standing_approval(id).await?;
        if s.revoked_ms.is_some() {
            return Ok(s);
        }
        self.store.revoke_standing(id, now_ms()).await?;
        self.audit(actor, "standing_approval.revoked", "standing_approval", id, json!({"tool": s.tool, "principal_id": s.principal_id}))
            .await?;
        self.standing_approval(id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("art_ab", "art_ab"));
        assert!(!same_token("art_ab", "art_ac"));
        assert!(!same_token("art_ab", "art_abc"));
        assert!(!same_token("", "art_ab"));
        assert!(new_token().starts_with("art_"));
    }

    #[test]
    fn frozen_context_round_trips() {
        let f = Frozen {
            principal_id: "prin_1".into(),
            agent_id: "agt_1".into(),
            tool: "write".into(),
            connection_id: String::new(),
            arguments: json!({"path": "a"}),
            arguments_sha256: "x".into(),
        };
        assert_eq!(Frozen::from_json(&f.to_json()), f);
    }
}
