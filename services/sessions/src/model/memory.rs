//! A Session's mounts of MemoryStores (api.md §13.4).

use checkfu_core::{Error, Result};
use std::collections::BTreeMap;

/// The folder of the workspace that holds memory mounts (`memory/<name>/`).
pub const MEMORY_DIR: &str = "memory";
/// The most MemoryStores one Session mounts.
pub const MAX_MOUNTS: usize = 20;

/// A mount as asked for at creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountRequest {
    pub store_id: String,
    pub access: String,
    /// Empty: the store id.
    pub mount_name: String,
}

/// One file a mount shows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MountedFile {
    pub sha256: String,
    pub size_bytes: i64,
}

/// A mount as the Session keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryMount {
    pub mount_name: String,
    pub store_id: String,
    /// `read_only` or `read_write`.
    pub access: String,
    /// The store's head when the Session was created.
    pub store_version: i64,
    /// Whether `files` and `base` were taken from the store yet.
    pub materialized: bool,
    /// What the mount shows, by document path (`/a.md`): the pinned
    /// version plus the Session's own changes.
    pub files: BTreeMap<String, MountedFile>,
    /// What the mount last took from the store: the expectations of its
    /// next writeback.
    pub base: BTreeMap<String, String>,
}

impl MemoryMount {
    pub fn read_write(&self) -> bool {
        self.access == "read_write"
    }

    /// The mount's folder in the workspace.
    pub fn folder(&self) -> String {
        format!("{MEMORY_DIR}/{}", self.mount_name)
    }

    /// Where the agent finds it, for events.
    pub fn mount_path(&self) -> String {
        format!("/mnt/memory/{}", self.mount_name)
    }
}

/// Checks the requests: at most [`MAX_MOUNTS`], access known, names one
/// `[A-Za-z0-9._-]` segment and unique (the store id by default).
pub fn check_mounts(requests: &mut [MountRequest]) -> Result<()> {
    if requests.len() > MAX_MOUNTS {
        return Err(Error::invalid_field("resources", format!("at most {MAX_MOUNTS} memory stores per Session")));
    }
    for (i, r) in requests.iter_mut().enumerate() {
        if r.access != "read_only" && r.access != "read_write" {
            return Err(Error::invalid_field(&format!("resources[{i}].access"), "access must be read_only or read_write"));
        }
        if r.mount_name.is_empty() {
            r.mount_name = r.store_id.clone();
        }
        let n = &r.mount_name;
        if n.len() > 128 || n == "." || n == ".." || !n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
            return Err(Error::invalid_field(
                &format!("resources[{i}].mount_name"),
                "mount_name is one segment of [A-Za-z0-9._-], at most 128 bytes",
            ));
        }
    }
    for (i, r) in requests.iter().enumerate() {
        if requests[..i].iter().any(|o| o.mount_name == r.mount_name) {
            return Err(Error::invalid_field(
                &format!("resources[{i}].mount_name"),
                format!("mount_name {:?} is used twice", r.mount_name),
            ));
        }
    }
    Ok(())
}
