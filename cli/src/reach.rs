//! `checkfu connections|vaults|tool-sources ...`: reach beyond the
//! sandbox. A credential is read from a file or standard input, never from
//! the command line, where `ps` and shell history would keep it.

use crate::client::{Client, ClientArgs, usage};
use crate::resolve::{self, AGENT, CONNECTION, GROUP, PRINCIPAL, TOOL_SOURCE, VAULT};
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
        environment: Option<String>,
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
        #[arg(long)]
        idempotency_key: Option<String>,
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
    let printer = crate::output::Printer::of(&args);
    let print = |out: &mut dyn Write, v: &Value| printer.line(out, v, line);
    let at = |rest: &str| format!("{}/v1/connections{rest}", c.base);
    let action = match action {
        ConnectionsAction::Get { id } => ConnectionsAction::Get { id: resolve::id(&c, CONNECTION, &id, None).await? },
        ConnectionsAction::SetCredential { id, file } => {
            ConnectionsAction::SetCredential { id: resolve::id(&c, CONNECTION, &id, None).await?, file }
        }
        ConnectionsAction::DeleteCredential { id } => {
            ConnectionsAction::DeleteCredential { id: resolve::id(&c, CONNECTION, &id, None).await? }
        }
        ConnectionsAction::Update { id, disabled, name, expected_version } => {
            ConnectionsAction::Update { id: resolve::id(&c, CONNECTION, &id, None).await?, disabled, name, expected_version }
        }
        ConnectionsAction::Revoke { id } => ConnectionsAction::Revoke { id: resolve::id(&c, CONNECTION, &id, None).await? },
        other => other,
    };
    match action {
        ConnectionsAction::List { environment, status } => {
            let filters = [("environment_id", resolve::environment_filter(&c, environment.as_deref()).await?), ("status", status)];
            for v in c.every(&at(""), &filters).await? {
                print(out, &v)?;
            }
            Ok(())
        }
        ConnectionsAction::Get { id } => print(out, &c.call(c.http.get(at(&format!("/{id}")))).await?),
        ConnectionsAction::Create { environment, name, kind, url, credential_file, owner, description, idempotency_key } => {
            let environment = resolve::environment(&c, environment.as_deref()).await?;
            let mut body = json!({"environment_id": environment, "name": name, "kind": kind, "endpoint": {"url": url}});
            if let Some(f) = &credential_file {
                body["credential"] = read_credential(f)?;
            }
            if let Some(p) = owner {
                body["owner"] = json!({"kind": "principal", "id": resolve::id(&c, PRINCIPAL, &p, None).await?});
            }
            if let Some(d) = description {
                body["description"] = json!(d);
            }
            print(out, &c.create("/v1/connections", &body, idempotency_key.as_deref()).await?)
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
    let printer = crate::output::Printer::of(&args);
    let print = |out: &mut dyn Write, v: &Value| printer.line(out, v, source_line);
    let at = |rest: &str| format!("{}/v1/tool-sources{rest}", c.base);
    let action = match action {
        ToolSourcesAction::Get { id } => ToolSourcesAction::Get { id: resolve::id(&c, TOOL_SOURCE, &id, None).await? },
        ToolSourcesAction::Sync { id } => ToolSourcesAction::Sync { id: resolve::id(&c, TOOL_SOURCE, &id, None).await? },
        ToolSourcesAction::SetTool { id, tool, enabled } => {
            ToolSourcesAction::SetTool { id: resolve::id(&c, TOOL_SOURCE, &id, None).await?, tool, enabled }
        }
        other => other,
    };
    match action {
        ToolSourcesAction::List { environment } => {
            let environment = resolve::environment_filter(&c, environment.as_deref()).await?;
            for v in c.every(&at(""), &[("environment_id", environment)]).await? {
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
pub enum VaultsAction {
    /// ConnectionVaults, by Environment.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one vault: its Connections and grantees.
    Get { vault: String },
    /// Create a vault: these Connections, granted to these grantees.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        environment: Option<String>,
        /// A Connection (repeat).
        #[arg(long = "connection")]
        connections: Vec<String>,
        /// `principal:NAME`, `group:NAME` or `agent:NAME` (repeat).
        #[arg(long = "grantee")]
        grantees: Vec<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Replace a vault's Connections and/or grantees.
    Update {
        vault: String,
        #[arg(long = "connection")]
        connections: Vec<String>,
        #[arg(long = "grantee")]
        grantees: Vec<String>,
        #[arg(long)]
        expected_version: Option<i64>,
    },
    /// Archive a vault: the record stays, its grants go.
    Archive { vault: String },
    /// Delete a vault (its grants go first).
    Delete { vault: String },
}

fn vault_line(v: &Value) -> String {
    format!(
        "{}  {:<8} {}  {} connection(s)  {} grantee(s)  v{}",
        v["id"].as_str().unwrap_or_default(),
        v["status"].as_str().unwrap_or_default(),
        v["name"].as_str().unwrap_or_default(),
        v["connection_ids"].as_array().map_or(0, Vec::len),
        v["grantees"].as_array().map_or(0, Vec::len),
        v["version"],
    )
}

async fn connection_ids(c: &Client, names: &[String], env: &str) -> anyhow::Result<Vec<String>> {
    let mut out = vec![];
    for n in names {
        out.push(resolve::id(c, CONNECTION, n, Some(env)).await?);
    }
    Ok(out)
}

async fn grantee_refs(c: &Client, specs: &[String]) -> anyhow::Result<Vec<Value>> {
    let mut out = vec![];
    for spec in specs {
        let (kind, name) = spec
            .split_once(':')
            .ok_or_else(|| usage(format!("--grantee is kind:name (principal:bot, group:ops, agent:helper), not {spec:?}")))?;
        let k = match kind {
            "principal" => PRINCIPAL,
            "group" => GROUP,
            "agent" => AGENT,
            other => return Err(usage(format!("a grantee is a principal, group or agent, not {other:?}"))),
        };
        out.push(json!({"kind": kind, "id": resolve::id(c, k, name, None).await?}));
    }
    Ok(out)
}

pub async fn vaults(args: ClientArgs, action: VaultsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = crate::output::Printer::of(&args);
    match action {
        VaultsAction::List { environment } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/connection-vaults", &[("environment_id", env)]).await?, vault_line)
        }
        VaultsAction::Get { vault } => {
            p.detail(out, &c.get(&format!("/v1/connection-vaults/{}", resolve::id(&c, VAULT, &vault, None).await?)).await?)
        }
        VaultsAction::Create { name, environment, connections, grantees, idempotency_key } => {
            let env = resolve::environment(&c, environment.as_deref()).await?;
            let body = json!({
                "environment_id": env,
                "name": name,
                "connection_ids": connection_ids(&c, &connections, &env).await?,
                "grantees": grantee_refs(&c, &grantees).await?,
            });
            p.line(out, &c.create("/v1/connection-vaults", &body, idempotency_key.as_deref()).await?, vault_line)
        }
        VaultsAction::Update { vault, connections, grantees, expected_version } => {
            let id = resolve::id(&c, VAULT, &vault, None).await?;
            let env = c.get(&format!("/v1/connection-vaults/{id}")).await?["environment_id"].as_str().unwrap_or_default().to_string();
            let mut body = json!({});
            if !connections.is_empty() {
                body["connection_ids"] = json!(connection_ids(&c, &connections, &env).await?);
            }
            if !grantees.is_empty() {
                body["grantees"] = json!(grantee_refs(&c, &grantees).await?);
            }
            if let Some(v) = expected_version {
                body["expected_version"] = json!(v);
            }
            p.line(out, &c.post(&format!("/v1/connection-vaults/{id}"), &body).await?, vault_line)
        }
        VaultsAction::Archive { vault } => {
            let id = resolve::id(&c, VAULT, &vault, None).await?;
            p.line(out, &c.post(&format!("/v1/connection-vaults/{id}/archive"), &json!({})).await?, vault_line)
        }
        VaultsAction::Delete { vault } => {
            let id = resolve::id(&c, VAULT, &vault, None).await?;
            p.line(out, &c.delete(&format!("/v1/connection-vaults/{id}")).await?, |v| format!("deleted {}", vault_line(v)))
        }
    }
}
