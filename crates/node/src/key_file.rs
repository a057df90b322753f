//! The bootstrap admin key's file, written before the installation is
//! committed so that an installation never exists whose only admin key was
//! lost.
//!
//! The key goes to a fresh temporary file (exclusive create, no symlink
//! followed, mode 0600, synced), which is then hard-linked to the final
//! name: a link never replaces or follows anything already at that name
//! (a planted symlink, a stale key), so the final path is created
//! exclusively too. If the commit fails or another replica bootstraps
//! first, the files are removed again.

use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub struct KeyFile {
    path: PathBuf,
    /// The temporary file, once placed.
    placed: Mutex<Option<PathBuf>>,
}

impl KeyFile {
    pub fn new(path: PathBuf) -> Self {
        KeyFile { path, placed: Mutex::new(None) }
    }

    /// Writes `secret` to the final path, exclusively.
    pub fn place(&self, secret: &str) -> anyhow::Result<()> {
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        if std::fs::symlink_metadata(&self.path).is_ok() {
            anyhow::bail!(
                "{} already exists, but the installation is new: move it away (it is not a key of this installation) and start again",
                self.path.display()
            );
        }
        let name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or("admin.key");
        let tmp = dir.join(format!(".{name}.{}", checkfu_core::id::new_id("tmp")));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600).custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
        }
        let mut f = opts.open(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let written = f.write_all(secret.as_bytes()).and_then(|()| f.write_all(b"\n")).and_then(|()| f.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("writing {}", tmp.display()));
        }
        if let Err(e) = std::fs::hard_link(&tmp, &self.path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("creating {}", self.path.display()));
        }
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        *self.placed.lock().unwrap_or_else(|p| p.into_inner()) = Some(tmp);
        Ok(())
    }

    /// The installation was committed: keep the key, drop the temporary name.
    pub fn keep(&self) {
        if let Some(tmp) = self.placed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = std::fs::remove_file(tmp);
        }
    }

    /// Nothing was committed with this key: remove what was placed.
    pub fn discard(&self) {
        if let Some(tmp) = self.placed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = std::fs::remove_file(&self.path);
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_created_exclusively_and_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("admin.key");
        let k = KeyFile::new(path.clone());
        k.place("ck_secret").expect("placed");
        k.keep();
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "ck_secret\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        }
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1, "no temporary file is left");
        // A second bootstrap never overwrites a key.
        assert!(KeyFile::new(path.clone()).place("ck_other").is_err());
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "ck_secret\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_planted_symlink_is_neither_followed_nor_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("elsewhere");
        let path = dir.path().join("admin.key");
        std::os::unix::fs::symlink(&target, &path).expect("symlink");
        assert!(KeyFile::new(path.clone()).place("ck_secret").is_err());
        assert!(!target.exists(), "nothing was written through the link");
        assert!(std::fs::symlink_metadata(&path).expect("link").file_type().is_symlink());
    }

    #[test]
    fn a_discarded_key_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = KeyFile::new(dir.path().join("admin.key"));
        k.place("ck_secret").expect("placed");
        k.discard();
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }
}
