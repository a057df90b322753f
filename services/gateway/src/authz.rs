//! Permission checks at the public boundary. Reach is a row: every handler
//! asks governance (or the decision cache that follows it) before acting,
//! and nothing is allowed by default.

use crate::auth::Caller;
use crate::error::ApiResult;
use crate::{AppState, SessionFacts};
use checkfu_core::Error;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;

impl AppState {
    /// Whether `principal_id` holds `permission` on the resource: asked of
    /// governance, or kept from its answer while nothing changed
    /// (`decisions.rs`).
    pub async fn allowed(&self, principal_id: &str, permission: &str, kind: &str, id: &str, environment_id: &str) -> ApiResult<bool> {
        let ask = async {
            let req = gov::CheckRequest {
                principal_id: principal_id.into(),
                permission: permission.into(),
                resource: Some(gov::ResourceRef { kind: kind.into(), id: id.into() }),
                environment_id: environment_id.into(),
                subject: None,
            };
            Ok(self.gov.clone().check(req).await?.into_inner().allowed)
        };
        self.decisions.check([principal_id, permission, kind, id, environment_id], ask).await
    }

    /// 403 `permission.denied` unless the caller holds the permission.
    pub async fn require(&self, caller: &Caller, permission: &str, kind: &str, id: &str, environment_id: &str) -> ApiResult<()> {
        if self.allowed(&caller.principal_id, permission, kind, id, environment_id).await? {
            Ok(())
        } else {
            Err(Error::denied(format!("{} lacks {permission} on {kind} {id}", caller.principal_id))
                .with_details(serde_json::json!({"permission": permission, "resource": {"kind": kind, "id": id}}))
                .into())
        }
    }

    /// Records a change the gateway made on the caller's behalf in the
    /// audit trail. The change is already committed, so a failure to
    /// record is logged, not returned.
    pub async fn audit(&self, caller: &Caller, action: &str, kind: &str, id: &str, details: serde_json::Value) {
        let req = checkfu_proto::governance::v1::RecordAuditRequest {
            actor_id: caller.principal_id.clone(),
            action: action.into(),
            resource: Some(checkfu_proto::governance::v1::ResourceRef { kind: kind.into(), id: id.into() }),
            details_json: details.to_string(),
        };
        if let Err(s) = self.gov.clone().record_audit(req).await {
            tracing::warn!(status = %s, action, resource = id, "recording a change in the audit trail failed");
        }
    }

    pub async fn require_admin(&self, caller: &Caller) -> ApiResult<()> {
        self.require(caller, "admin", "installation", "*", "").await
    }

    pub async fn is_admin(&self, caller: &Caller) -> ApiResult<bool> {
        self.allowed(&caller.principal_id, "admin", "installation", "*", "").await
    }

    /// The Environment must exist and be enabled to hold new resources, and
    /// the caller must hold `manage` on it.
    pub async fn require_manage(&self, caller: &Caller, environment_id: &str) -> ApiResult<()> {
        checkfu_core::id::EnvironmentId::check("environment_id", environment_id)?;
        let env = self.gov.clone().get_environment(gov::GetByIdRequest { id: environment_id.into() }).await?.into_inner();
        self.require(caller, "manage", "environment", environment_id, environment_id).await?;
        if env.disabled {
            return Err(Error::conflict(format!("environment {environment_id} is disabled")).into());
        }
        Ok(())
    }

    pub async fn require_read(&self, caller: &Caller, environment_id: &str) -> ApiResult<()> {
        self.require(caller, "read", "environment", environment_id, environment_id).await
    }

    /// Every Environment the caller may read, for list endpoints; narrowed
    /// to one when the client names it.
    pub async fn readable_envs(&self, caller: &Caller, only: Option<&str>) -> ApiResult<Vec<String>> {
        if let Some(env) = only.filter(|e| !e.is_empty()) {
            checkfu_core::id::EnvironmentId::check("environment_id", env)?;
            self.require_read(caller, env).await?;
            return Ok(vec![env.to_string()]);
        }
        let mut out = vec![];
        let mut page = String::new();
        loop {
            let resp = self.gov.clone().list_environments(gov::ListRequest { limit: 100, page: page.clone() }).await?.into_inner();
            for e in resp.data {
                if self.allowed(&caller.principal_id, "read", "environment", &e.id, &e.id).await? {
                    out.push(e.id);
                }
            }
            if resp.next_page.is_empty() {
                return Ok(out);
            }
            page = resp.next_page;
        }
    }
}

/// Checks that the caller may speak as `principal_id`: it is the caller, or
/// the caller holds `act_as` on it.
pub(crate) async fn require_speaks_for(st: &AppState, caller: &Caller, principal_id: &str, field: &str) -> ApiResult<()> {
    checkfu_core::id::PrincipalId::check(field, principal_id)?;
    if principal_id == caller.principal_id {
        return Ok(());
    }
    st.require(caller, "act_as", "principal", principal_id, "").await
}

/// Whether the caller may read (or write to) a Session with these facts:
/// its principal, `act_as` on it, or (to read) `read` on its Environment.
async fn authorize(st: &AppState, caller: &Caller, id: &str, f: &SessionFacts, write: bool) -> ApiResult<()> {
    if f.principal_id == caller.principal_id || st.allowed(&caller.principal_id, "act_as", "principal", &f.principal_id, "").await? {
        return Ok(());
    }
    if !write && st.allowed(&caller.principal_id, "read", "environment", &f.environment_id, &f.environment_id).await? {
        return Ok(());
    }
    Err(Error::denied(format!("{} may not {} session {id}", caller.principal_id, if write { "act in" } else { "read" })).into())
}

pub(crate) fn remember(st: &AppState, s: &ss::Session) -> SessionFacts {
    let f = SessionFacts { principal_id: s.principal_id.clone(), environment_id: s.environment_id.clone(), agent_id: s.agent_id.clone() };
    st.session_facts.insert(s.id.clone(), f.clone());
    f
}

/// The Session, read fresh, after checking the caller's access.
pub(crate) async fn session_for(st: &AppState, caller: &Caller, id: &str, write: bool) -> ApiResult<ss::Session> {
    checkfu_core::id::SessionId::check("id", id)?;
    let s = st.sessions.clone().get_session(ss::GetByIdRequest { id: id.into() }).await?.into_inner();
    let f = remember(st, &s);
    authorize(st, caller, id, &f, write).await?;
    Ok(s)
}

/// The Session's immutable facts (cached), after checking the caller's access.
pub(crate) async fn facts_for(st: &AppState, caller: &Caller, id: &str, write: bool) -> ApiResult<SessionFacts> {
    checkfu_core::id::SessionId::check("id", id)?;
    let cached = st.session_facts.get(id);
    let f = match cached {
        Some(f) => f,
        None => remember(st, &st.sessions.clone().get_session(ss::GetByIdRequest { id: id.into() }).await?.into_inner()),
    };
    authorize(st, caller, id, &f, write).await?;
    Ok(f)
}

/// Whether `caller` may (still) read the Session: what an open stream is
/// re-checked against.
pub(crate) async fn may_read(st: &AppState, caller: &Caller, session_id: &str) -> ApiResult<()> {
    facts_for(st, caller, session_id, false).await.map(|_| ())
}
