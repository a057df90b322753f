//! Principals, API keys, Groups, Environments and PermissionAssignments.

use super::common::opt;
use checkfu_proto::governance::v1 as gov;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct Principal {
    pub id: String,
    /// `human` or `service`.
    pub kind: String,
    pub name: String,
    pub disabled: bool,
    pub created_at: String,
}

pub fn principal(p: &gov::Principal) -> Principal {
    Principal { id: p.id.clone(), kind: p.kind.clone(), name: p.name.clone(), disabled: p.disabled, created_at: p.created_at.clone() }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKey {
    pub id: String,
    pub principal_id: String,
    pub name: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    /// Only in the response that creates the key; stored only as a hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

pub fn api_key(k: &gov::ApiKey) -> ApiKey {
    ApiKey {
        id: k.id.clone(),
        principal_id: k.principal_id.clone(),
        name: k.name.clone(),
        created_at: k.created_at.clone(),
        revoked_at: opt(&k.revoked_at),
        secret: None,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Group {
    pub id: String,
    pub name: String,
    pub member_ids: Vec<String>,
    pub created_at: String,
}

pub fn group(g: &gov::Group) -> Group {
    Group { id: g.id.clone(), name: g.name.clone(), member_ids: g.member_ids.clone(), created_at: g.created_at.clone() }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Environment {
    pub id: String,
    pub name: String,
    pub version: i64,
    pub disabled: bool,
    pub created_at: String,
}

pub fn environment(e: &gov::Environment) -> Environment {
    Environment { id: e.id.clone(), name: e.name.clone(), version: e.version, disabled: e.disabled, created_at: e.created_at.clone() }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Ref {
    pub kind: String,
    pub id: String,
}

pub(super) fn rref(r: &Option<gov::ResourceRef>) -> Ref {
    let r = r.clone().unwrap_or_default();
    Ref { kind: r.kind, id: r.id }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PermissionAssignment {
    pub id: String,
    pub subject: Ref,
    pub permission: String,
    pub resource: Ref,
    /// The Environment holding the resource; null for installation-wide ones.
    pub environment_id: Option<String>,
    pub created_by: String,
    pub created_at: String,
    /// What compiled this row (`{kind:"connection_vault", id}`): it changes
    /// only with its vault (a direct delete answers 409 `managed_by_vault`).
    /// Null for a direct grant.
    pub via: Option<Ref>,
}

pub fn assignment(a: &gov::PermissionAssignment) -> PermissionAssignment {
    PermissionAssignment {
        id: a.id.clone(),
        subject: rref(&a.subject),
        permission: a.permission.clone(),
        resource: rref(&a.resource),
        environment_id: opt(&a.environment_id),
        created_by: a.created_by.clone(),
        created_at: a.created_at.clone(),
        via: a.via.as_ref().map(|v| Ref { kind: v.kind.clone(), id: v.id.clone() }),
    }
}
