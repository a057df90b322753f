//! Permission checks at the public boundary. Reach is a row: every handler
//! asks governance before acting, and nothing is allowed by default.

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use checkfu_core::Error;
use checkfu_proto::governance::v1 as gov;

impl AppState {
    /// Whether `principal_id` holds `permission` on the resource.
    pub async fn allowed(&self, principal_id: &str, permission: &str, kind: &str, id: &str, environment_id: &str) -> ApiResult<bool> {
        let req = gov::CheckRequest {
            principal_id: principal_id.into(),
            permission: permission.into(),
            resource: Some(gov::ResourceRef { kind: kind.into(), id: id.into() }),
            environment_id: environment_id.into(),
            subject: None,
        };
        Ok(self.gov.clone().check(req).await?.into_inner().allowed)
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
