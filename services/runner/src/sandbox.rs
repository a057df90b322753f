//! The Session's sandbox on this execution plane: a workspace directory the
//! sandbox tools work in. File tools (`read`, `write`, `edit`, `glob`,
//! `grep`) are confined to it — no absolute paths, no `..` escape, no way
//! out through a symlink. `bash` runs under bubblewrap with no network, the
//! host's system directories read-only, only the workspace writable, and
//! limits on CPU time, file size, output and wall-clock time. A host without
//! bubblewrap refuses `bash` (and says so at start-up) rather than run it
//! unconfined.

use serde_json::Value;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The most a tool returns; longer output is cut and marked (the runner
/// then turns anything over 100,000 characters into a bounded preview).
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// The largest file `read` returns, `write` writes or `bash` may create.
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
}

impl Default for Limits {
    fn default() -> Self {
        Limits { cpu_seconds: 30, wall: Duration::from_secs(60) }
    }
}

/// Whether this host can isolate `bash` (bubblewrap present and working).
pub fn isolation_available() -> bool {
    std::process::Command::new("bwrap")
        .args(["--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub struct Workspace {
    root: PathBuf,
    isolation: bool,
    limits: Limits,
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

impl Workspace {
    /// Opens (creating) the workspace at `root`.
    pub fn open(root: &Path, isolation: bool, limits: Limits) -> std::io::Result<Workspace> {
        std::fs::create_dir_all(root)?;
        Ok(Workspace { root: root.canonicalize()?, isolation, limits })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Maps a path the agent gave to one inside the workspace, refusing
    /// anything that would leave it, lexically or through a symlink.
    pub fn resolve(&self, given: &str) -> Result<PathBuf, Outcome> {
        let rel = given.strip_prefix("/workspace/").or_else(|| (given == "/workspace").then_some("")).unwrap_or(given);
        let mut out = self.root.clone();
        for c in Path::new(rel).components() {
            match c {
                Component::Normal(p) => out.push(p),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(err(format!("{given:?} is outside the workspace; use a path relative to it")));
                }
            }
        }
        // The deepest existing ancestor must still be inside once symlinks resolve.
        let mut probe = out.as_path();
        while !probe.exists() {
            match probe.parent() {
                Some(p) => probe = p,
                None => break,
            }
        }
        let real = probe.canonicalize().map_err(|e| err(format!("cannot resolve {given:?}: {e}")))?;
        if !real.starts_with(&self.root) {
            return Err(err(format!("{given:?} leads outside the workspace")));
        }
        Ok(out)
    }

    /// Runs a sandbox tool by name.
    pub async fn run(&self, tool: &str, input: &Value) -> Outcome {
        let result = match tool {
            "read" => self.read(input),
            "write" => self.write(input),
            "edit" => self.edit(input),
            "glob" => self.glob(input),
            "grep" => self.grep(input),
            "bash" => return self.bash(input).await,
            other => Err(err(format!("{other:?} is not a sandbox tool"))),
        };
        result.unwrap_or_else(|e| e)
    }

    fn read(&self, input: &Value) -> Result<Outcome, Outcome> {
        let path = self.resolve(arg(input, "path")?)?;
        let meta = std::fs::metadata(&path).map_err(|e| err(format!("cannot read {}: {e}", arg(input, "path").unwrap_or_default())))?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(err(format!("the file is {} bytes; read at most {MAX_FILE_BYTES}", meta.len())));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| err(format!("cannot read as text: {e}")))?;
        Ok(ok(cut(text)))
    }

    fn write(&self, input: &Value) -> Result<Outcome, Outcome> {
        let given = arg(input, "path")?;
        let content = arg(input, "content")?;
        if content.len() as u64 > MAX_FILE_BYTES {
            return Err(err(format!("content is limited to {MAX_FILE_BYTES} bytes")));
        }
        let path = self.resolve(given)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| err(format!("cannot create {given:?}: {e}")))?;
        }
        std::fs::write(&path, content).map_err(|e| err(format!("cannot write {given:?}: {e}")))?;
        Ok(ok(format!("wrote {} bytes to {given}", content.len())))
    }

    fn edit(&self, input: &Value) -> Result<Outcome, Outcome> {
        let given = arg(input, "path")?;
        let (old, new) = (arg(input, "old")?, arg(input, "new")?);
        let path = self.resolve(given)?;
        let text = std::fs::read_to_string(&path).map_err(|e| err(format!("cannot read {given:?}: {e}")))?;
        match text.matches(old).count() {
            0 => Err(err(format!("the text to replace does not occur in {given}"))),
            1 => {
                let next = text.replacen(old, new, 1);
                if next.len() as u64 > MAX_FILE_BYTES {
                    return Err(err(format!("the result would exceed {MAX_FILE_BYTES} bytes")));
                }
                std::fs::write(&path, next).map_err(|e| err(format!("cannot write {given:?}: {e}")))?;
                Ok(ok(format!("edited {given}")))
            }
            n => Err(err(format!("the text to replace occurs {n} times in {given}; include more context"))),
        }
    }

    /// Files under the workspace (relative paths, sorted), without
    /// following symlinks out of it.
    fn files(&self) -> Vec<String> {
        let mut out = vec![];
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let Ok(kind) = e.file_type() else { continue };
                let path = e.path();
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file()
                    && let Ok(rel) = path.strip_prefix(&self.root)
                {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out
    }

    fn glob(&self, input: &Value) -> Result<Outcome, Outcome> {
        let pattern = arg(input, "pattern")?;
        let hits: Vec<String> = self.files().into_iter().filter(|f| checkfu_core::glob::glob(pattern, f)).take(MAX_MATCHES).collect();
        Ok(ok(hits.join("\n")))
    }

    fn grep(&self, input: &Value) -> Result<Outcome, Outcome> {
        let re = regex::Regex::new(arg(input, "pattern")?).map_err(|e| err(format!("invalid pattern: {e}")))?;
        let only = input.get("path").and_then(Value::as_str);
        let mut hits = vec![];
        for f in self.files() {
            if only.is_some_and(|p| !checkfu_core::glob::glob(p, &f) && f != p) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(self.root.join(&f)) else { continue };
            for (n, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    hits.push(format!("{f}:{}:{line}", n + 1));
                    if hits.len() >= MAX_MATCHES {
                        return Ok(ok(cut(hits.join("\n"))));
                    }
                }
            }
        }
        Ok(ok(cut(hits.join("\n"))))
    }

    async fn bash(&self, input: &Value) -> Outcome {
        let command = match arg(input, "command") {
            Ok(c) => c.to_string(),
            Err(e) => return e,
        };
        if !self.isolation {
            return err("bash is unavailable: this host cannot isolate processes (install bubblewrap)");
        }
        let blocks = MAX_FILE_BYTES / 1024;
        let script = format!("ulimit -t {}; ulimit -f {blocks}; {command}", self.limits.cpu_seconds);
        let ws = self.root.to_string_lossy().into_owned();
        let mut cmd = tokio::process::Command::new("bwrap");
        cmd.args(["--unshare-all", "--die-with-parent", "--new-session"]);
        for dir in ["/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc"] {
            if Path::new(dir).exists() {
                cmd.args(["--ro-bind", dir, dir]);
            }
        }
        cmd.args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", &ws, "/workspace", "--chdir", "/workspace"]);
        cmd.args(["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace"]);
        cmd.args(["bash", "-c", &script]);
        cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).kill_on_drop(true);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return err(format!("cannot start the sandbox: {e}")),
        };
        match tokio::time::timeout(self.limits.wall, child.wait_with_output()).await {
            Err(_) => err(format!("the command ran longer than {} s and was stopped", self.limits.wall.as_secs())),
            Ok(Err(e)) => err(format!("the sandbox failed: {e}")),
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                let stderr = String::from_utf8_lossy(&out.stderr);
                if !stderr.is_empty() {
                    text.push_str(&stderr);
                }
                let code = out.status.code().map(|c| c.to_string()).unwrap_or_else(|| "signal".into());
                if out.status.success() { ok(cut(text)) } else { err(cut(format!("{text}\n[exit status {code}]"))) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = Workspace::open(&dir.path().join("ws"), isolation_available(), Limits { cpu_seconds: 5, wall: Duration::from_secs(10) })
            .expect("open");
        (dir, w)
    }

    #[tokio::test]
    async fn file_tools_work_inside_the_workspace() {
        let (_d, w) = ws();
        assert!(!w.run("write", &json!({"path": "notes/a.txt", "content": "hello\nworld\n"})).await.is_error);
        assert_eq!(w.run("read", &json!({"path": "notes/a.txt"})).await, ok("hello\nworld\n"));
        assert_eq!(w.run("read", &json!({"path": "/workspace/notes/a.txt"})).await.content, "hello\nworld\n");
        assert!(!w.run("edit", &json!({"path": "notes/a.txt", "old": "world", "new": "there"})).await.is_error);
        assert!(w.run("edit", &json!({"path": "notes/a.txt", "old": "absent", "new": "x"})).await.is_error);
        w.run("write", &json!({"path": "b.md", "content": "hello again"})).await;
        assert_eq!(w.run("glob", &json!({"pattern": "*.txt"})).await.content, "notes/a.txt");
        assert_eq!(w.run("grep", &json!({"pattern": "^hel+o$"})).await.content, "notes/a.txt:1:hello");
        assert!(w.run("teleport", &json!({})).await.is_error);
        assert!(w.run("read", &json!({})).await.is_error, "missing arguments are an error result, not a panic");
    }

    #[tokio::test]
    async fn paths_cannot_leave_the_workspace() {
        let (dir, w) = ws();
        std::fs::write(dir.path().join("secret"), "s3cret").expect("write");
        for path in ["../secret", "/etc/passwd", "notes/../../secret", "/workspace/../secret"] {
            let r = w.run("read", &json!({"path": path})).await;
            assert!(r.is_error && !r.content.contains("s3cret") && !r.content.contains("root:"), "{path}: {r:?}");
        }
        assert!(w.run("write", &json!({"path": "../escape", "content": "x"})).await.is_error);
        assert!(!dir.path().join("escape").exists());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path(), w.root().join("link")).expect("symlink");
            let r = w.run("read", &json!({"path": "link/secret"})).await;
            assert!(r.is_error && !r.content.contains("s3cret"), "symlinks do not lead out: {r:?}");
            assert!(w.run("write", &json!({"path": "link/planted", "content": "x"})).await.is_error);
            assert!(!dir.path().join("planted").exists());
        }
    }

    #[tokio::test]
    async fn bash_is_confined_or_refused() {
        let (dir, w) = ws();
        if !isolation_available() {
            let r = w.run("bash", &json!({"command": "echo hi"})).await;
            assert!(r.is_error && r.content.contains("cannot isolate"));
            return;
        }
        let r = w.run("bash", &json!({"command": "echo hi > out.txt && cat out.txt && pwd"})).await;
        assert_eq!(r, ok("hi\n/workspace\n"));
        assert!(w.root().join("out.txt").exists(), "the workspace is writable and shared with the file tools");
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
        let r = w.run("bash", &json!({"command": "exit 3"})).await;
        assert!(r.is_error && r.content.contains("exit status 3"));
        let r = w.run("bash", &json!({"command": "yes | head -c 1200000"})).await;
        assert!(r.content.len() <= MAX_OUTPUT_BYTES + 40 && r.content.ends_with("[output truncated]"));
    }

    #[tokio::test]
    async fn bash_stops_at_the_wall_clock_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w =
            Workspace::open(dir.path(), isolation_available(), Limits { cpu_seconds: 5, wall: Duration::from_millis(500) }).expect("open");
        if !isolation_available() {
            return;
        }
        let started = std::time::Instant::now();
        let r = w.run("bash", &json!({"command": "sleep 30"})).await;
        assert!(r.is_error && r.content.contains("longer than"));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
