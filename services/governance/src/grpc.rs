//! Thin gRPC handlers: convert the request, call the service, map errors.

use crate::model::*;
use crate::service::GovernanceService;
use checkfu_core::page::PageRequest;
use checkfu_core::time::{rfc3339, rfc3339_opt};
use checkfu_proto::governance::v1 as pb;
use checkfu_proto::governance::v1::governance_service_server::GovernanceService as Rpc;
use tonic::{Request, Response, Status};

pub struct GovernanceGrpc {
    pub svc: GovernanceService,
    /// Checks the capability token of a call a self-hosted Runner makes
    /// through the public edge.
    pub tokens: checkfu_proto::token::Verifier,
}

/// A call made for a Run (it carries the Run's capability token) must stay
/// inside that Run's Session and Environment. The managed runner and the
/// gateway's own API calls carry none; a Runner's call through the public
/// edge always does, and `RequestApproval` from the gateway requires one.
fn within(claims: &Option<checkfu_core::capability::Claims>, environment_id: &str, session_id: &str) -> Result<(), Status> {
    match claims {
        Some(c) if c.environment_id != environment_id || c.session_id != session_id => {
            Err(Status::permission_denied("the capability token is for another Session"))
        }
        _ => Ok(()),
    }
}

impl GovernanceGrpc {
    /// The claims of the call's capability token; `required` unless the
    /// managed runner makes the call.
    fn claims<T>(&self, r: &Request<T>, required: bool) -> Result<Option<checkfu_core::capability::Claims>, Status> {
        if checkfu_proto::token::token_of(r).is_empty() {
            // The managed runner, and sessions asking for the platform's
            // own tools (multiagent), act inside the mesh without a token.
            let managed =
                checkfu_proto::mesh::caller(r).is_some_and(|c| c.is(checkfu_core::Role::Runner) || c.is(checkfu_core::Role::Sessions));
            return if required && !managed {
                Err(Status::permission_denied("a capability token for the Run is required"))
            } else {
                Ok(None)
            };
        }
        self.tokens.verify(r).map(Some)
    }
}

type R<T> = Result<Response<T>, Status>;

fn ok<T>(v: T) -> R<T> {
    Ok(Response::new(v))
}

fn principal(p: Principal) -> pb::Principal {
    pb::Principal { id: p.id.into(), kind: p.kind.as_str().into(), name: p.name, disabled: p.disabled, created_at: rfc3339(p.created_ms) }
}

fn console_session(s: LiveConsoleSession) -> pb::ConsoleSession {
    pb::ConsoleSession {
        id: s.session.id.into(),
        principal_id: s.session.principal_id.into(),
        key_id: s.session.key_id.into(),
        created_ms: s.session.created_ms,
        expires_ms: s.session.expires_ms,
        idle_timeout_ms: CONSOLE_SESSION_IDLE_MS,
        csrf_sha256: s.csrf_sha256,
    }
}

fn api_key(k: ApiKey) -> pb::ApiKey {
    pb::ApiKey {
        id: k.id.into(),
        principal_id: k.principal_id.into(),
        name: k.name,
        created_at: rfc3339(k.created_ms),
        revoked_at: rfc3339_opt(k.revoked_ms),
    }
}

fn group(g: Group) -> pb::Group {
    pb::Group {
        id: g.id.into(),
        name: g.name,
        member_ids: g.member_ids.into_iter().map(String::from).collect(),
        created_at: rfc3339(g.created_ms),
    }
}

fn environment(e: Environment) -> pb::Environment {
    pb::Environment { id: e.id.into(), name: e.name, version: e.version, disabled: e.disabled, created_at: rfc3339(e.created_ms) }
}

fn assignment(a: Assignment) -> pb::PermissionAssignment {
    pb::PermissionAssignment {
        id: a.id.into(),
        subject: Some(pb::ResourceRef { kind: a.subject_kind.as_str().into(), id: a.subject_id }),
        permission: a.permission.as_str().into(),
        resource: Some(pb::ResourceRef { kind: a.resource_kind.as_str().into(), id: a.resource_id }),
        environment_id: a.environment_id.map(String::from).unwrap_or_default(),
        created_by: a.created_by,
        created_at: rfc3339(a.created_ms),
        via: a.via.map(|v| pb::ResourceRef { kind: v.kind, id: v.id }),
    }
}

fn vault(v: ConnectionVault) -> pb::ConnectionVault {
    pb::ConnectionVault {
        id: v.id.into(),
        environment_id: v.environment_id.into(),
        name: v.name,
        connection_ids: v.connection_ids,
        grantees: v.grantees.into_iter().map(|g| pb::Grantee { kind: g.kind, id: g.id }).collect(),
        created_by: v.created_by,
        created_at: rfc3339(v.created_ms),
        updated_at: rfc3339(v.updated_ms),
        version: v.version,
        metadata: v.metadata.into_iter().collect(),
        archived_at: v.archived_ms.map(rfc3339).unwrap_or_default(),
    }
}

fn grantees(g: Vec<pb::Grantee>) -> Vec<Grantee> {
    g.into_iter().map(|g| Grantee { kind: g.kind, id: g.id }).collect()
}

// `rules_json` is written for 0.1.0 readers until the release after it.
#[allow(deprecated)]
fn policy(p: crate::policy::ActionPolicy) -> pb::ActionPolicy {
    pb::ActionPolicy {
        rules_json: serde_json::to_string(&p.rules).unwrap_or_else(|_| "[]".into()),
        rules: p.rules.iter().map(crate::policy_wire::rule).collect(),
        id: p.id.into(),
        environment_id: p.environment_id.into(),
        name: p.name,
        version: p.version,
        created_at: rfc3339(p.created_ms),
        updated_at: rfc3339(p.updated_ms),
    }
}

fn approval(a: crate::model::ActionApproval) -> pb::ActionApproval {
    let step = a.for_step();
    let f = a.frozen;
    pb::ActionApproval {
        id: a.id.into(),
        environment_id: a.environment_id.into(),
        status: a.status.as_str().into(),
        session_id: a.session_id.into(),
        run_id: a.run_id.into(),
        // A step's approval is keyed by its firing and step, not a tool use.
        tool_use_id: if step { String::new() } else { a.tool_use_id },
        automation_firing_id: a.automation_firing_id,
        step_id: a.step_id,
        frozen: Some(pb::FrozenAction {
            principal_id: f.principal_id,
            agent_id: f.agent_id,
            tool: f.tool,
            connection_id: f.connection_id,
            arguments_json: f.arguments.to_string(),
            arguments_sha256: f.arguments_sha256,
        }),
        expires_at: rfc3339(a.expires_ms),
        expires_ms: a.expires_ms,
        responder_principal_id: a.responder_principal_id,
        responded_at: rfc3339_opt(a.responded_ms),
        deny_message: a.deny_message,
        decision: a.decision,
        response_token: a.response_token,
        created_at: rfc3339(a.created_ms),
        standing_approval_id: a.standing_approval_id,
    }
}

fn standing(s: crate::model::StandingApproval) -> pb::StandingApproval {
    pb::StandingApproval {
        id: s.id.into(),
        environment_id: s.environment_id.into(),
        principal_id: s.principal_id.into(),
        agent_id: s.agent_id.into(),
        tool: s.tool,
        connection_id: s.connection_id,
        expires_at: rfc3339(s.expires_ms),
        created_from_approval_id: s.created_from_approval_id.into(),
        revoked_at: rfc3339_opt(s.revoked_ms),
        created_at: rfc3339(s.created_ms),
        created_by: s.created_by,
    }
}

/// The tool of an evaluation: the typed one, else a 0.1.0 caller's JSON.
fn called_tool(typed: Option<pb::CalledTool>, json: &str) -> Result<crate::policy::CalledTool, Status> {
    let t = match typed {
        Some(t) => t,
        None => pb::CalledTool::from_declaration(&json_doc("tool", json)?),
    };
    Ok(crate::policy::CalledTool { kind: t.r#type, name: t.name, read_only: t.read_only, destructive: t.destructive })
}

fn json_doc(field: &str, s: &str) -> Result<serde_json::Value, Status> {
    serde_json::from_str(s).map_err(|e| Status::from(checkfu_core::Error::invalid_field(field, format!("{field} is not valid JSON: {e}"))))
}

fn page(limit: u32, token: &str) -> Result<PageRequest, Status> {
    Ok(PageRequest::standard(limit, token)?)
}

fn paged<T, U>(p: &PageRequest, rows: Vec<T>, id: impl Fn(&T) -> &str, conv: impl Fn(T) -> U) -> (Vec<U>, String) {
    let (rows, next) = p.finish(rows, id);
    (rows.into_iter().map(conv).collect(), next)
}

#[tonic::async_trait]
impl Rpc for GovernanceGrpc {
    async fn authenticate(&self, r: Request<pb::AuthenticateRequest>) -> R<pb::AuthenticateResponse> {
        let (principal_id, key_id) = self.svc.authenticate(&r.into_inner().secret).await?;
        ok(pb::AuthenticateResponse { principal_id, key_id })
    }

    async fn open_console_session(&self, r: Request<pb::AuthenticateRequest>) -> R<pb::OpenConsoleSessionResponse> {
        let opened = self.svc.open_console_session(&r.into_inner().secret).await?;
        let live = LiveConsoleSession { session: opened.session, csrf_sha256: checkfu_core::sha256_hex(&opened.csrf_token) };
        ok(pb::OpenConsoleSessionResponse { session: Some(console_session(live)), token: opened.token, csrf_token: opened.csrf_token })
    }

    async fn resolve_console_session(&self, r: Request<pb::ConsoleTokenRequest>) -> R<pb::ConsoleSession> {
        ok(console_session(self.svc.resolve_console_session(&r.into_inner().token).await?))
    }

    async fn close_console_session(&self, r: Request<pb::ConsoleTokenRequest>) -> R<pb::ConsoleSessionClosed> {
        self.svc.close_console_session(&r.into_inner().token).await?;
        ok(pb::ConsoleSessionClosed {})
    }

    async fn create_principal(&self, r: Request<pb::CreatePrincipalRequest>) -> R<pb::Principal> {
        let r = r.into_inner();
        ok(principal(self.svc.create_principal(&r.kind, &r.name, &r.actor_id).await?))
    }

    async fn get_principal(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Principal> {
        ok(principal(self.svc.principal(&r.into_inner().id).await?))
    }

    async fn list_principals(&self, r: Request<pb::ListRequest>) -> R<pb::ListPrincipalsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_principals(&p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, principal);
        ok(pb::ListPrincipalsResponse { data, next_page })
    }

    async fn update_principal(&self, r: Request<pb::UpdatePrincipalRequest>) -> R<pb::Principal> {
        let r = r.into_inner();
        ok(principal(self.svc.update_principal(&r.id, r.disabled, &r.actor_id).await?))
    }

    async fn create_api_key(&self, r: Request<pb::CreateApiKeyRequest>) -> R<pb::CreateApiKeyResponse> {
        let r = r.into_inner();
        let (key, secret) = self.svc.create_api_key(&r.principal_id, &r.name, &r.actor_id).await?;
        ok(pb::CreateApiKeyResponse { key: Some(api_key(key)), secret })
    }

    async fn get_api_key(&self, r: Request<pb::GetByIdRequest>) -> R<pb::ApiKey> {
        ok(api_key(self.svc.api_key(&r.into_inner().id).await?))
    }

    async fn list_api_keys(&self, r: Request<pb::ListApiKeysRequest>) -> R<pb::ListApiKeysResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_api_keys(&r.principal_id, &p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, api_key);
        ok(pb::ListApiKeysResponse { data, next_page })
    }

    async fn revoke_api_key(&self, r: Request<pb::ActorRequest>) -> R<pb::ApiKey> {
        let r = r.into_inner();
        ok(api_key(self.svc.revoke_api_key(&r.id, &r.actor_id).await?))
    }

    async fn create_group(&self, r: Request<pb::CreateGroupRequest>) -> R<pb::Group> {
        let r = r.into_inner();
        ok(group(self.svc.create_group(&r.name, &r.actor_id).await?))
    }

    async fn get_group(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Group> {
        ok(group(self.svc.group(&r.into_inner().id).await?))
    }

    async fn list_groups(&self, r: Request<pb::ListRequest>) -> R<pb::ListGroupsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_groups(&p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, group);
        ok(pb::ListGroupsResponse { data, next_page })
    }

    async fn add_group_member(&self, r: Request<pb::GroupMemberRequest>) -> R<pb::Group> {
        let r = r.into_inner();
        ok(group(self.svc.add_group_member(&r.group_id, &r.principal_id, &r.actor_id).await?))
    }

    async fn remove_group_member(&self, r: Request<pb::GroupMemberRequest>) -> R<pb::Group> {
        let r = r.into_inner();
        ok(group(self.svc.remove_group_member(&r.group_id, &r.principal_id, &r.actor_id).await?))
    }

    async fn create_environment(&self, r: Request<pb::CreateEnvironmentRequest>) -> R<pb::Environment> {
        let r = r.into_inner();
        ok(environment(self.svc.create_environment(&r.name, &r.actor_id).await?))
    }

    async fn get_environment(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Environment> {
        ok(environment(self.svc.environment(&r.into_inner().id).await?))
    }

    async fn list_environments(&self, r: Request<pb::ListRequest>) -> R<pb::ListEnvironmentsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_environments(&p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, environment);
        ok(pb::ListEnvironmentsResponse { data, next_page })
    }

    async fn update_environment(&self, r: Request<pb::UpdateEnvironmentRequest>) -> R<pb::Environment> {
        let r = r.into_inner();
        ok(environment(self.svc.update_environment(&r.id, r.disabled, r.expected_version, &r.actor_id).await?))
    }

    async fn create_permission_assignment(&self, r: Request<pb::CreatePermissionAssignmentRequest>) -> R<pb::PermissionAssignment> {
        let r = r.into_inner();
        let subject = r.subject.unwrap_or_default();
        let resource = r.resource.unwrap_or_default();
        let req = crate::service::NewAssignment {
            subject_kind: subject.kind,
            subject_id: subject.id,
            permission: r.permission,
            resource_kind: resource.kind,
            resource_id: resource.id,
            environment_id: r.environment_id,
        };
        let a = self.svc.create_assignment(&req, &r.actor_id).await?;
        ok(assignment(a))
    }

    async fn get_permission_assignment(&self, r: Request<pb::GetByIdRequest>) -> R<pb::PermissionAssignment> {
        ok(assignment(self.svc.assignment(&r.into_inner().id).await?))
    }

    async fn list_permission_assignments(
        &self,
        r: Request<pb::ListPermissionAssignmentsRequest>,
    ) -> R<pb::ListPermissionAssignmentsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let some = |s: String| Some(s).filter(|s| !s.is_empty());
        let permission = some(r.permission).map(|p| Permission::parse("permission", &p)).transpose()?;
        let filter = AssignmentFilter { subject_id: some(r.subject_id), resource_id: some(r.resource_id), permission };
        let rows = self.svc.list_assignments(&filter, &p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, assignment);
        ok(pb::ListPermissionAssignmentsResponse { data, next_page })
    }

    async fn copy_permission_assignments(
        &self,
        r: Request<pb::CopyPermissionAssignmentsRequest>,
    ) -> R<pb::ListPermissionAssignmentsResponse> {
        let r = r.into_inner();
        let rows =
            self.svc.copy_assignments(&r.resource_kind, &r.from_resource_id, &r.to_resource_id, &r.environment_id, &r.actor_id).await?;
        ok(pb::ListPermissionAssignmentsResponse { data: rows.into_iter().map(assignment).collect(), next_page: String::new() })
    }

    async fn delete_permission_assignment(&self, r: Request<pb::ActorRequest>) -> R<pb::PermissionAssignment> {
        let r = r.into_inner();
        ok(assignment(self.svc.delete_assignment(&r.id, &r.actor_id).await?))
    }

    async fn create_connection_vault(&self, r: Request<pb::CreateConnectionVaultRequest>) -> R<pb::ConnectionVault> {
        let r = r.into_inner();
        let metadata = r.metadata.into_iter().collect();
        ok(vault(self.svc.create_vault(&r.environment_id, &r.name, &r.connection_ids, &grantees(r.grantees), metadata, &r.actor_id).await?))
    }

    async fn get_connection_vault(&self, r: Request<pb::GetByIdRequest>) -> R<pb::ConnectionVault> {
        ok(vault(self.svc.vault(&r.into_inner().id).await?))
    }

    async fn list_connection_vaults(&self, r: Request<pb::ListConnectionVaultsRequest>) -> R<pb::ListConnectionVaultsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_vaults(&r.environment_ids, &p).await?;
        let (data, next_page) = paged(&p, rows, |v| &v.id, vault);
        ok(pb::ListConnectionVaultsResponse { data, next_page })
    }

    async fn update_connection_vault(&self, r: Request<pb::UpdateConnectionVaultRequest>) -> R<pb::ConnectionVault> {
        let r = r.into_inner();
        let ch = crate::vaults::VaultChange {
            name: r.name,
            connection_ids: r.set_connection_ids.then_some(r.connection_ids),
            grantees: r.set_grantees.then(|| grantees(r.grantees)),
            metadata: r.set_metadata.then(|| r.metadata.into_iter().collect()),
            expected_version: r.expected_version,
        };
        ok(vault(self.svc.update_vault(&r.id, ch, &r.actor_id).await?))
    }

    async fn delete_connection_vault(&self, r: Request<pb::ActorRequest>) -> R<pb::ConnectionVault> {
        let r = r.into_inner();
        ok(vault(self.svc.delete_vault(&r.id, &r.actor_id).await?))
    }

    async fn vaults_holding(&self, r: Request<pb::VaultsHoldingRequest>) -> R<pb::VaultsHoldingResponse> {
        let r = r.into_inner();
        ok(pb::VaultsHoldingResponse { vault_ids: self.svc.vaults_holding(&r.connection_id).await? })
    }

    async fn archive_connection_vault(&self, r: Request<pb::ArchiveConnectionVaultRequest>) -> R<pb::ConnectionVault> {
        let r = r.into_inner();
        ok(vault(self.svc.archive_vault(&r.id, r.expected_version, &r.actor_id).await?))
    }

    async fn check(&self, r: Request<pb::CheckRequest>) -> R<pb::CheckResponse> {
        let r = r.into_inner();
        let res = r.resource.unwrap_or_default();
        if let Some(subject) = r.subject.filter(|s| !s.kind.is_empty()) {
            if subject.kind != "agent_definition" {
                return Err(checkfu_core::Error::invalid_field(
                    "subject.kind",
                    "a check's subject is a principal_id or an agent_definition",
                )
                .into());
            }
            let allowed = self.svc.agent_check(&subject.id, &r.permission, &res.kind, &res.id, &r.environment_id).await?;
            return ok(pb::CheckResponse { allowed, matched_assignment_ids: vec![] });
        }
        let (allowed, matched_assignment_ids) = self
            .svc
            .check(&r.principal_id, &r.permission, &res.kind, &res.id, Some(r.environment_id.as_str()).filter(|e| !e.is_empty()))
            .await?;
        ok(pb::CheckResponse { allowed, matched_assignment_ids })
    }

    // A 0.1.0 caller sends `rules_json` only.
    #[allow(deprecated)]
    async fn create_action_policy(&self, r: Request<pb::CreateActionPolicyRequest>) -> R<pb::ActionPolicy> {
        let r = r.into_inner();
        let rules = crate::policy_wire::create_rules(r.rules, &r.rules_json)?;
        ok(policy(self.svc.create_policy(&r.environment_id, &r.name, rules, &r.actor_id).await?))
    }

    async fn get_action_policy(&self, r: Request<pb::GetByIdRequest>) -> R<pb::ActionPolicy> {
        ok(policy(self.svc.policy(&r.into_inner().id).await?))
    }

    async fn list_action_policies(&self, r: Request<pb::ListActionPoliciesRequest>) -> R<pb::ListActionPoliciesResponse> {
        let r = r.into_inner();
        if !r.name.is_empty() {
            let data = self.svc.policies_named(&r.environment_ids, &r.name).await?.into_iter().map(policy).collect();
            return ok(pb::ListActionPoliciesResponse { data, next_page: String::new() });
        }
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_policies(&r.environment_ids, &p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, policy);
        ok(pb::ListActionPoliciesResponse { data, next_page })
    }

    // A 0.1.0 caller sends `rules_json` only.
    #[allow(deprecated)]
    async fn update_action_policy(&self, r: Request<pb::UpdateActionPolicyRequest>) -> R<pb::ActionPolicy> {
        let r = r.into_inner();
        let rules = crate::policy_wire::update_rules(r.rules, r.rules_json.as_deref())?;
        ok(policy(self.svc.update_policy(&r.id, r.name.as_deref(), rules, r.expected_version, &r.actor_id).await?))
    }

    async fn delete_action_policy(&self, r: Request<pb::ActorRequest>) -> R<pb::ActionPolicy> {
        let r = r.into_inner();
        ok(policy(self.svc.delete_policy(&r.id, &r.actor_id).await?))
    }

    async fn evaluate_action(&self, r: Request<pb::EvaluateActionRequest>) -> R<pb::EvaluateActionResponse> {
        let claims = self.claims(&r, false)?;
        let r = r.into_inner();
        within(&claims, &r.environment_id, &r.session_id)?;
        let (subject, resource) = (r.subject.unwrap_or_default(), r.resource.unwrap_or_default());
        #[allow(deprecated)] // a 0.1.0 caller's tool_json
        let req = crate::service::EvaluationRequest {
            environment_id: r.environment_id,
            subject_kind: subject.kind,
            subject_id: subject.id,
            resource_kind: resource.kind,
            resource_id: resource.id,
            permission: r.permission,
            tool: called_tool(r.tool, &r.tool_json)?,
            also: r.also.into_iter().map(|a| (a.kind, a.id)).collect(),
            connection: (!r.connection_id.is_empty()).then_some(crate::service::ConnectionCall {
                connection_id: r.connection_id,
                status: r.connection_status,
                tool_source_id: r.tool_source_id,
            }),
        };
        let d = self.svc.evaluate(&req).await?;
        if r.record {
            self.svc.record_decision(&req, &d, &r.session_id, &r.tool_use_id).await?;
        }
        ok(pb::EvaluateActionResponse {
            disposition: d.disposition.as_str().into(),
            matched_rule_ids: d.matched_rule_ids,
            reason: d.reason,
        })
    }

    async fn list_audit_events(&self, r: Request<pb::ListAuditEventsRequest>) -> R<pb::ListAuditEventsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_audit(&r.resource_id, &r.actor_id, &p).await?;
        let (data, next_page) = paged(
            &p,
            rows,
            |x| &x.id,
            |a| pb::AuditEvent {
                id: a.id.into(),
                actor_id: a.actor_id,
                action: a.action,
                resource: Some(pb::ResourceRef { kind: a.resource_kind, id: a.resource_id }),
                details_json: a.details.to_string(),
                created_at: rfc3339(a.created_ms),
            },
        );
        ok(pb::ListAuditEventsResponse { data, next_page })
    }

    async fn record_audit(&self, r: Request<pb::RecordAuditRequest>) -> R<pb::AuditEvent> {
        let r = r.into_inner();
        let res = r.resource.unwrap_or_default();
        let a = self.svc.record_audit(&r.actor_id, &r.action, &res.kind, &res.id, &r.details_json).await?;
        ok(pb::AuditEvent {
            id: a.id.into(),
            actor_id: a.actor_id,
            action: a.action,
            resource: Some(pb::ResourceRef { kind: a.resource_kind, id: a.resource_id }),
            details_json: a.details.to_string(),
            created_at: rfc3339(a.created_ms),
        })
    }

    async fn request_approval(&self, r: Request<pb::RequestApprovalRequest>) -> R<pb::RequestApprovalResponse> {
        let claims = self.claims(&r, true)?;
        let r = r.into_inner();
        within(&claims, &r.environment_id, &r.session_id)?;
        if claims.as_ref().is_some_and(|c| c.run_id != r.run_id) {
            return Err(Status::permission_denied("the capability token is for another Run"));
        }
        let f = r.frozen.unwrap_or_default();
        let ask = crate::model::ApprovalAsk {
            environment_id: r.environment_id,
            session_id: r.session_id,
            run_id: r.run_id,
            tool_use_id: r.tool_use_id,
            principal_id: f.principal_id,
            agent_id: f.agent_id,
            tool: f.tool,
            connection_id: f.connection_id,
            arguments: if f.arguments_json.is_empty() { serde_json::Value::Null } else { json_doc("frozen.arguments", &f.arguments_json)? },
        };
        ok(match self.svc.request_approval(&ask).await? {
            crate::model::Asked::Standing(id) => pb::RequestApprovalResponse { standing_approval_id: id, approval: None },
            crate::model::Asked::Pending(a) => {
                pb::RequestApprovalResponse { standing_approval_id: String::new(), approval: Some(approval(*a)) }
            }
        })
    }

    async fn get_action_approval(&self, r: Request<pb::GetByIdRequest>) -> R<pb::ActionApproval> {
        let claims = self.claims(&r, false)?;
        let a = self.svc.approval(&r.into_inner().id).await?;
        within(&claims, &a.environment_id, &a.session_id)?;
        ok(approval(a))
    }

    async fn list_action_approvals(&self, r: Request<pb::ListActionApprovalsRequest>) -> R<pb::ListActionApprovalsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_approvals(&r.environment_ids, &r.status, &r.session_id, &p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, approval);
        ok(pb::ListActionApprovalsResponse { data, next_page })
    }

    async fn respond_to_approval(&self, r: Request<pb::RespondToApprovalRequest>) -> R<pb::ActionApproval> {
        // An answer from inside a Session skips the response token (the
        // sessions role checked its author holds `approve`), so only that
        // role may say a response came from inside one.
        let from_sessions = checkfu_proto::mesh::caller(&r).is_some_and(|c| c.is(checkfu_core::Role::Sessions));
        let r = r.into_inner();
        if r.in_session && !from_sessions {
            return Err(Status::permission_denied("only the sessions role records a response given inside a Session"));
        }
        let resp = crate::model::Response {
            id: r.id,
            decision: r.decision,
            response_token: r.response_token,
            standing_ttl_seconds: r.standing_ttl_seconds,
            responder_id: r.responder_id,
            in_session: r.in_session,
            deny_message: r.deny_message,
        };
        ok(approval(self.svc.respond(&resp).await?))
    }

    async fn list_unsettled_approvals(&self, r: Request<pb::ListRequest>) -> R<pb::ListActionApprovalsResponse> {
        let rows = self.svc.unsettled_approvals(false, r.into_inner().limit).await?;
        ok(pb::ListActionApprovalsResponse { data: rows.into_iter().map(approval).collect(), next_page: String::new() })
    }

    async fn list_unsettled_step_approvals(&self, r: Request<pb::ListRequest>) -> R<pb::ListActionApprovalsResponse> {
        let rows = self.svc.unsettled_approvals(true, r.into_inner().limit).await?;
        ok(pb::ListActionApprovalsResponse { data: rows.into_iter().map(approval).collect(), next_page: String::new() })
    }

    async fn request_step_approval(&self, r: Request<pb::RequestStepApprovalRequest>) -> R<pb::ActionApproval> {
        let r = r.into_inner();
        let ask = crate::model::StepAsk {
            environment_id: r.environment_id,
            automation_firing_id: r.automation_firing_id,
            step_id: r.step_id,
            principal_id: r.principal_id,
            title: r.title,
            ttl_seconds: r.ttl_seconds,
            call: match r.frozen {
                Some(f) => Some(crate::model::StepCall {
                    tool: f.tool,
                    connection_id: f.connection_id,
                    arguments: serde_json::from_str(&f.arguments_json)
                        .map_err(|_| Status::invalid_argument("frozen.arguments_json must be JSON"))?,
                    attempt: r.attempt,
                }),
                None => None,
            },
        };
        ok(approval(self.svc.request_step_approval(&ask).await?))
    }

    /// Each role settles only its own kind: sessions a Session's approvals,
    /// the scheduler an Automation step's.
    async fn mark_approval_settled(&self, r: Request<pb::GetByIdRequest>) -> R<pb::ActionApproval> {
        let caller = checkfu_proto::mesh::caller(&r);
        let id = r.into_inner().id;
        let a = self.svc.approval(&id).await?;
        if caller.is_some_and(|c| c.is(checkfu_core::Role::Scheduler) != a.for_step()) {
            return Err(Status::permission_denied("this role does not settle that approval"));
        }
        ok(approval(self.svc.mark_settled(&id).await?))
    }

    async fn withdraw_approval(&self, r: Request<pb::ActorRequest>) -> R<pb::ActionApproval> {
        let r = r.into_inner();
        ok(approval(self.svc.withdraw(&r.id, &r.actor_id).await?))
    }

    async fn get_standing_approval(&self, r: Request<pb::GetByIdRequest>) -> R<pb::StandingApproval> {
        ok(standing(self.svc.standing_approval(&r.into_inner().id).await?))
    }

    async fn list_standing_approvals(&self, r: Request<pb::ListStandingApprovalsRequest>) -> R<pb::ListStandingApprovalsResponse> {
        let r = r.into_inner();
        let p = page(r.limit, &r.page)?;
        let rows = self.svc.list_standing(&r.environment_ids, &p).await?;
        let (data, next_page) = paged(&p, rows, |x| &x.id, standing);
        ok(pb::ListStandingApprovalsResponse { data, next_page })
    }

    async fn revoke_standing_approval(&self, r: Request<pb::ActorRequest>) -> R<pb::StandingApproval> {
        let r = r.into_inner();
        ok(standing(self.svc.revoke_standing(&r.id, &r.actor_id).await?))
    }
}
