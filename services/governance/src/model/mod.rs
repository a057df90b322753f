//! Governance domain types. Wire strings become these enums once, at the
//! gRPC boundary; an unknown kind or permission never gets further.

mod approvals;
mod console;
mod vaults;
pub use approvals::*;
pub use console::*;
pub use vaults::*;

use checkfu_core::id::{AgentId, AssignmentId, AuditId, EnvironmentId, GroupId, KeyId, PrincipalId, TypedId};
use checkfu_core::string_enum;

string_enum!(
    /// Who a Principal is.
    PrincipalKind { Human = "human", Service = "service" }
);

string_enum!(
    /// What can hold a permission.
    SubjectKind { Principal = "principal", Group = "group", AgentDefinition = "agent_definition" }
);

string_enum!(
    /// What a permission is held on.
    ResourceKind {
        Installation = "installation",
        Environment = "environment",
        Agent = "agent",
        Connection = "connection",
        MemoryStore = "memory_store",
        Principal = "principal",
        Group = "group",
    }
);

string_enum!(
    Permission {
        Admin = "admin",
        Manage = "manage",
        Invoke = "invoke",
        ActAs = "act_as",
        UseConnection = "use_connection",
        UseAgent = "use_agent",
        Approve = "approve",
        Read = "read",
        // Changing a MemoryStore's documents (api.md §13.1); implied only
        // by `admin`, never by `manage`.
        Write = "write",
    }
);

impl Permission {
    /// Whether holding `self` grants `wanted`: `admin` grants everything,
    /// `manage` also grants `read`; every other permission grants only itself.
    pub fn grants(self, wanted: Permission) -> bool {
        self == wanted || self == Permission::Admin || (self == Permission::Manage && wanted == Permission::Read)
    }
}

/// The id prefix a resource or subject of this kind must carry (the typed
/// id's, for kinds that have one).
pub fn id_prefix(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "environment" => EnvironmentId::PREFIX,
        "agent" | "agent_definition" => AgentId::PREFIX,
        "connection" => "conn",
        "memory_store" => "mstr",
        "principal" => PrincipalId::PREFIX,
        "group" => GroupId::PREFIX,
        _ => return None,
    })
}

#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    pub id: PrincipalId,
    pub kind: PrincipalKind,
    pub name: String,
    pub disabled: bool,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    pub id: KeyId,
    pub principal_id: PrincipalId,
    pub name: String,
    pub created_ms: i64,
    pub revoked_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub id: GroupId,
    pub name: String,
    pub member_ids: Vec<PrincipalId>,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Environment {
    pub id: EnvironmentId,
    pub name: String,
    pub version: i64,
    pub disabled: bool,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub id: AssignmentId,
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub permission: Permission,
    pub resource_kind: ResourceKind,
    pub resource_id: String,
    /// The Environment holding the resource; `None` for installation-wide
    /// ones.
    pub environment_id: Option<EnvironmentId>,
    pub created_by: String,
    pub created_ms: i64,
    /// What compiled this row (a ConnectionVault); `None` for a row granted
    /// directly. A compiled row changes only with what made it.
    pub via: Option<Via>,
}

/// The resource a compiled PermissionAssignment comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Via {
    pub kind: String,
    pub id: String,
}

impl Assignment {
    /// Whether this assignment covers `resource`, held in `environment_id`
    /// (`None`: the resource belongs to no Environment).
    pub fn covers(&self, kind: ResourceKind, id: &str, environment_id: Option<&str>) -> bool {
        match self.resource_kind {
            ResourceKind::Installation => true,
            ResourceKind::Environment if environment_id == Some(self.resource_id.as_str()) => true,
            k => k == kind && self.resource_id == id,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub id: AuditId,
    pub actor_id: String,
    pub action: String,
    pub resource_kind: String,
    pub resource_id: String,
    pub details: serde_json::Value,
    pub created_ms: i64,
}

/// Filters for listing assignments; `None` matches everything.
#[derive(Debug, Clone, Default)]
pub struct AssignmentFilter {
    pub subject_id: Option<String>,
    pub resource_id: Option<String>,
    pub permission: Option<Permission>,
}

pub use checkfu_core::check_name;

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_core::testing::tid;

    #[test]
    fn manage_grants_read_but_not_invoke() {
        assert!(Permission::Manage.grants(Permission::Read));
        assert!(!Permission::Manage.grants(Permission::Invoke));
        assert!(!Permission::Manage.grants(Permission::Write), "manage reads a store but does not write it");
        assert!(Permission::Admin.grants(Permission::Write));
        assert!(Permission::Admin.grants(Permission::ActAs));
        assert!(!Permission::Read.grants(Permission::Manage));
    }

    #[test]
    fn environment_assignment_covers_its_resources_only() {
        let a = Assignment {
            id: tid("pa_1"),
            subject_kind: SubjectKind::Principal,
            subject_id: "prin_1".into(),
            permission: Permission::Invoke,
            resource_kind: ResourceKind::Environment,
            resource_id: "env_a".into(),
            environment_id: Some(tid("env_a")),
            created_by: "prin_0".into(),
            created_ms: 0,
            via: None,
        };
        assert!(a.covers(ResourceKind::Agent, "agt_1", Some("env_a")));
        assert!(!a.covers(ResourceKind::Agent, "agt_1", Some("env_b")));
        assert!(!a.covers(ResourceKind::Agent, "agt_1", None));
    }

    #[test]
    fn unknown_permission_is_refused() {
        assert!(Permission::parse("permission", "root").is_err());
        assert_eq!(Permission::parse("permission", "act_as").ok(), Some(Permission::ActAs));
    }
}
