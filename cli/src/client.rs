//! The HTTP client every command uses: the public `/v1` API with an API key,
//! like any other client. A refusal keeps the API's error type, so the
//! binary exits 1 with it on stderr; a mistake in the command line is a
//! [`Usage`] error, exit 2.

use anyhow::Context;
use clap::Args;
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The API server.
    #[arg(long, env = "CHECKFU_SERVER", default_value = "http://127.0.0.1:7420", global = true)]
    pub server: String,
    /// An API key (or set CHECKFU_API_KEY, or use --key-file).
    #[arg(long, env = "CHECKFU_API_KEY", hide_env_values = true, global = true)]
    pub key: Option<String>,
    /// A file holding the API key.
    #[arg(long, default_value = ".checkfu/admin.key", global = true)]
    pub key_file: PathBuf,
    /// Print the API's JSON (one object per line) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Print only the id of each resource (for scripts).
    #[arg(long, short = 'q', global = true, conflicts_with = "json")]
    pub quiet: bool,
}

/// The API refused the request: its status and error envelope.
#[derive(Debug)]
pub struct Refusal {
    pub status: u16,
    pub kind: String,
    pub message: String,
    pub details: Value,
    pub request_id: Option<String>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.kind, self.message)?;
        if let Some(id) = &self.request_id {
            write!(f, " (request {id})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}

/// The command line itself is wrong (an ambiguous name, a missing choice):
/// exit 2, as for a flag clap refuses.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error as an `anyhow` error.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(message.into()))
}

/// The exit code for an error: 2 for usage, 1 for a refusal or anything
/// else that went wrong.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<Usage>().is_some() { 2 } else { 1 }
}

#[derive(Clone)]
pub struct Client {
    pub base: String,
    key: String,
    pub http: reqwest::Client,
}

impl Client {
    pub fn new(a: &ClientArgs) -> anyhow::Result<Client> {
        let key = match &a.key {
            Some(k) => k.clone(),
            None => std::fs::read_to_string(&a.key_file)
                .map_err(|_| usage(format!("no --key given and {} is unreadable (or set CHECKFU_API_KEY)", a.key_file.display())))?
                .trim()
                .to_string(),
        };
        Ok(Client { base: a.server.trim_end_matches('/').to_string(), key, http: reqwest::Client::new() })
    }

    /// A request with this client's credential, sent by the caller (an
    /// event stream, read as it arrives).
    pub fn authed(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        rb.bearer_auth(&self.key)
    }

    /// `path` under the server (`/v1/agents`); a URL already absolute
    /// (made from `base`) is kept as it is.
    pub fn url(&self, path: &str) -> String {
        if path.starts_with("http://") || path.starts_with("https://") { path.to_string() } else { format!("{}{path}", self.base) }
    }

    pub async fn call(&self, rb: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let (status, body, id) = self.send(rb).await?;
        if !status.is_success() {
            return Err(refusal(status, &body, id).into());
        }
        Ok(body)
    }

    /// Like [`Client::call`], but a 404 is `None`.
    pub async fn find(&self, rb: reqwest::RequestBuilder) -> anyhow::Result<Option<Value>> {
        let (status, body, id) = self.send(rb).await?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(refusal(status, &body, id).into());
        }
        Ok(Some(body))
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> anyhow::Result<(reqwest::StatusCode, Value, Option<String>)> {
        let r = self.authed(rb).send().await.with_context(|| format!("the server at {} did not answer", self.base))?;
        let status = r.status();
        let id = r.headers().get("request-id").and_then(|v| v.to_str().ok()).map(str::to_string);
        Ok((status, r.json().await.unwrap_or(Value::Null), id))
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(self.http.get(self.url(path))).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.call(self.http.post(self.url(path)).json(body)).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.call(self.http.delete(self.url(path))).await
    }

    /// A POST that creates, with the `Idempotency-Key` given (a retry of
    /// the same command with the same key answers the first result).
    pub async fn create(&self, path: &str, body: &Value, key: Option<&str>) -> anyhow::Result<Value> {
        let mut rb = self.http.post(self.url(path)).json(body);
        if let Some(k) = key {
            rb = rb.header("Idempotency-Key", k);
        }
        self.call(rb).await
    }

    /// Every item of a collection, page after page, with the filters given.
    pub async fn every(&self, path: &str, filters: &[(&str, Option<String>)]) -> anyhow::Result<Vec<Value>> {
        self.first(path, filters, usize::MAX).await
    }

    /// The first `max` items of a collection, reading no page past them.
    pub async fn first(&self, path: &str, filters: &[(&str, Option<String>)], max: usize) -> anyhow::Result<Vec<Value>> {
        let mut all = vec![];
        let mut page = String::new();
        loop {
            let mut url = reqwest::Url::parse(&self.url(path))?;
            url.query_pairs_mut().append_pair("limit", "100");
            for (name, value) in filters {
                if let Some(v) = value {
                    url.query_pairs_mut().append_pair(name, v);
                }
            }
            if !page.is_empty() {
                url.query_pairs_mut().append_pair("page", &page);
            }
            let got = self.call(self.http.get(url)).await?;
            all.extend(got["data"].as_array().into_iter().flatten().cloned());
            match got["next_page"].as_str() {
                Some(p) if all.len() < max => page = p.to_string(),
                _ => {
                    all.truncate(max);
                    return Ok(all);
                }
            }
        }
    }
}

/// The error envelope of a refused request.
fn refusal(status: reqwest::StatusCode, body: &Value, header_id: Option<String>) -> Refusal {
    let e = &body["error"];
    Refusal {
        status: status.as_u16(),
        kind: e["type"].as_str().unwrap_or("error").to_string(),
        message: e["message"].as_str().unwrap_or("(no message)").to_string(),
        details: e["details"].clone(),
        request_id: body["request_id"].as_str().map(str::to_string).or(header_id),
    }
}

/// Reads a JSON document from a file (`-`: standard input).
pub fn read_json(path: &std::path::Path, what: &str) -> anyhow::Result<Value> {
    let text = if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).with_context(|| format!("reading {what} from standard input"))?;
        s
    } else {
        std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read {what} from {}: {e}", path.display())))?
    };
    serde_json::from_str(&text).map_err(|e| usage(format!("{what} in {} is not JSON: {e}", path.display())))
}
