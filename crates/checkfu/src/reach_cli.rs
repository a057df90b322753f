//! `checkfu connections ...` (a client of the public API, like any other)
//! and `checkfu credentials rewrap` (run beside the capability gateway's
//! store and key file). A credential is read from a file or standard input,
//! never from the command line, where `ps` and shell history would keep it.

use crate::client::{Client, ClientArgs};
use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::PathBuf;

#[derive(Debug, Clone, Subcommand)]
pub enum ConnectionsAction {
    /// List the Connections you may see.
    List {
        /// Only this Environment's.
        #[arg(long)]
        environment: Option<String>,
        /// active, disabled or revoked.
        #[arg(long)]
        status: Option<String>,
    },
    /// Show one Connection (its credential's read form, never the secret).
    Get { id: String },
    /// Create a Connection.
    Create {
        #[arg(long)]
        environment: String,
        #[arg(long)]
        name: String,
        /// mcp or http.
        #[arg(long, default_value = "mcp")]
        kind: String,
        /// The endpoint (an MCP server's streamable-HTTP URL).
        #[arg(long)]
        url: String,
        /// A JSON credential (`{"type":"static_bearer","token":...}`) in
        /// this file; `-` reads standard input.
        #[arg(long)]
        credential_file: Option<PathBuf>,
        /// A personal Connection of this Principal (your own id; needs only
        /// read on the Environment).
        #[arg(long)]
        owner: Option<String>,
        #[arg(long)]
        description: Option<String>,
    },
    /// Set or rotate a Connection's credential from a JSON file (`-`: stdin).
    SetCredential { id: String, file: PathBuf },
    /// Remove a Connection's credential.
    DeleteCredential { id: String },
    /// Stop (`--disabled true`) or resume (`--disabled false`) every use.
    Update {
        id: String,
        #[arg(long)]
        disabled: Option<bool>,
        #[arg(long)]
        name: Option<String>,
        /// Refuse the change unless the Connection is at this version.
        #[arg(long)]
        expected_version: Option<i64>,
    },
    /// Revoke a Connection: terminal, its credential destroyed at once.
    Revoke { id: String },
}

fn read_credential(path: &PathBuf) -> anyhow::Result<Value> {
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).context("reading the credential from standard input")?;
    } else {
        text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    }
    // Never quote the text: it holds a secret.
    serde_json::from_str(&text).map_err(|_| anyhow::anyhow!("the credential is not a JSON object"))
}

/// Every item of a collection, page after page, with the `filters` given.
pub(crate) async fn every(c: &Client, collection: &str, filters: &[(&str, Option<String>)]) -> anyhow::Result<Vec<Value>> {
    let mut all = vec![];
    let mut page = String::new();
    loop {
        let mut url = reqwest::Url::parse(collection)?;
        url.query_pairs_mut().append_pair("limit", "100");
        for (name, value) in filters {
            if let Some(v) = value {
                url.query_pairs_mut().append_pair(name, v);
            }
        }
        if !page.is_empty() {
            url.query_pairs_mut().append_pair("page", &page);
        }
        let got = c.call(c.http.get(url)).await?;
        all.extend(got["data"].as_array().into_iter().flatten().cloned());
        match got["next_page"].as_str() {
            Some(p) => page = p.to_string(),
            None => return Ok(all),
        }
    }
}

fn line(c: &Value) -> String {
    let cred = match &c["credential"] {
        Value::Null => "no credential".to_string(),
        k => format!("{} credential ({})", k["type"].as_str().unwrap_or_default(), k["state"].as_str().unwrap_or_default()),
    };
    format!(
        "{}  {:<8} {:<4} {}  {}  {}  v{}",
        c["id"].as_str().unwrap_or_default(),
        c["status"].as_str().unwrap_or_default(),
        c["kind"].as_str().unwrap_or_default(),
        c["name"].as_str().unwrap_or_default(),
        c["endpoint"]["url"].as_str().unwrap_or_default(),
        cred,
        c["version"],
    )
}

pub async fn connections(args: ClientArgs, action: ConnectionsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let print = |out: &mut dyn Write, v: &Value| -> anyhow::Result<()> {
        if args.json {
            writeln!(out, "{v}")?
        } else {
            writeln!(out, "{}", line(v))?
        }
        Ok(())
    };
    let at = |rest: &str| format!("{}/v1/connections{rest}", c.base);
    match action {
        ConnectionsAction::List { environment, status } => {
            let filters = [("environment_id", environment), ("status", status)];
            for v in every(&c, &at(""), &filters).await? {
                print(out, &v)?;
            }
            Ok(())
        }
        ConnectionsAction::Get { id } => print(out, &c.call(c.http.get(at(&format!("/{id}")))).await?),
        ConnectionsAction::Create { environment, name, kind, url, credential_file, owner, description } => {
            let mut body = json!({"environment_id": environment, "name": name, "kind": kind, "endpoint": {"url": url}});
            if let Some(f) = &credential_file {
                body["credential"] = read_credential(f)?;
            }
            if let Some(p) = owner {
                body["owner"] = json!({"kind": "principal", "id": p});
            }
            if let Some(d) = description {
                body["description"] = json!(d);
            }
            print(out, &c.call(c.http.post(at("")).json(&body)).await?)
        }
        ConnectionsAction::SetCredential { id, file } => {
            let body = read_credential(&file)?;
            print(out, &c.call(c.http.post(at(&format!("/{id}/credential"))).json(&body)).await?)
        }
        ConnectionsAction::DeleteCredential { id } => print(out, &c.call(c.http.delete(at(&format!("/{id}/credential")))).await?),
        ConnectionsAction::Update { id, disabled, name, expected_version } => {
            let mut body = json!({});
            if let Some(d) = disabled {
                body["disabled"] = json!(d);
            }
            if let Some(n) = name {
                body["name"] = json!(n);
            }
            if let Some(v) = expected_version {
                body["expected_version"] = json!(v);
            }
            print(out, &c.call(c.http.post(at(&format!("/{id}"))).json(&body)).await?)
        }
        ConnectionsAction::Revoke { id } => print(out, &c.call(c.http.post(at(&format!("/{id}/revoke")))).await?),
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum ToolSourcesAction {
    /// List the ToolSources of the Environments you may read.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one ToolSource and its tools.
    Get { id: String },
    /// Run discovery now (`initialize` and `tools/list` through its
    /// Connection); a failure keeps the last good list.
    Sync { id: String },
    /// Enable (`true`), disable (`false`) or reset (`default`) one tool.
    SetTool { id: String, tool: String, enabled: String },
}

fn source_line(t: &Value) -> String {
    let tools = t["tools"].as_array().map(|a| a.iter().filter(|x| x["offered"] == true).count()).unwrap_or(0);
    let error = t["sync_error"]["type"].as_str().map(|e| format!(" ({e})")).unwrap_or_default();
    format!(
        "{}  {:<8} {}  sync {}{}  {} of {} tools offered  v{}",
        t["id"].as_str().unwrap_or_default(),
        t["status"].as_str().unwrap_or_default(),
        t["name"].as_str().unwrap_or_default(),
        t["sync_status"].as_str().unwrap_or("never"),
        error,
        tools,
        t["tools"].as_array().map_or(0, Vec::len),
        t["version"],
    )
}

pub async fn tool_sources(args: ClientArgs, action: ToolSourcesAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let print = |out: &mut dyn Write, v: &Value| -> anyhow::Result<()> {
        if args.json {
            writeln!(out, "{v}")?
        } else {
            writeln!(out, "{}", source_line(v))?
        }
        Ok(())
    };
    let at = |rest: &str| format!("{}/v1/tool-sources{rest}", c.base);
    match action {
        ToolSourcesAction::List { environment } => {
            for v in every(&c, &at(""), &[("environment_id", environment)]).await? {
                print(out, &v)?;
            }
            Ok(())
        }
        ToolSourcesAction::Get { id } => print(out, &c.call(c.http.get(at(&format!("/{id}")))).await?),
        ToolSourcesAction::Sync { id } => {
            let t = c.call(c.http.post(at(&format!("/{id}/sync"))).json(&json!({}))).await?;
            print(out, &t)?;
            if t["sync_status"] == "failed" {
                anyhow::bail!("the sync failed: {}", t["sync_error"]["message"].as_str().unwrap_or("unknown"));
            }
            Ok(())
        }
        ToolSourcesAction::SetTool { id, tool, enabled } => {
            let enabled = match enabled.as_str() {
                "true" => json!(true),
                "false" => json!(false),
                "default" | "null" => Value::Null,
                other => anyhow::bail!("enabled is true, false or default, not {other:?}"),
            };
            print(out, &c.call(c.http.post(at(&format!("/{id}/tools/{tool}"))).json(&json!({"enabled": enabled}))).await?)
        }
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum CredentialsAction {
    /// Wrap every stored credential's data key with the key file's first
    /// key (after a new key was put first and the capability gateway
    /// restarted); idempotent. Then the old line can be dropped.
    Rewrap {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub async fn credentials(config: &crate::config::Loaded, action: CredentialsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let CredentialsAction::Rewrap { json } = action;
    let location = config.config.location();
    let keys = crate::roles::capability_gateway::credential_keys(config.config.credential_key_file.as_deref(), &location, false)?;
    let done = checkfu_capability_gateway::rewrap(&location, &keys).await.map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if json {
        writeln!(
            out,
            "{}",
            json!({"key_id": keys.current(), "rewrapped": done.rewrapped, "current": done.current, "unreadable": done.unreadable})
        )?;
    } else {
        writeln!(
            out,
            "rewrapped {} credential(s) under key {}; {} already under it; {} unreadable (their key is no longer in the key file)",
            done.rewrapped,
            keys.current(),
            done.current,
            done.unreadable
        )?;
    }
    if done.unreadable > 0 {
        anyhow::bail!("{} credential(s) could not be rewrapped: put their key back in the key file and run this again", done.unreadable);
    }
    Ok(())
}
