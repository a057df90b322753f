//! The workspace's layout, as every plane and the sandbox's own checks see
//! it: where captured outputs go and which folders hold mounts.

/// The folder of the workspace whose files are captured.
pub const OUTPUTS: &str = "outputs";
/// Folders of the workspace that hold mounts: the Session's Files
/// (`uploads/<id>/<name>`), skills (`skills/<name>/`) and MemoryStores
/// (`memory/<mount_name>/`). The runner writes them before every Run; the
/// agent may read but not change them (`sandbox.rs`) — but for read-write
/// memory mounts, whose changes are written back to their stores — and
/// they are never snapshotted or captured.
pub const MOUNT_DIRS: &[&str] = &["skills", "uploads", "memory"];

/// The folder that holds memory mounts.
pub const MEMORY_DIR: &str = "memory";

/// Whether `folder` names one memory mount (`memory/<name>`).
pub fn is_memory_folder(folder: &str) -> bool {
    folder.strip_prefix("memory/").is_some_and(|n| !n.is_empty() && n != "." && n != ".." && !n.contains('/'))
}

/// Whether a workspace path lies in a mount folder.
pub fn in_mount(rel: &str) -> bool {
    MOUNT_DIRS.iter().any(|d| rel.strip_prefix(d).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}
