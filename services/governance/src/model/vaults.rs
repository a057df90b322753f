//! ConnectionVaults (api.md §16.3): a named bundle of `use_connection`
//! grants. A vault holds no credential and grants nothing by itself; saving
//! it compiles one PermissionAssignment per (grantee, Connection), each
//! naming the vault in `via`.

use super::SubjectKind;
use checkfu_core::id::{EnvironmentId, VaultId};
use checkfu_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a compiled row's `via.kind` says.
pub const VAULT_KIND: &str = "connection_vault";
/// Connections, and grantees, one vault may name.
pub const MAX_VAULT_ITEMS: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grantee {
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionVault {
    pub id: VaultId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub connection_ids: Vec<String>,
    pub grantees: Vec<Grantee>,
    /// Caller-defined labels (`checkfu_core::metadata` limits).
    pub metadata: BTreeMap<String, String>,
    /// Set once archived: the record stays readable, its rows are gone and
    /// it takes no edits.
    pub archived_ms: Option<i64>,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

impl ConnectionVault {
    /// The (grantee kind, grantee id, Connection id) rows this vault
    /// compiles, in a stable order.
    pub fn tuples(&self) -> Vec<(SubjectKind, String, String)> {
        let mut out = vec![];
        for g in &self.grantees {
            let kind = SubjectKind::parse("grantees.kind", &g.kind).unwrap_or(SubjectKind::Principal);
            for c in &self.connection_ids {
                out.push((kind, g.id.clone(), c.clone()));
            }
        }
        out
    }
}

/// Checks the lists a vault names: at most 100 of each, well-formed ids,
/// no repeats (a repeat is dropped, keeping the first).
pub fn check_lists(connection_ids: &[String], grantees: &[Grantee]) -> Result<(Vec<String>, Vec<Grantee>)> {
    if connection_ids.len() > MAX_VAULT_ITEMS || grantees.len() > MAX_VAULT_ITEMS {
        return Err(Error::invalid(format!("a vault names at most {MAX_VAULT_ITEMS} connections and {MAX_VAULT_ITEMS} grantees")));
    }
    let mut conns: Vec<String> = vec![];
    for (i, c) in connection_ids.iter().enumerate() {
        checkfu_core::id::ConnectionId::check(&format!("connection_ids[{i}]"), c)?;
        if !conns.contains(c) {
            conns.push(c.clone());
        }
    }
    let mut out: Vec<Grantee> = vec![];
    for (i, g) in grantees.iter().enumerate() {
        let kind = SubjectKind::parse(&format!("grantees[{i}].kind"), &g.kind)?;
        let prefix = super::id_prefix(kind.as_str()).unwrap_or("");
        checkfu_core::id::check(&format!("grantees[{i}].id"), prefix, &g.id)?;
        if !out.contains(g) {
            out.push(g.clone());
        }
    }
    Ok((conns, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_core::testing::tid;

    #[test]
    fn lists_are_bounded_checked_and_deduplicated() {
        let c = "conn_01m8n5w2381sjtydkyxnv11e90".to_string();
        let g = Grantee { kind: "agent_definition".into(), id: "agt_01m8n5w2381sjtydkyxnv11e90".into() };
        let (conns, gs) = check_lists(&[c.clone(), c.clone()], &[g.clone(), g.clone()]).expect("ok");
        assert_eq!((conns.len(), gs.len()), (1, 1));
        assert!(check_lists(&["agt_01m8n5w2381sjtydkyxnv11e90".into()], &[]).is_err());
        assert!(check_lists(&[], &[Grantee { kind: "group".into(), id: "prin_01m8n5w2381sjtydkyxnv11e90".into() }]).is_err());
        assert!(check_lists(&vec![c; 101], &[]).is_err());
        let v = ConnectionVault {
            id: tid("cvlt_1"),
            environment_id: tid("env_1"),
            name: "v".into(),
            connection_ids: vec!["conn_a".into(), "conn_b".into()],
            grantees: vec![g],
            metadata: BTreeMap::new(),
            archived_ms: None,
            created_by: "prin_a".into(),
            created_ms: 0,
            updated_ms: 0,
            version: 1,
        };
        assert_eq!(v.tuples().len(), 2);
    }
}
