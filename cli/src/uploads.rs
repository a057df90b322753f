//! `checkfu files upload PATH` and `checkfu skills push DIR`: clients of the
//! public API that send multipart forms, reporting progress on standard
//! error as the bytes leave (a line per tenth on a pipe, one updating line
//! on a terminal).

use crate::client::{Client, ClientArgs};
use crate::resolve::{self, SKILL};
use anyhow::{Context, bail};
use clap::Subcommand;
use futures_util::StreamExt;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Bytes read from disk per part of the body.
const CHUNK: usize = 256 * 1024;
/// Files a skill bundle holds at most (the server refuses more).
const MAX_BUNDLE_FILES: usize = 512;

#[derive(Debug, Clone, Subcommand)]
pub enum FilesAction {
    /// Upload a file (at most 64 MiB) into an Environment.
    Upload {
        path: PathBuf,
        #[arg(long)]
        environment: Option<String>,
        /// Delete it after this many seconds (3600 to 31536000); default the
        /// installation's retention.
        #[arg(long)]
        expires_in_seconds: Option<i64>,
        /// Its media type; default from the file's extension, else
        /// application/octet-stream.
        #[arg(long)]
        media_type: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// List your Files (every File of an Environment you manage).
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Delete a File; its bytes are destroyed.
    Delete { id: String },
}

#[derive(Debug, Clone, Subcommand)]
pub enum SkillsAction {
    /// Push the bundle in DIR (SKILL.md and the rest): a new skill, or the
    /// next version of the Environment's active skill of the same name.
    Push {
        dir: PathBuf,
        #[arg(long)]
        environment: Option<String>,
        /// The skill to version (default: found by SKILL.md's name).
        #[arg(long)]
        skill: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// List the skills of the Environments you may read.
    List {
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        include_archived: bool,
    },
    /// Archive a skill: no new version or publication may name it.
    Archive { id: String },
    #[command(flatten)]
    Proposal(crate::skill_proposals::ProposalAction),
}

/// One part of a form as sent.
enum Part {
    Field(&'static str, String),
    File { name: &'static str, filename: String, media_type: String, path: PathBuf },
}

/// Reports bytes sent on standard error.
struct Progress {
    what: String,
    total: u64,
    sent: u64,
    shown: u64,
    terminal: bool,
}

impl Progress {
    fn new(what: String, total: u64) -> Progress {
        Progress { what, total, sent: 0, shown: u64::MAX, terminal: std::io::stderr().is_terminal() }
    }

    fn add(&mut self, n: u64) {
        self.sent += n;
        let tenth = (self.sent * 10).checked_div(self.total).unwrap_or(10);
        if tenth == self.shown && !(self.terminal && self.sent == self.total) {
            return;
        }
        self.shown = tenth;
        let pct = (self.sent * 100).checked_div(self.total).unwrap_or(100);
        let line = format!("{}: {pct}% ({} of {} bytes)", self.what, self.sent, self.total);
        let mut err = std::io::stderr();
        let _ = if self.terminal { write!(err, "\r{line}") } else { writeln!(err, "{line}") };
        if self.terminal && self.sent >= self.total {
            let _ = writeln!(err);
        }
    }
}

/// A guess from the extension, for the common kinds.
fn media_type_of(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("txt" | "log") => "text/plain",
        Some("md") => "text/markdown",
        Some("csv") => "text/csv",
        Some("html" | "htm") => "text/html",
        Some("json") => "application/json",
        Some("xml") => "application/xml",
        Some("yaml" | "yml") => "application/yaml",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "application/octet-stream",
    }
}

/// A quoted header parameter: quotes, backslashes and line breaks escaped.
fn quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace(['\r', '\n'], " ")
}

/// The form's body as a stream read from disk as it is sent, and its length.
fn form(parts: Vec<Part>, boundary: &str, what: String) -> anyhow::Result<(reqwest::Body, u64)> {
    let mut pieces: Vec<Result<Vec<u8>, PathBuf>> = vec![];
    let mut file_bytes = 0u64;
    let mut length = 0u64;
    for p in parts {
        let head = match &p {
            Part::Field(name, _) => format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"),
            Part::File { name, filename, media_type, .. } => format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{}\"\r\nContent-Type: {media_type}\r\n\r\n",
                quoted(filename)
            ),
        };
        length += head.len() as u64;
        pieces.push(Ok(head.into_bytes()));
        match p {
            Part::Field(_, value) => {
                length += value.len() as u64;
                pieces.push(Ok(value.into_bytes()));
            }
            Part::File { path, .. } => {
                let size = std::fs::metadata(&path).with_context(|| format!("reading {}", path.display()))?.len();
                file_bytes += size;
                length += size;
                pieces.push(Err(path));
            }
        }
        length += 2;
        pieces.push(Ok(b"\r\n".to_vec()));
    }
    let tail = format!("--{boundary}--\r\n");
    length += tail.len() as u64;
    pieces.push(Ok(tail.into_bytes()));
    let progress = std::sync::Arc::new(std::sync::Mutex::new(Progress::new(what, file_bytes)));
    let stream = futures_util::stream::iter(pieces).flat_map(move |piece| match piece {
        Ok(bytes) => futures_util::stream::iter(vec![Ok::<_, std::io::Error>(bytes)]).boxed(),
        Err(path) => read_chunks(path, progress.clone()).boxed(),
    });
    Ok((reqwest::Body::wrap_stream(stream), length))
}

/// A file's bytes a chunk at a time, counted as they are read.
fn read_chunks(
    path: PathBuf,
    progress: std::sync::Arc<std::sync::Mutex<Progress>>,
) -> impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> + Send {
    use tokio::io::AsyncReadExt;
    futures_util::stream::unfold((None::<tokio::fs::File>, Some(path)), move |(file, path)| {
        let progress = progress.clone();
        async move {
            let mut file = match (file, path) {
                (Some(f), _) => f,
                (None, Some(p)) => match tokio::fs::File::open(&p).await {
                    Ok(f) => f,
                    Err(e) => return Some((Err(e), (None, None))),
                },
                (None, None) => return None,
            };
            let mut buf = vec![0u8; CHUNK];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    progress.lock().unwrap_or_else(|p| p.into_inner()).add(n as u64);
                    Some((Ok(buf), (Some(file), None)))
                }
                Err(e) => Some((Err(e), (None, None))),
            }
        }
    })
}

async fn send_form(c: &Client, url: String, parts: Vec<Part>, what: String, key: Option<&str>) -> anyhow::Result<Value> {
    let boundary = format!("checkfu-{}", checkfu_core::id::new_id("form"));
    let (body, length) = form(parts, &boundary, what)?;
    let mut rb = c
        .http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, format!("multipart/form-data; boundary={boundary}"))
        .header(reqwest::header::CONTENT_LENGTH, length)
        .body(body);
    if let Some(k) = key {
        rb = rb.header("Idempotency-Key", k);
    }
    c.call(rb).await
}

fn file_line(f: &Value) -> String {
    format!(
        "{}  {}  {}  {} bytes  expires {}",
        f["id"].as_str().unwrap_or_default(),
        f["filename"].as_str().unwrap_or_default(),
        f["media_type"].as_str().unwrap_or_default(),
        f["size_bytes"],
        f["expires_at"].as_str().unwrap_or("never"),
    )
}

pub async fn files(args: ClientArgs, action: FilesAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let printer = crate::output::Printer::of(&args);
    let print = |out: &mut dyn Write, v: &Value| printer.line(out, v, file_line);
    let at = |rest: &str| format!("{}/v1/files{rest}", c.base);
    match action {
        FilesAction::Upload { path, environment, expires_in_seconds, media_type, idempotency_key } => {
            let environment = resolve::environment(&c, environment.as_deref()).await?;
            let filename = path.file_name().and_then(|n| n.to_str()).context("the path names no file")?.to_string();
            let media_type = media_type.unwrap_or_else(|| media_type_of(&path).to_string());
            let mut parts = vec![Part::Field("environment_id", environment)];
            if let Some(s) = expires_in_seconds {
                parts.push(Part::Field("expires_in_seconds", s.to_string()));
            }
            parts.push(Part::File { name: "file", filename: filename.clone(), media_type, path });
            print(out, &send_form(&c, at(""), parts, format!("uploading {filename}"), idempotency_key.as_deref()).await?)
        }
        FilesAction::List { environment } => {
            let environment = resolve::environment_filter(&c, environment.as_deref()).await?;
            for v in c.every(&at(""), &[("environment_id", environment)]).await? {
                print(out, &v)?;
            }
            Ok(())
        }
        FilesAction::Delete { id } => {
            let v = c.call(c.http.delete(at(&format!("/{id}")))).await?;
            printer.line(out, &v, |_| format!("deleted {id}"))
        }
    }
}

fn skill_line(s: &Value) -> String {
    format!(
        "{}  {:<8} {}  v{}  {}",
        s["id"].as_str().unwrap_or_default(),
        s["status"].as_str().unwrap_or_default(),
        s["name"].as_str().unwrap_or_default(),
        s["latest_version"],
        s["description"].as_str().unwrap_or_default(),
    )
}

/// Every regular file beneath `dir` (relative paths, sorted), skipping
/// hidden entries (`.git`, editor files).
fn bundle_files(dir: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut out = vec![];
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let name = e.file_name().into_string().map_err(|_| anyhow::anyhow!("{} is not UTF-8", e.path().display()))?;
            if name.starts_with('.') {
                continue;
            }
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            let kind = e.file_type()?;
            if kind.is_dir() {
                stack.push((e.path(), rel));
            } else if kind.is_file() {
                out.push((rel, e.path()));
                if out.len() > MAX_BUNDLE_FILES {
                    bail!("a skill holds at most {MAX_BUNDLE_FILES} files");
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The `name` in SKILL.md's front matter.
fn skill_name(dir: &Path) -> anyhow::Result<String> {
    #[derive(serde::Deserialize)]
    struct Front {
        name: String,
    }
    let text = std::fs::read_to_string(dir.join("SKILL.md")).with_context(|| format!("{} has no SKILL.md", dir.display()))?;
    let body =
        text.strip_prefix("---").and_then(|r| r.split_once("\n---")).map(|(fm, _)| fm).context("SKILL.md opens with no front matter")?;
    let front: Front = serde_saphyr::from_str(body).map_err(|e| anyhow::anyhow!("SKILL.md's front matter: {e}"))?;
    Ok(front.name)
}

pub async fn skills(args: ClientArgs, action: SkillsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let printer = crate::output::Printer::of(&args);
    let print = |out: &mut dyn Write, v: &Value| printer.line(out, v, skill_line);
    let at = |rest: &str| format!("{}/v1/skills{rest}", c.base);
    match action {
        SkillsAction::Push { dir, environment, skill, idempotency_key } => {
            let environment = resolve::environment(&c, environment.as_deref()).await?;
            let files = bundle_files(&dir)?;
            let skill = match skill {
                Some(id) => Some(resolve::id(&c, SKILL, &id, Some(&environment)).await?),
                None => {
                    let name = skill_name(&dir)?;
                    let list = c.every(&at(""), &[("environment_id", Some(environment.clone()))]).await?;
                    list.iter().find(|s| s["name"] == name.as_str()).and_then(|s| s["id"].as_str()).map(str::to_string)
                }
            };
            let mut parts = vec![];
            if skill.is_none() {
                parts.push(Part::Field("environment_id", environment));
            }
            let n = files.len();
            for (rel, path) in files {
                let media_type = media_type_of(&path).to_string();
                parts.push(Part::File { name: "files", filename: rel, media_type, path });
            }
            let what = format!("pushing {} ({n} files)", dir.display());
            match skill {
                Some(id) => {
                    let v = send_form(&c, at(&format!("/{id}/versions")), parts, what, idempotency_key.as_deref()).await?;
                    printer.line(out, &v, |v| {
                        format!("{}  {}  version {}  ({} files)", id, v["name"].as_str().unwrap_or_default(), v["version"], n)
                    })
                }
                None => print(out, &send_form(&c, at(""), parts, what, idempotency_key.as_deref()).await?),
            }
        }
        SkillsAction::List { environment, include_archived } => {
            let archived = include_archived.then(|| "true".to_string());
            let environment = resolve::environment_filter(&c, environment.as_deref()).await?;
            for v in c.every(&at(""), &[("environment_id", environment), ("include_archived", archived)]).await? {
                print(out, &v)?;
            }
            Ok(())
        }
        SkillsAction::Archive { id } => {
            let id = resolve::id(&c, SKILL, &id, None).await?;
            print(out, &c.call(c.http.post(at(&format!("/{id}/archive")))).await?)
        }
        SkillsAction::Proposal(action) => crate::skill_proposals::proposals(&c, &printer, action, out).await,
    }
}
