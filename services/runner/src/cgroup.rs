//! A cgroup v2 of its own for each sandboxed command, where the runner was
//! given one to manage (`RunnerConfig::sandbox_cgroup`: a directory of the
//! unified hierarchy with the `memory` and `pids` controllers enabled in its
//! `cgroup.subtree_control`, delegated to the runner's user). Unlike rlimits,
//! these bound everything the command starts, together: its memory (swap
//! included) and its number of processes.

use std::path::{Path, PathBuf};

/// A child cgroup, removed (its processes killed) when dropped.
#[derive(Debug)]
pub struct SandboxCgroup {
    path: PathBuf,
}

impl SandboxCgroup {
    pub fn create(parent: &Path, memory_mib: u64, processes: u64) -> std::io::Result<SandboxCgroup> {
        let path = parent.join(checkfu_core::id::new_id("sbx"));
        std::fs::create_dir(&path)?;
        let cg = SandboxCgroup { path };
        let bytes = memory_mib.saturating_mul(1024 * 1024);
        std::fs::write(cg.path.join("memory.max"), bytes.to_string())?;
        // Absent when the kernel has no swap accounting: nothing to bound.
        let _ = std::fs::write(cg.path.join("memory.swap.max"), "0");
        std::fs::write(cg.path.join("pids.max"), processes.to_string())?;
        Ok(cg)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        // `cgroup.kill` (Linux 5.14+) ends whatever is left; a cgroup with
        // no process can then be removed.
        let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        tracing::warn!(cgroup = %self.path.display(), "a sandbox cgroup could not be removed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limits are written where the kernel reads them. (That the kernel
    /// enforces them needs a delegated cgroup v2, which this test machine
    /// lacks; a plain directory stands in for the parent here.)
    #[test]
    fn a_command_cgroup_carries_its_limits() {
        let parent = tempfile::tempdir().expect("tempdir");
        let cg = SandboxCgroup::create(parent.path(), 512, 64).expect("create");
        let read = |f: &str| std::fs::read_to_string(cg.path().join(f)).expect("read");
        assert_eq!(read("memory.max"), (512u64 * 1024 * 1024).to_string());
        assert_eq!(read("memory.swap.max"), "0");
        assert_eq!(read("pids.max"), "64");
    }
}
