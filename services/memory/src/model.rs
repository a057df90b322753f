//! Memory domain types (api.md §13). Wire strings become these once, in
//! `wire.rs`; a path or content past its limits never gets further.

use checkfu_core::id::{EnvironmentId, MemoryStoreId, ProposalId};
use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest document path, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// The largest document, in bytes of UTF-8.
pub const MAX_CONTENT_BYTES: usize = 256 * 1024;
/// The most changes one proposal (or writeback) carries.
pub const MAX_CHANGES: usize = 1000;
/// The longest rationale or decision note.
pub const MAX_NOTE_BYTES: usize = 16 * 1024;
/// The longest store description.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;

string_enum!(
    /// Who owns a store. Ownership fixes its review mode and grants nothing.
    OwnerKind {
        Environment = "environment",
        AgentDefinition = "agent_definition",
        Principal = "principal",
        Session = "session",
        SurfaceScope = "surface_scope",
    }
);

impl OwnerKind {
    /// Shared owners review changes; personal ones write directly.
    pub fn review(self) -> Review {
        match self {
            OwnerKind::Principal | OwnerKind::Session => Review::Direct,
            _ => Review::Proposal,
        }
    }

    /// The id prefix an owner of this kind carries.
    pub fn id_prefix(self) -> &'static str {
        match self {
            OwnerKind::Environment => "env",
            OwnerKind::AgentDefinition => "agt",
            OwnerKind::Principal => "prin",
            OwnerKind::Session => "sess",
            OwnerKind::SurfaceScope => "",
        }
    }
}

string_enum!(Review { Direct = "direct", Proposal = "proposal" });
string_enum!(StoreStatus { Active = "active", Archived = "archived" });
string_enum!(ProposalStatus { Open = "open", Approved = "approved", Rejected = "rejected" });
string_enum!(
    /// Why a proposal exists.
    ProposalReason {
        Requested = "requested",
        SharedOwner = "shared_owner",
        WritebackConflict = "writeback_conflict",
        DreamReview = "dream_review",
    }
);
string_enum!(ActorKind { Principal = "principal", Session = "session", Dream = "dream", AutomationFiring = "automation_firing" });
string_enum!(Via { Api = "api", Writeback = "writeback", Proposal = "proposal", Dream = "dream", Copy = "copy", Automation = "automation" });
string_enum!(Operation { Created = "created", Modified = "modified", Deleted = "deleted" });
string_enum!(Access { ReadOnly = "read_only", ReadWrite = "read_write" });

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub kind: String,
    pub id: String,
}

/// Where a Dream's output store came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedFrom {
    pub memory_store_id: String,
    pub store_version: i64,
    pub dream_id: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Store {
    pub id: MemoryStoreId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub description: String,
    pub metadata: Value,
    pub owner: Owner,
    pub review: Review,
    pub head_version: i64,
    pub status: StoreStatus,
    pub created_from: Option<CreatedFrom>,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub archived_ms: i64,
    pub version: i64,
}

/// A document as of some version, without its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentMeta {
    pub path: String,
    pub sha256: String,
    pub size_bytes: i64,
    pub updated_ms: i64,
    pub updated_in_version: i64,
}

/// Who committed a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub kind: String,
    pub id: String,
}

impl Actor {
    pub fn principal(id: &str) -> Actor {
        Actor { kind: ActorKind::Principal.as_str().into(), id: id.into() }
    }
    pub fn session(id: &str) -> Actor {
        Actor { kind: ActorKind::Session.as_str().into(), id: id.into() }
    }
}

/// One path's change in a committed version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub operation: String,
    pub sha256_before: Option<String>,
    pub sha256_after: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub store_id: MemoryStoreId,
    pub store_version: i64,
    pub created_ms: i64,
    pub actor: Actor,
    pub via: Via,
    pub memory_proposal_id: Option<String>,
    pub changes: Vec<Change>,
}

/// What a change expects of the path before it applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expect {
    /// `null`: the path must not exist.
    Absent,
    /// The path's current sha.
    Sha(String),
}

impl Expect {
    pub fn matches(&self, current: Option<&str>) -> bool {
        match (self, current) {
            (Expect::Absent, None) => true,
            (Expect::Sha(want), Some(have)) => want == have,
            _ => false,
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Expect::Absent => Value::Null,
            Expect::Sha(s) => Value::String(s.clone()),
        }
    }
}

/// One proposed (or requested) change: new content, or `None` to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub path: String,
    pub content: Option<String>,
    pub expected: Expect,
}

/// One change as a caller proposed it: its shape checked, its limits not
/// yet. `expected: None` says nothing about the path's current content and
/// is refused (no blind writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposedEdit {
    pub path: String,
    pub content: Option<String>,
    pub expected: Option<Expect>,
}

/// Content of one change on its way into a commit or a proposal: its
/// digest and size, and the text itself unless it lives in the blob store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    pub sha256: String,
    pub size_bytes: i64,
    /// `None`: kept in the blob store under [`crate::content::blob_key`].
    pub inline: Option<String>,
}

/// One change of a commit: new content, or `None` to delete the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    pub path: String,
    pub content: Option<Content>,
    pub expected: Expect,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub id: ProposalId,
    pub store_id: MemoryStoreId,
    pub status: ProposalStatus,
    pub base_version: i64,
    pub changes: Vec<Staged>,
    pub reason: ProposalReason,
    pub source: Actor,
    pub rationale: String,
    pub created_ms: i64,
    pub decided_by: String,
    pub decided_ms: i64,
    pub decision_note: String,
    pub applied_version: i64,
}

/// Checks a document path: starts with `/`, segments of `[A-Za-z0-9._-]`,
/// no `.` or `..`, at most 1,024 bytes.
pub fn check_path(field: &str, path: &str) -> Result<()> {
    let bad = || {
        Error::invalid_field(
            field,
            format!(
                "{field} must start with / and hold segments of [A-Za-z0-9._-] (no . or ..), at most {MAX_PATH_BYTES} bytes; got {:?}",
                truncate(path)
            ),
        )
    };
    if path.len() > MAX_PATH_BYTES {
        return Err(bad());
    }
    let Some(rest) = path.strip_prefix('/') else { return Err(bad()) };
    for seg in rest.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." || !seg.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(bad());
        }
    }
    Ok(())
}

/// Checks a path prefix for listing: empty, `/`, or a path's start.
pub fn check_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() || prefix == "/" {
        return Ok(());
    }
    check_path("path_prefix", prefix.strip_suffix('/').unwrap_or(prefix))
}

pub fn check_content(field: &str, content: &str) -> Result<()> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(Error::invalid_field(
            field,
            format!("{field} is {} bytes; a document holds at most {MAX_CONTENT_BYTES}", content.len()),
        ));
    }
    Ok(())
}

/// Checks a lowercase hex SHA-256.
pub fn check_sha(field: &str, sha: &str) -> Result<()> {
    if sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(Error::invalid_field(field, format!("{field} must be 64 lowercase hex characters")))
    }
}

/// A mount name: one `[A-Za-z0-9._-]` segment, not `.` or `..`.
pub fn check_mount_name(field: &str, name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 128
        || name == "."
        || name == ".."
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(Error::invalid_field(field, format!("{field} must be one segment of [A-Za-z0-9._-], at most 128 bytes")));
    }
    Ok(())
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

/// `sha_mismatch` (409) for a change whose expectation does not hold.
pub fn sha_mismatch(path: &str, current: Option<&str>, head_version: i64) -> Error {
    Error::conflict(format!("{path} is not at the expected sha (the document changed, or its existence differs)"))
        .with_details(serde_json::json!({"path": path, "current_sha256": current, "head_version": head_version}))
        .with_reason("sha_mismatch")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_absolute_segments_of_a_safe_alphabet() {
        for ok in ["/a.md", "/notes/2026-12-01_x.txt", "/.hidden", "/a/b/c"] {
            assert!(check_path("path", ok).is_ok(), "{ok}");
        }
        for bad in ["a.md", "/", "/a//b", "/a/./b", "/../x", "/a b", "/é", "/a/", &format!("/{}", "x".repeat(1024))] {
            assert!(check_path("path", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn expectations_follow_the_table() {
        assert!(Expect::Absent.matches(None));
        assert!(!Expect::Absent.matches(Some("s")));
        assert!(Expect::Sha("s".into()).matches(Some("s")));
        assert!(!Expect::Sha("s".into()).matches(None), "a sha never creates");
        assert!(!Expect::Sha("t".into()).matches(Some("s")));
    }

    #[test]
    fn shared_owners_review_and_personal_ones_write() {
        assert_eq!(OwnerKind::Environment.review(), Review::Proposal);
        assert_eq!(OwnerKind::AgentDefinition.review(), Review::Proposal);
        assert_eq!(OwnerKind::Principal.review(), Review::Direct);
        assert_eq!(OwnerKind::Session.review(), Review::Direct);
    }

    #[test]
    fn mount_names_are_one_segment() {
        assert!(check_mount_name("mount_name", "notes-1.x").is_ok());
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert!(check_mount_name("mount_name", bad).is_err(), "{bad}");
        }
    }
}
