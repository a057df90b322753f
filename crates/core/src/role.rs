//! The roles one `checkfu` process can play. Helm deploys the same image
//! once per role; `checkfu up` plays all of them. A role is also an
//! identity on the internal mesh: its certificate names it, and every
//! internal RPC is authorized by the role that calls it.

use std::collections::BTreeSet;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Gateway,
    Sessions,
    Governance,
    ModelGateway,
    CapabilityGateway,
    Scheduler,
    Webhooks,
    Memory,
    Runner,
}

impl Role {
    pub const ALL: [Role; 9] = [
        Role::Gateway,
        Role::Sessions,
        Role::Governance,
        Role::ModelGateway,
        Role::CapabilityGateway,
        Role::Scheduler,
        Role::Webhooks,
        Role::Memory,
        Role::Runner,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Gateway => "gateway",
            Role::Sessions => "sessions",
            Role::Governance => "governance",
            Role::ModelGateway => "model-gateway",
            Role::CapabilityGateway => "capability-gateway",
            Role::Scheduler => "scheduler",
            Role::Webhooks => "webhooks",
            Role::Memory => "memory",
            Role::Runner => "runner",
        }
    }

    /// The role of this name (`model-gateway`, ...).
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The name a role's mesh certificate carries as a DNS SAN, and that a
    /// client verifies when it calls the role: `sessions.role.checkfu`.
    pub fn mesh_name(self) -> String {
        format!("{}.role.checkfu", self.name())
    }

    /// Parses `gateway,sessions,...` (or `all`).
    pub fn parse_set(s: &str) -> Result<BTreeSet<Role>, String> {
        let mut out = BTreeSet::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "all" {
                out.extend(Role::ALL);
                continue;
            }
            match Role::parse(part) {
                Some(r) => {
                    out.insert(r);
                }
                None => return Err(format!("unknown role {part:?}; roles are {}", Role::ALL.map(Role::name).join(", "))),
            }
        }
        if out.is_empty() {
            return Err("name at least one role".into());
        }
        Ok(out)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_role_lists() {
        let set = Role::parse_set("gateway, sessions").expect("valid");
        assert_eq!(set.into_iter().collect::<Vec<_>>(), vec![Role::Gateway, Role::Sessions]);
        assert_eq!(Role::parse_set("all").expect("valid").len(), 9);
        assert!(Role::parse_set("gateway,nope").is_err());
        assert!(Role::parse_set("").is_err());
    }
}
