//! A cgroup v2 of its own for each sandboxed command, where the runner was
//! given one to manage (`RunnerConfig::sandbox_cgroup`: a directory of the
//! unified hierarchy with the `memory` and `pids` controllers enabled in its
//! `cgroup.subtree_control`, delegated to the runner's user). Unlike rlimits,
//! these bound everything the command starts, together: its memory (swap
//! included), its number of processes and, where the `cpu` controller is
//! enabled too, its CPU share (the SandboxProfile's `cpu_millis`).

use std::path::{Path, PathBuf};

/// A child cgroup, removed (its processes killed) when dropped.
#[derive(Debug)]
pub struct SandboxCgroup {
    path: PathBuf,
}

impl SandboxCgroup {
    /// Whether children of `parent` get the `cpu` controller.
    pub fn cpu_available(parent: &Path) -> bool {
        std::fs::read_to_string(parent.join("cgroup.subtree_control")).is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
    }

    /// `cpu_millis`, when given, becomes `cpu.max` (that many thousandths
    /// of a CPU per 100 ms period).
    pub fn create(parent: &Path, memory_mib: u64, processes: u64, cpu_millis: Option<u64>) -> std::io::Result<SandboxCgroup> {
        let path = parent.join(checkfu_core::id::new_id("sbx"));
        std::fs::create_dir(&path)?;
        let cg = SandboxCgroup { path };
        let bytes = memory_mib.saturating_mul(1024 * 1024);
        std::fs::write(cg.path.join("memory.max"), bytes.to_string())?;
        // Absent when the kernel has no swap accounting: nothing to bound.
        let _ = std::fs::write(cg.path.join("memory.swap.max"), "0");
        std::fs::write(cg.path.join("pids.max"), processes.to_string())?;
        if let Some(millis) = cpu_millis {
            std::fs::write(cg.path.join("cpu.max"), format!("{} 100000", millis.max(1) * 100))?;
        }
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
        let cg = SandboxCgroup::create(parent.path(), 512, 64, Some(1500)).expect("create");
        let read = |f: &str| std::fs::read_to_string(cg.path().join(f)).expect("read");
        assert_eq!(read("memory.max"), (512u64 * 1024 * 1024).to_string());
        assert_eq!(read("memory.swap.max"), "0");
        assert_eq!(read("pids.max"), "64");
        assert_eq!(read("cpu.max"), "150000 100000", "1.5 CPUs per 100 ms period");
        assert!(!SandboxCgroup::cpu_available(parent.path()));
        std::fs::write(parent.path().join("cgroup.subtree_control"), "memory pids cpu\n").expect("write");
        assert!(SandboxCgroup::cpu_available(parent.path()));
    }
}
