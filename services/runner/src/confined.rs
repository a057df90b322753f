//! File access confined to a workspace directory by the kernel, not by
//! checking paths first and opening them after.
//!
//! Every path is opened relative to the workspace's directory descriptor
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: a `..`, an
//! absolute path or a symlink that would lead outside fails in the kernel
//! at the moment of opening, so a link the agent made with `bash` (`ln -s
//! ../../x p`) cannot redirect a later `write p`. Files are created with
//! `O_NOFOLLOW` (never through a final symlink) and directories one
//! component at a time. Only regular files are read or written: a FIFO or
//! a device is refused before any blocking read (`O_NONBLOCK` on open, then
//! `fstat`). On kernels without `openat2` (before 5.6) every component is
//! opened with `O_NOFOLLOW` instead, which refuses symlinks altogether.
//!
//! Everything here blocks: callers run it on a blocking thread.

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

/// A workspace directory, held open.
pub struct Root {
    dir: OwnedFd,
    /// The owner given to what the file tools create, so the sandbox
    /// (which may run as another user) can change it.
    owner: Option<(rustix::fs::Uid, rustix::fs::Gid)>,
}

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// The normal components of a relative path; anything else is refused.
fn components(rel: &Path) -> std::io::Result<Vec<&std::ffi::OsStr>> {
    let mut out = vec![];
    for c in rel.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            _ => return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "the path leaves the workspace")),
        }
    }
    Ok(out)
}

fn other(e: rustix::io::Errno) -> std::io::Error {
    match e {
        rustix::io::Errno::XDEV | rustix::io::Errno::LOOP => {
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "the path leads outside the workspace (through a link)")
        }
        e => e.into(),
    }
}

impl Root {
    pub fn open(path: &Path, owner: Option<(u32, u32)>) -> std::io::Result<Root> {
        let dir = rustix::fs::open(path, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
        let owner = owner.map(|(u, g)| (rustix::fs::Uid::from_raw(u), rustix::fs::Gid::from_raw(g)));
        Ok(Root { dir, owner })
    }

    /// Opens `rel` beneath `dir` (one or more components).
    fn open_beneath(dir: impl AsFd, rel: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        match rustix::fs::openat2(dir.as_fd(), rel, flags | OFlags::CLOEXEC, mode, RESOLVE) {
            Err(rustix::io::Errno::NOSYS) => Self::walk_nofollow(dir, rel, flags, mode),
            r => r.map_err(other),
        }
    }

    /// The fallback without `openat2`: each component opened with
    /// `O_NOFOLLOW`, so no symlink is followed at all.
    fn walk_nofollow(dir: impl AsFd, rel: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        let parts = components(rel)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Ok(rustix::fs::openat(dir.as_fd(), ".", flags | OFlags::CLOEXEC, mode)?);
        };
        let mut cur: Option<OwnedFd> = None;
        for d in dirs {
            let at = cur.as_ref().map(|f| f.as_fd()).unwrap_or(dir.as_fd());
            let next = rustix::fs::openat(at, *d, OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                .map_err(other)?;
            cur = Some(next);
        }
        let at = cur.as_ref().map(|f| f.as_fd()).unwrap_or(dir.as_fd());
        rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode).map_err(other)
    }

    fn chown(&self, fd: impl AsFd) {
        if let Some((u, g)) = self.owner {
            let _ = rustix::fs::fchown(fd, Some(u), Some(g));
        }
    }

    /// The directory `rel` beneath the root, created (with its parents)
    /// when missing.
    fn mkdirs(&self, rel: &Path) -> std::io::Result<OwnedFd> {
        let mut cur = rustix::fs::openat(&self.dir, ".", OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
        for part in components(rel)? {
            let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY;
            cur = match Self::open_beneath(&cur, Path::new(part), flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    match rustix::fs::mkdirat(&cur, part, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    let fd = Self::open_beneath(&cur, Path::new(part), flags, Mode::empty())?;
                    self.chown(&fd);
                    fd
                }
                Err(e) => return Err(e),
            };
        }
        Ok(cur)
    }

    /// Reads the regular file `rel`, at most `max` bytes (larger → error).
    pub fn read(&self, rel: &Path, max: u64) -> std::io::Result<Vec<u8>> {
        let fd = Self::open_beneath(&self.dir, rel, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "only regular files are read"));
        }
        if st.st_size as u64 > max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the file is {} bytes; the limit is {max}", st.st_size),
            ));
        }
        let mut buf = Vec::with_capacity(st.st_size as usize);
        std::fs::File::from(fd).take(max + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > max {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("the file grew past the limit of {max} bytes")));
        }
        Ok(buf)
    }

    /// The regular file `rel`, opened for reading (never a FIFO or a
    /// device, never through a link leading out).
    pub fn open_file(&self, rel: &Path) -> std::io::Result<std::fs::File> {
        let fd = Self::open_beneath(&self.dir, rel, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "only regular files are read"));
        }
        Ok(std::fs::File::from(fd))
    }

    /// Removes the file `rel` (a link itself, never what it points to).
    pub fn remove(&self, rel: &Path) -> std::io::Result<()> {
        let parts = components(rel)?;
        let Some((name, dirs)) = parts.split_last() else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "name a file"));
        };
        let flags = OFlags::DIRECTORY | OFlags::RDONLY;
        let dir = if dirs.is_empty() {
            rustix::fs::openat(&self.dir, ".", flags | OFlags::CLOEXEC, Mode::empty())?
        } else {
            Self::open_beneath(&self.dir, &dirs.iter().collect::<std::path::PathBuf>(), flags, Mode::empty())?
        };
        rustix::fs::unlinkat(&dir, *name, rustix::fs::AtFlags::empty())?;
        Ok(())
    }

    /// Writes `bytes` to the regular file `rel` (created, or truncated),
    /// creating its directories; never through a symlink.
    pub fn write(&self, rel: &Path, bytes: &[u8]) -> std::io::Result<()> {
        self.create(rel)?.write_all(bytes)
    }

    /// The regular file `rel`, created (or truncated) for writing, with its
    /// directories; never through a symlink.
    pub fn create(&self, rel: &Path) -> std::io::Result<std::fs::File> {
        let parts = components(rel)?;
        let Some((name, dirs)) = parts.split_last() else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "name a file"));
        };
        let dir = self.mkdirs(&dirs.iter().collect::<std::path::PathBuf>())?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd = Self::open_beneath(&dir, Path::new(name), flags, Mode::from_raw_mode(0o644))?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "only regular files are written"));
        }
        self.chown(&fd);
        rustix::fs::ftruncate(&fd, 0)?;
        Ok(std::fs::File::from(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_out_of_the_root_are_refused_by_the_kernel() {
        let top = tempfile::tempdir().expect("tempdir");
        let ws = top.path().join("ws");
        std::fs::create_dir(&ws).expect("mkdir");
        std::fs::write(top.path().join("secret"), "s3cret").expect("write");
        let root = Root::open(&ws, None).expect("open");
        std::os::unix::fs::symlink("../secret", ws.join("up")).expect("symlink");
        std::os::unix::fs::symlink("../../planted", ws.join("dangling")).expect("symlink");
        std::os::unix::fs::symlink("/etc", ws.join("etc")).expect("symlink");
        assert!(root.read(Path::new("up"), 100).is_err());
        assert!(root.read(Path::new("etc/hostname"), 100).is_err());
        assert!(root.write(Path::new("dangling"), b"x").is_err());
        assert!(!top.path().join("planted").exists(), "a dangling link led a write outside");
        assert!(root.write(Path::new("etc/planted"), b"x").is_err());
        assert!(root.read(Path::new("../secret"), 100).is_err());
        // Links that stay inside keep working for reads.
        root.write(Path::new("a/b/c.txt"), b"hello").expect("write");
        std::os::unix::fs::symlink("a/b/c.txt", ws.join("inside")).expect("symlink");
        assert_eq!(root.read(Path::new("inside"), 100).expect("read"), b"hello");
        assert!(root.read(Path::new("a/b/c.txt"), 3).is_err(), "over the size limit");
    }

    #[test]
    fn only_regular_files_are_read_and_nothing_blocks() {
        let top = tempfile::tempdir().expect("tempdir");
        let root = Root::open(top.path(), None).expect("open");
        let fifo = top.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        let started = std::time::Instant::now();
        assert!(root.read(Path::new("pipe"), 100).is_err());
        assert!(root.write(Path::new("pipe"), b"x").is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "a FIFO blocked");
        std::fs::create_dir(top.path().join("dir")).expect("mkdir");
        assert!(root.read(Path::new("dir"), 100).is_err());
    }
}
