//! The Session's sandbox on this execution plane: a workspace directory the
//! sandbox tools work in.
//!
//! - The file tools (`read`, `write`, `edit`, `glob`, `grep`) open every path
//!   through the kernel's confinement (`confined.rs`: `openat2` beneath the
//!   workspace), read and write regular files only, and run on blocking
//!   threads, never on the async workers.
//! - `bash` runs under bubblewrap: new PID, network, IPC and UTS namespaces
//!   (so no network at all), the host's `/usr`, `/bin` and `/lib` read-only,
//!   a minimal `/etc` of its own, a size-capped `/tmp`, and only the
//!   workspace writable. When the server runs as root, the command runs as
//!   an unprivileged user of its own (per workspace), with no capabilities
//!   and `no_new_privs`; limits on CPU time, file size, address space and
//!   processes apply (rlimits), and its output is read as it comes and cut
//!   off — the command killed — past [`MAX_OUTPUT_BYTES`], so a `cat
//!   /dev/zero` costs the server no more than that. A host without
//!   bubblewrap refuses `bash` (and says so at start-up) rather than run it
//!   unconfined.
//! - In a sandbox pod ([`Isolation::Container`]) the pod is the boundary
//!   (non-root, read-only root filesystem, no capabilities, a NetworkPolicy
//!   that lets it reach only the capability gateway): `bash` runs directly
//!   in the workspace, in a process group of its own that is killed whole at
//!   the wall clock or past the output limit, under the same rlimits, and
//!   drops root first should it have it.

use crate::confined::Root;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The most a tool returns; longer output is cut and marked (the runner
/// then turns anything over 100,000 characters into a bounded preview).
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// The largest file `read` returns or `write` writes (what passes through
/// the model); `bash` may create files up to the profile's `disk_mib`.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Entries `glob` and `grep` report at most.
pub const MAX_MATCHES: usize = 1_000;

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub content: String,
    pub is_error: bool,
}

fn ok(content: impl Into<String>) -> Outcome {
    Outcome { content: content.into(), is_error: false }
}

fn err(content: impl Into<String>) -> Outcome {
    Outcome { content: content.into(), is_error: true }
}

/// Limits for `bash`.
#[derive(Debug, Clone)]
pub struct Limits {
    pub cpu_seconds: u64,
    pub wall: Duration,
    /// Address space of each process (RLIMIT_AS).
    pub memory_mib: u64,
    /// Processes (and threads) the command may run at once, when it runs
    /// as a user of its own (RLIMIT_NPROC).
    pub processes: u64,
    /// The size of its `/tmp` (a tmpfs).
    pub tmp_mib: u64,
    /// The largest file a command may write (RLIMIT_FSIZE): the
    /// SandboxProfile's `resources.disk_mib`.
    pub file_mib: u64,
    /// The CPU share of everything the command starts (`cpu.max`), where
    /// the delegated cgroup has the `cpu` controller.
    pub cpu_millis: Option<u64>,
    /// A cgroup v2 directory delegated to the runner (memory and pids
    /// controllers enabled for its children): each command runs in a child
    /// cgroup of its own with `memory.max`, `memory.swap.max` and `pids.max`.
    pub cgroup: Option<PathBuf>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 30,
            wall: Duration::from_secs(60),
            memory_mib: 1024,
            processes: 256,
            tmp_mib: 64,
            file_mib: 4096,
            cpu_millis: None,
            cgroup: None,
        }
    }
}

/// A program the sandbox needs that this host lacks: what goes missing
/// without it, and how to install it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub program: &'static str,
    pub effect: &'static str,
    pub install: &'static str,
}

/// What this host lacks for the sandbox's full behaviour (empty on a
/// ready host). Probed once, when a runner starts.
pub fn missing_prerequisites() -> Vec<Missing> {
    let mut missing = vec![];
    if !found("bwrap") {
        missing.push(Missing {
            program: "bubblewrap",
            effect: "the bash tool is refused (it cannot be isolated)",
            install: "apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora)",
        });
    } else if !bwrap_works() {
        missing.push(Missing {
            program: "user namespaces",
            effect: "the bash tool is refused: bubblewrap is installed but cannot create namespaces here",
            install: "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or run as root",
        });
    }
    if !can_drop_root() {
        missing.push(Missing {
            program: "setpriv",
            effect: "the bash tool is refused (sandbox commands cannot drop root)",
            install: "apt-get install util-linux",
        });
    }
    missing
}

/// Whether this host can isolate `bash`: bubblewrap works, and a server
/// running as root can drop to a sandbox user.
pub fn isolation_available() -> bool {
    missing_prerequisites().is_empty()
}

fn found(program: &str) -> bool {
    std::process::Command::new(program).arg("--version").output().is_ok()
}

/// Not root, or root with `setpriv` to drop it.
fn can_drop_root() -> bool {
    !rustix::process::geteuid().is_root() || found("setpriv")
}

fn bwrap_works() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The first user id handed to sandboxes when the server runs as root;
/// each workspace gets one of [`SANDBOX_UIDS`] from here.
const SANDBOX_UID_BASE: u32 = 100_000;
const SANDBOX_UIDS: u32 = 50_000;

/// The unprivileged user a workspace's commands run as (when the server is
/// root and so can choose): stable per workspace, so its files stay its own.
fn sandbox_identity(root: &Path) -> Option<(u32, u32)> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let h =
        root.as_os_str().as_encoded_bytes().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
    let uid = SANDBOX_UID_BASE + (h % u64::from(SANDBOX_UIDS)) as u32;
    Some((uid, uid))
}

/// Gives everything under `dir` to `owner` (not following links).
fn chown_tree(dir: &Path, (uid, gid): (u32, u32)) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let _ = std::os::unix::fs::lchown(&d, Some(uid), Some(gid));
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                _ => {
                    let _ = std::os::unix::fs::lchown(e.path(), Some(uid), Some(gid));
                }
            }
        }
    }
}

/// A minimal `/etc` for the sandbox (never the host's: no shadow, no
/// service configuration): who the users are, a hostname, the loader's
/// cache. Made once per user next to the workspaces.
fn sandbox_etc(workspaces: &Path, identity: Option<(u32, u32)>) -> std::io::Result<PathBuf> {
    let (uid, gid) = identity.unwrap_or((rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw()));
    let dir = workspaces.join(".sandbox").join(format!("etc-{uid}"));
    if dir.join("passwd").exists() {
        return Ok(dir);
    }
    std::fs::create_dir_all(dir.join("alternatives"))?;
    std::fs::write(
        dir.join("passwd"),
        format!(
            "root:x:0:0:root:/root:/bin/sh\nsandbox:x:{uid}:{gid}:sandbox:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
    )?;
    std::fs::write(dir.join("group"), format!("root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n"))?;
    std::fs::write(dir.join("hosts"), "127.0.0.1 localhost sandbox\n::1 localhost\n")?;
    std::fs::write(dir.join("hostname"), "sandbox\n")?;
    std::fs::write(dir.join("nsswitch.conf"), "passwd: files\ngroup: files\nhosts: files\n")?;
    if let Ok(cache) = std::fs::read("/etc/ld.so.cache") {
        std::fs::write(dir.join("ld.so.cache"), cache)?;
    }
    Ok(dir)
}

/// What confines `bash` here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Namespaces of its own under bubblewrap (the local plane).
    Bubblewrap,
    /// The process already runs in a locked-down sandbox pod (the in-pod
    /// agent): the pod is the boundary.
    Container,
    /// Nothing can confine it: `bash` is refused.
    Unavailable,
}

impl Isolation {
    /// Bubblewrap when this host has what it needs, else nothing.
    pub fn probe() -> Isolation {
        if isolation_available() { Isolation::Bubblewrap } else { Isolation::Unavailable }
    }
}

pub struct Workspace {
    root: PathBuf,
    files: Arc<Root>,
    isolation: Isolation,
    limits: Limits,
    /// The user `bash` runs as, when the server may choose one.
    identity: Option<(u32, u32)>,
    etc: PathBuf,
    /// The route to the egress proxy (bubblewrap only); `None`: no network.
    egress: Option<SandboxEgress>,
    /// The egress proxy's URL in a sandbox pod, where the pod's network
    /// policy lets only the capability gateway be reached.
    proxy: Option<String>,
    /// Mount folders the tools may change (read-write memory mounts,
    /// `memory/<name>`); every other mount folder is read-only.
    writable_mounts: Vec<String>,
}

/// What `bash` needs to reach the egress proxy from inside bubblewrap.
#[derive(Debug, Clone)]
pub struct SandboxEgress {
    /// The directory holding the runner's socket for this command.
    pub socket_dir: PathBuf,
    /// `http://egress:<token>@127.0.0.1:3128`.
    pub proxy_url: String,
    /// The `checkfu` binary that runs `sandbox-relay` inside.
    pub relay: PathBuf,
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_OUTPUT_BYTES {
        let mut end = MAX_OUTPUT_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("\n[output truncated]");
    }
    s
}

fn arg<'a>(input: &'a Value, name: &str) -> Result<&'a str, Outcome> {
    input.get(name).and_then(Value::as_str).ok_or_else(|| err(format!("missing string argument {name:?}")))
}

/// Runs blocking file work off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Outcome> {
    tokio::task::spawn_blocking(f).await.map_err(|e| err(format!("the file tool failed: {e}")))
}

impl Workspace {
    /// Opens (creating) the workspace at `root`.
    pub fn open(root: &Path, isolation: Isolation, limits: Limits) -> std::io::Result<Workspace> {
        let fresh = !root.exists();
        std::fs::create_dir_all(root)?;
        let root = root.canonicalize()?;
        let identity = sandbox_identity(&root);
        if let Some(owner) = identity {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::symlink_metadata(&root)?;
            if fresh || meta.uid() != owner.0 {
                chown_tree(&root, owner);
            }
        }
        // Only bubblewrap mounts an `/etc` of its own (a sandbox pod's
        // root filesystem is its image's, read-only).
        let etc = match isolation {
            Isolation::Bubblewrap => sandbox_etc(root.parent().unwrap_or(&root), identity)?,
            Isolation::Container | Isolation::Unavailable => PathBuf::new(),
        };
        let files = Arc::new(Root::open(&root, identity)?);
        Ok(Workspace { root, files, isolation, limits, identity, etc, egress: None, proxy: None, writable_mounts: vec![] })
    }

    /// In a sandbox pod: `bash`'s proxy variables name `proxy_url`.
    pub fn with_proxy(mut self, proxy_url: Option<String>) -> Self {
        self.proxy = proxy_url;
        self
    }

    /// Lets the tools change these mount folders (read-write memory mounts).
    pub fn with_writable_mounts(mut self, folders: Vec<String>) -> Self {
        self.writable_mounts = folders.into_iter().filter(|f| crate::mounts::is_memory_folder(f)).collect();
        // The runner wrote them; `bash` runs as the workspace's own user.
        if let Some(owner) = self.identity {
            for f in &self.writable_mounts {
                let dir = self.root.join(f);
                if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
                    chown_tree(&dir, owner);
                }
            }
        }
        self
    }

    /// Gives `bash` its one route out: the egress proxy.
    pub fn with_egress(mut self, egress: Option<SandboxEgress>) -> Self {
        self.egress = egress;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path the agent gave, relative to the workspace: no absolute
    /// path (but `/workspace/...`), no `..`. Whether it stays inside once
    /// links are followed is the kernel's to decide when it is opened.
    fn relative(given: &str) -> Result<PathBuf, Outcome> {
        let rel = given.strip_prefix("/workspace/").or_else(|| (given == "/workspace").then_some("")).unwrap_or(given);
        let mut out = PathBuf::new();
        for c in Path::new(rel).components() {
            match c {
                Component::Normal(p) => out.push(p),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(err(format!("{given:?} is outside the workspace; use a path relative to it")));
                }
            }
        }
        Ok(out)
    }

    /// Runs a sandbox tool by name.
    pub async fn run(&self, tool: &str, input: &Value) -> Outcome {
        let result = match tool {
            "read" => self.read(input).await,
            "write" => self.write(input).await,
            "edit" => self.edit(input).await,
            "glob" => self.glob(input).await,
            "grep" => self.grep(input).await,
            "bash" => return self.bash(input).await,
            other => Err(err(format!("{other:?} is not a sandbox tool"))),
        };
        result.unwrap_or_else(|e| e)
    }

    async fn read(&self, input: &Value) -> Result<Outcome, Outcome> {
        let given = arg(input, "path")?.to_string();
        let rel = Self::relative(&given)?;
        let files = self.files.clone();
        let bytes = blocking(move || files.read(&rel, MAX_FILE_BYTES)).await?.map_err(|e| err(format!("cannot read {given:?}: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|e| err(format!("cannot read {given:?} as text: {e}")))?;
        Ok(ok(cut(text)))
    }

    /// A path the agent may change: not in a mount folder (the Session's
    /// Files, skills and read-only memory are read-only), but for a
    /// read-write memory mount.
    fn writable(&self, given: &str) -> Result<PathBuf, Outcome> {
        let rel = Self::relative(given)?;
        let text = rel.to_str().unwrap_or_default();
        let in_writable = self.writable_mounts.iter().any(|f| text.strip_prefix(f.as_str()).is_some_and(|rest| rest.starts_with('/')));
        if crate::mounts::in_mount(text) && !in_writable {
            return Err(err(format!(
                "{given:?} is read-only: skills/, uploads/ and memory/ hold the Session's mounted skills, files and memory stores (a read-write memory mount is writable)"
            )));
        }
        Ok(rel)
    }

    async fn write(&self, input: &Value) -> Result<Outcome, Outcome> {
        let given = arg(input, "path")?.to_string();
        let content = arg(input, "content")?.to_string();
        if content.len() as u64 > MAX_FILE_BYTES {
            return Err(err(format!("content is limited to {MAX_FILE_BYTES} bytes")));
        }
        let rel = self.writable(&given)?;
        let (files, n) = (self.files.clone(), content.len());
        blocking(move || files.write(&rel, content.as_bytes())).await?.map_err(|e| err(format!("cannot write {given:?}: {e}")))?;
        Ok(ok(format!("wrote {n} bytes to {given}")))
    }

    async fn edit(&self, input: &Value) -> Result<Outcome, Outcome> {
        let given = arg(input, "path")?.to_string();
        let (old, new) = (arg(input, "old")?.to_string(), arg(input, "new")?.to_string());
        let rel = self.writable(&given)?;
        let files = self.files.clone();
        let g = given.clone();
        blocking(move || {
            let bytes = files.read(&rel, MAX_FILE_BYTES).map_err(|e| err(format!("cannot read {g:?}: {e}")))?;
            let text = String::from_utf8(bytes).map_err(|e| err(format!("cannot read {g:?} as text: {e}")))?;
            match text.matches(old.as_str()).count() {
                0 => Err(err(format!("the text to replace does not occur in {g}"))),
                1 => {
                    let next = text.replacen(old.as_str(), &new, 1);
                    if next.len() as u64 > MAX_FILE_BYTES {
                        return Err(err(format!("the result would exceed {MAX_FILE_BYTES} bytes")));
                    }
                    files.write(&rel, next.as_bytes()).map_err(|e| err(format!("cannot write {g:?}: {e}")))?;
                    Ok(ok(format!("edited {g}")))
                }
                n => Err(err(format!("the text to replace occurs {n} times in {g}; include more context"))),
            }
        })
        .await?
    }

    /// Regular files under the workspace (relative paths, sorted), without
    /// following any link.
    fn files(root: &Path) -> Vec<String> {
        let mut out = vec![];
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let Ok(kind) = e.file_type() else { continue };
                let path = e.path();
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file()
                    && let Ok(rel) = path.strip_prefix(root)
                {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out
    }

    async fn glob(&self, input: &Value) -> Result<Outcome, Outcome> {
        let pattern = arg(input, "pattern")?.to_string();
        let root = self.root.clone();
        let hits: Vec<String> =
            blocking(move || Self::files(&root).into_iter().filter(|f| checkfu_core::glob::glob(&pattern, f)).take(MAX_MATCHES).collect())
                .await?;
        Ok(ok(hits.join("\n")))
    }

    async fn grep(&self, input: &Value) -> Result<Outcome, Outcome> {
        let re = regex::Regex::new(arg(input, "pattern")?).map_err(|e| err(format!("invalid pattern: {e}")))?;
        let only = input.get("path").and_then(Value::as_str).map(str::to_string);
        let (root, files) = (self.root.clone(), self.files.clone());
        blocking(move || {
            let mut hits = vec![];
            for f in Self::files(&root) {
                if only.as_deref().is_some_and(|p| !checkfu_core::glob::glob(p, &f) && f != p) {
                    continue;
                }
                // Opened like any path: a file swapped for a link or a
                // FIFO since the listing is skipped, not followed.
                let Ok(bytes) = files.read(Path::new(&f), MAX_FILE_BYTES) else { continue };
                let Ok(text) = String::from_utf8(bytes) else { continue };
                for (n, line) in text.lines().enumerate() {
                    if re.is_match(line) {
                        hits.push(format!("{f}:{}:{line}", n + 1));
                        if hits.len() >= MAX_MATCHES {
                            return ok(cut(hits.join("\n")));
                        }
                    }
                }
            }
            ok(cut(hits.join("\n")))
        })
        .await
    }

    async fn bash(&self, input: &Value) -> Outcome {
        let command = match arg(input, "command") {
            Ok(c) => c.to_string(),
            Err(e) => return e,
        };
        let l = &self.limits;
        let mut script = format!("ulimit -t {}; ulimit -f {}; ulimit -v {}; ", l.cpu_seconds, l.file_mib * 1024, l.memory_mib * 1024);
        if self.identity.is_some() {
            // Counted per user: only meaningful for a user of its own.
            script.push_str(&format!("ulimit -u {}; ", l.processes));
        }
        script.push_str(&command);
        match self.isolation {
            Isolation::Unavailable => err("bash is unavailable: this host cannot isolate processes (install bubblewrap)"),
            Isolation::Container => self.bash_in_container(&script).await,
            Isolation::Bubblewrap => self.bash_in_bubblewrap(&script).await,
        }
    }

    /// `bash` in a sandbox pod: straight in the workspace, with a clean
    /// environment, as a process group of its own.
    async fn bash_in_container(&self, script: &str) -> Outcome {
        let mut cmd = match self.identity {
            Some((uid, gid)) => {
                let mut c = tokio::process::Command::new("setpriv");
                let (u, g) = (format!("--reuid={uid}"), format!("--regid={gid}"));
                c.args([
                    u.as_str(),
                    g.as_str(),
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--bounding-set=-all",
                    "--no-new-privs",
                    "--",
                    "bash",
                ]);
                c
            }
            None => tokio::process::Command::new(container_shell()),
        };
        cmd.args(["-c", script]).current_dir(&self.root).env_clear();
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin").env("HOME", &self.root).env("TMPDIR", "/tmp");
        if let Some(url) = &self.proxy {
            for var in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"] {
                cmd.env(var, url);
            }
            cmd.env("NO_PROXY", "").env("no_proxy", "");
        }
        cmd.process_group(0);
        self.finish(cmd, true).await
    }

    async fn bash_in_bubblewrap(&self, script: &str) -> Outcome {
        let l = &self.limits;
        let ws = self.root.to_string_lossy().into_owned();
        let etc = self.etc.to_string_lossy().into_owned();
        // With a delegated cgroup v2, the command gets a cgroup of its own
        // (memory, swap and process limits for everything it starts); the
        // launcher joins it before it becomes bubblewrap.
        let cgroup = match &l.cgroup {
            Some(parent) => match crate::cgroup::SandboxCgroup::create(parent, l.memory_mib, l.processes, l.cpu_millis) {
                Ok(cg) => Some(cg),
                Err(e) => return err(format!("cannot create the sandbox's cgroup: {e}")),
            },
            None => None,
        };
        let mut cmd = match &cgroup {
            Some(cg) => {
                let mut c = tokio::process::Command::new("sh");
                c.args(["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\""]).arg(cg.path()).arg("bwrap");
                c
            }
            None => tokio::process::Command::new("bwrap"),
        };
        match self.identity {
            // As root: bubblewrap sets up the mounts, then the command
            // drops to the workspace's own user with nothing left over.
            Some(_) => cmd.args(["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]),
            None => cmd.args(["--unshare-all"]),
        };
        cmd.args(["--die-with-parent", "--new-session"]);
        for dir in ["/usr", "/bin", "/lib", "/lib64", "/sbin"] {
            if Path::new(dir).exists() {
                cmd.args(["--ro-bind", dir, dir]);
            }
        }
        cmd.args(["--ro-bind", &etc, "/etc", "--ro-bind-try", "/etc/alternatives", "/etc/alternatives"]);
        let tmp_bytes = (l.tmp_mib * 1024 * 1024).to_string();
        cmd.args(["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", &tmp_bytes, "--tmpfs", "/tmp"]);
        cmd.args(["--bind", &ws, "/workspace"]);
        // The mount folders are read-only inside (only a real directory is
        // bound: a link in its place would name a host path).
        for d in crate::mounts::MOUNT_DIRS {
            let host = self.root.join(d);
            if std::fs::symlink_metadata(&host).is_ok_and(|m| m.is_dir()) {
                cmd.args(["--ro-bind", &host.to_string_lossy(), &format!("/workspace/{d}")]);
            }
        }
        // A read-write memory mount is bound writable again inside.
        for f in &self.writable_mounts {
            let host = self.root.join(f);
            if std::fs::symlink_metadata(&host).is_ok_and(|m| m.is_dir()) {
                cmd.args(["--bind", &host.to_string_lossy(), &format!("/workspace/{f}")]);
            }
        }
        cmd.args(["--chdir", "/workspace"]);
        cmd.args(["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace"]);
        if let Some(e) = &self.egress {
            let (bin, dir) = (e.relay.to_string_lossy().into_owned(), e.socket_dir.to_string_lossy().into_owned());
            let inside = crate::egress::INSIDE_DIR;
            // Directories bubblewrap makes on the way are private (0700)
            // unless made first: the command's own user must pass them.
            cmd.args(["--perms", "0755", "--dir", "/run", "--perms", "0755", "--dir", inside]);
            cmd.args(["--ro-bind", &bin, &format!("{inside}/{}", crate::egress::RELAY_NAME), "--bind", &dir, &format!("{inside}/egress")]);
            for var in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"] {
                cmd.args(["--setenv", var, &e.proxy_url]);
            }
            cmd.args(["--setenv", "NO_PROXY", "", "--setenv", "no_proxy", ""]);
        }
        if let Some((uid, gid)) = self.identity {
            let (u, g) = (format!("--reuid={uid}"), format!("--regid={gid}"));
            cmd.args(["setpriv", &u, &g, "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]);
        }
        if self.egress.is_some() {
            let inside = crate::egress::INSIDE_DIR;
            let socket = format!("{inside}/egress/{}", crate::egress::SOCKET_NAME);
            cmd.args([format!("{inside}/{}", crate::egress::RELAY_NAME), "sandbox-relay".into(), "--socket".into(), socket]);
            cmd.args(["--listen", crate::egress::INSIDE_LISTEN, "--"]);
        }
        cmd.args(["bash", "-c", script]);
        self.finish(cmd, false).await
    }

    /// Starts the command and reads what it prints, within the wall clock.
    /// `group`: the command leads a process group, killed whole when it
    /// ends early (under bubblewrap, `--die-with-parent` does that).
    async fn finish(&self, mut cmd: tokio::process::Command, group: bool) -> Outcome {
        cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).kill_on_drop(true);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return err(format!("cannot start the sandbox: {e}")),
        };
        let _group = GroupKill(child.id().filter(|_| group).and_then(|pid| rustix::process::Pid::from_raw(pid as i32)));
        match tokio::time::timeout(self.limits.wall, collect(child)).await {
            Err(_) => err(format!("the command ran longer than {} s and was stopped", self.limits.wall.as_secs())),
            Ok(Err(e)) => err(format!("the sandbox failed: {e}")),
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                let stderr = String::from_utf8_lossy(&out.stderr);
                if !stderr.is_empty() {
                    text.push_str(&stderr);
                }
                if out.truncated {
                    text.push_str("\n[output truncated: the command was stopped]");
                    return err(text);
                }
                let code = out.status.and_then(|s| s.code()).map(|c| c.to_string()).unwrap_or_else(|| "signal".into());
                if out.status.is_some_and(|s| s.success()) { ok(cut(text)) } else { err(cut(format!("{text}\n[exit status {code}]"))) }
            }
        }
    }
}

/// The shell of a sandbox pod's image: bash, or `sh` in an image without
/// it (Alpine, distroless-with-busybox), so any image runs the `bash` tool.
fn container_shell() -> &'static str {
    let has_bash = ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"].iter().any(|p| Path::new(p).exists());
    if has_bash { "bash" } else { "sh" }
}

/// Kills a process group when dropped: whatever a command left running
/// (background jobs, a fork bomb) goes with it.
struct GroupKill(Option<rustix::process::Pid>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// What a command printed, as much as fits.
struct Collected {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// The output passed [`MAX_OUTPUT_BYTES`] and the command was killed.
    truncated: bool,
    status: Option<std::process::ExitStatus>,
}

async fn read_some<R: tokio::io::AsyncRead + Unpin>(r: &mut Option<R>, buf: &mut [u8]) -> std::io::Result<usize> {
    use tokio::io::AsyncReadExt;
    match r {
        Some(r) => r.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Reads a command's output as it comes, never holding more than
/// [`MAX_OUTPUT_BYTES`] of it: past that the command is killed.
async fn collect(mut child: tokio::process::Child) -> std::io::Result<Collected> {
    let (mut out, mut errs) = (child.stdout.take(), child.stderr.take());
    let mut c = Collected { stdout: vec![], stderr: vec![], truncated: false, status: None };
    let (mut b1, mut b2) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    while out.is_some() || errs.is_some() {
        let (n, into_stdout) = tokio::select! {
            r = read_some(&mut out, &mut b1), if out.is_some() => (r?, true),
            r = read_some(&mut errs, &mut b2), if errs.is_some() => (r?, false),
        };
        if n == 0 {
            if into_stdout {
                out = None
            } else {
                errs = None
            }
            continue;
        }
        let room = MAX_OUTPUT_BYTES.saturating_sub(c.stdout.len() + c.stderr.len());
        let chunk = if into_stdout { &b1[..n] } else { &b2[..n] };
        let keep = &chunk[..n.min(room)];
        if into_stdout {
            c.stdout.extend_from_slice(keep)
        } else {
            c.stderr.extend_from_slice(keep)
        }
        if n > room {
            c.truncated = true;
            let _ = child.start_kill();
            break;
        }
    }
    c.status = Some(child.wait().await?);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = Workspace::open(
            &dir.path().join("ws"),
            Isolation::probe(),
            Limits { cpu_seconds: 5, wall: Duration::from_secs(10), ..Default::default() },
        )
        .expect("open");
        (dir, w)
    }

    /// A read-write memory mount takes the file tools' writes (and, under
    /// bubblewrap, bash's); every other mount folder stays read-only.
    #[tokio::test(flavor = "multi_thread")]
    async fn only_read_write_memory_mounts_are_writable() {
        let (dir, w) = ws();
        let root = dir.path().join("ws");
        for m in ["memory/notes", "memory/facts"] {
            std::fs::create_dir_all(root.join(m)).expect("mount folder");
            std::fs::write(root.join(m).join("a.md"), "given").expect("mounted file");
        }
        let w = w.with_writable_mounts(vec!["memory/notes".into(), "skills/x".into(), "memory/../outputs".into()]);
        let ok = w.run("write", &json!({"path": "memory/notes/b.md", "content": "new"})).await;
        assert!(!ok.is_error, "{ok:?}");
        let edit = w.run("edit", &json!({"path": "memory/notes/a.md", "old": "given", "new": "edited"})).await;
        assert!(!edit.is_error, "{edit:?}");
        let refused = w.run("write", &json!({"path": "memory/facts/a.md", "content": "x"})).await;
        assert!(refused.is_error && refused.content.contains("read-only"), "{refused:?}");
        let beside = w.run("write", &json!({"path": "memory/notes-2/a.md", "content": "x"})).await;
        assert!(beside.is_error, "a folder named like a mount is not it: {beside:?}");
        assert!(w.run("write", &json!({"path": "skills/x/a.md", "content": "x"})).await.is_error, "only memory folders are ever writable");
        if isolation_available() {
            let r = w.run("bash", &json!({"command": "echo hi > memory/notes/c.md && echo no > memory/facts/c.md"})).await;
            assert!(std::fs::read_to_string(root.join("memory/notes/c.md")).is_ok_and(|t| t == "hi\n"), "{r:?}");
            assert!(!root.join("memory/facts/c.md").exists(), "{r:?}");
        }
    }

    /// The local plane passes the suite every sandbox passes (or, without
    /// bubblewrap, refuses `bash`).
    #[tokio::test(flavor = "multi_thread")]
    async fn the_local_workspace_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        std::fs::create_dir(&outside).expect("mkdir");
        let w = Workspace::open(&ws, Isolation::probe(), crate::conformance::limits()).expect("open");
        crate::conformance::run(&w, &ws, &outside, isolation_available()).await;
        if !isolation_available() {
            checkfu_core::testing::skip("bash under bubblewrap", "bubblewrap is not installed (the refusal was checked)");
        }
    }

    /// So does the sandbox pod's mode, where the pod is the boundary.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_container_mode_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        std::fs::create_dir(&outside).expect("mkdir");
        let w = Workspace::open(&ws, Isolation::Container, crate::conformance::limits()).expect("open");
        crate::conformance::run(&w, &ws, &outside, true).await;
        if rustix::process::geteuid().is_root() {
            let r = w.run("bash", &json!({"command": "id -u"})).await;
            let uid: u32 = r.content.trim().parse().unwrap_or(0);
            assert!(uid >= SANDBOX_UID_BASE, "a command never runs as root: {r:?}");
        }
    }

    /// In a sandbox pod, bash's proxy variables name the egress proxy the
    /// runner passed (the pod's network policy admits nothing else), and a
    /// command without one gets none.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_pod_command_names_the_egress_proxy_it_was_given() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = "http://egress:tok@10.0.0.7:7422";
        let show = json!({"command": "echo \"$HTTP_PROXY|$https_proxy|$ALL_PROXY|${NO_PROXY-unset}\""});
        let w = Workspace::open(dir.path(), Isolation::Container, crate::conformance::limits()).expect("open");
        let w = w.with_proxy(Some(url.into()));
        assert_eq!(w.run("bash", &show).await.content.trim(), format!("{url}|{url}|{url}|"));
        let bare = Workspace::open(dir.path(), Isolation::Container, crate::conformance::limits()).expect("open");
        assert_eq!(bare.run("bash", &show).await.content.trim(), "|||unset");
    }

    /// What bubblewrap adds on the local plane: no network, read-only
    /// system directories, nothing writable outside the workspace.
    #[tokio::test]
    async fn bash_is_confined_by_bubblewrap() {
        let (dir, w) = ws();
        if !isolation_available() {
            checkfu_core::testing::skip("bash under bubblewrap", "bubblewrap is not installed");
            return;
        }
        let r = w.run("bash", &json!({"command": "pwd"})).await;
        assert_eq!(r, ok("/workspace\n"));
        let outside = dir.path().join("outside.txt");
        let r = w.run("bash", &json!({"command": format!("echo x > {}", outside.display())})).await;
        assert!(r.is_error, "nothing outside the workspace is writable: {r:?}");
        assert!(!outside.exists());
        let r = w.run("bash", &json!({"command": "touch /usr/planted"})).await;
        assert!(r.is_error, "system directories are read-only: {r:?}");
        // A listener the host can reach must be unreachable from inside.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(), "control: the host reaches it");
        let _ = listener.accept();
        listener.set_nonblocking(true).expect("nonblocking");
        let r = w.run("bash", &json!({"command": format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")})).await;
        assert!(r.is_error && !r.content.contains("connected"), "no network from the sandbox: {r:?}");
        assert!(listener.accept().is_err(), "the sandbox never connected");
    }

    /// The escapes and exhaustions of the trust-boundaries report, driven
    /// through `bash` as an agent would.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_sandbox_holds_against_links_fifos_floods_and_bombs() {
        let (_dir, w) = ws();
        if !isolation_available() {
            checkfu_core::testing::skip("escapes and exhaustion through bash", "bubblewrap is not installed");
            return;
        }
        // /tmp is small, and the host's /etc is not there.
        let fill = "for i in $(seq 1 30); do head -c 8M /dev/zero > /tmp/f$i 2>/dev/null; done; du -sb /tmp | cut -f1";
        let r = w.run("bash", &json!({"command": fill})).await;
        let size: u64 = r.content.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(u64::MAX);
        assert!(size > 32 * 1024 * 1024, "the fill wrote something: {r:?}");
        assert!(size <= 64 * 1024 * 1024 + 64 * 1024, "/tmp took {size} bytes: {r:?}");
        let r = w.run("bash", &json!({"command": "ls /etc; cat /etc/shadow"})).await;
        assert!(r.is_error && !r.content.contains("shadow\n") && r.content.contains("passwd"), "{r:?}");

        if rustix::process::geteuid().is_root() {
            // Run as root, the command is a user of its own, without capabilities.
            let r = w.run("bash", &json!({"command": "id -u; grep CapEff /proc/self/status"})).await;
            let uid: u32 = r.content.lines().next().and_then(|l| l.trim().parse().ok()).unwrap_or(0);
            assert!(uid >= SANDBOX_UID_BASE, "{r:?}");
            assert!(r.content.contains("CapEff:\t0000000000000000"), "{r:?}");
            // A fork bomb meets the process limit and ends with the wall clock.
            let started = std::time::Instant::now();
            let r = w.run("bash", &json!({"command": "b() { b | b & }; b; sleep 2; echo still-here"})).await;
            assert!(started.elapsed() < Duration::from_secs(15), "{r:?}");
            // Files the command made stay usable by the file tools, and back.
            assert!(!w.run("bash", &json!({"command": "echo from-bash > made.txt"})).await.is_error);
            assert_eq!(w.run("read", &json!({"path": "made.txt"})).await, ok("from-bash\n"));
            assert!(!w.run("write", &json!({"path": "deep/new.txt", "content": "from-tools"})).await.is_error);
            assert_eq!(w.run("bash", &json!({"command": "echo more >> deep/new.txt && cat deep/new.txt"})).await, ok("from-toolsmore\n"));
        }
    }

    /// With a cgroup to manage, a command is launched into a child cgroup
    /// carrying its limits (a plain directory stands in for the delegated
    /// cgroup here; kernel enforcement needs a real cgroup v2).
    #[tokio::test]
    async fn a_command_joins_a_cgroup_of_its_own() {
        if !isolation_available() {
            checkfu_core::testing::skip("bash in a cgroup of its own", "bubblewrap is not installed");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let parent = dir.path().join("cg");
        std::fs::create_dir(&parent).expect("mkdir");
        let limits = Limits { cgroup: Some(parent.clone()), processes: 32, memory_mib: 256, ..Default::default() };
        let w = Workspace::open(&dir.path().join("ws"), Isolation::Bubblewrap, limits).expect("open");
        assert_eq!(w.run("bash", &json!({"command": "echo inside"})).await, ok("inside\n"));
        let made: Vec<_> = std::fs::read_dir(&parent).expect("list").flatten().map(|e| e.path()).collect();
        assert_eq!(made.len(), 1, "one cgroup for the command");
        let read = |f: &str| std::fs::read_to_string(made[0].join(f)).expect("read");
        assert_eq!(read("pids.max"), "32");
        assert_eq!(read("memory.max"), (256u64 << 20).to_string());
        let pid: u32 = read("cgroup.procs").trim().parse().expect("the launcher wrote its pid");
        assert!(pid > 1);
    }
}
