//! CMA MCP servers (api.md §17.10) ↔ ToolSources (§16.4). Each
//! `mcp_servers {name, url}` with its `mcp_toolset` resolves to the
//! workspace's active ToolSource `name` over a Connection at `url` the
//! publisher may use; with none, and exactly one such active Connection (a
//! vault credential, say), the projection creates ToolSource `name` over
//! it. Publication then pins that Connection, as any native declaration.

use super::cx::Cx;
use super::permissions::{Rule, policy};
use super::wire::{CmaResult, refuse};
use crate::AppState;
use crate::reach_wire::{Connection, ToolSource};
use checkfu_core::{Code, Error};
use checkfu_proto::capability::v1 as cap;
use checkfu_proto::sessions::v1::{self as ss, tool_declaration::Kind};
use serde_json::{Value, json};

/// MCP servers one agent may declare.
const MAX_SERVERS: usize = 20;

/// A declared server: `{type:"url", name, url}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub name: String,
    pub url: String,
}

/// A ToolSource a server resolved to.
#[derive(Debug, Clone)]
pub struct Source {
    pub id: String,
    pub connection_id: String,
    /// Its tools offered now, in its order.
    pub offered: Vec<String>,
}

/// A published ToolSource declaration as CMA reads it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub name: String,
    pub url: String,
    /// The tools the version declares from it.
    pub tools: Vec<String>,
}

/// An agent's `mcp_servers`, checked: names unique, URLs present.
pub fn declared(v: &Value) -> CmaResult<Vec<Declared>> {
    let list = match v {
        Value::Null => return Ok(vec![]),
        Value::Array(a) if a.len() <= MAX_SERVERS => a,
        Value::Array(_) => return Err(Error::invalid_field("mcp_servers", format!("at most {MAX_SERVERS} MCP servers")).into()),
        _ => return Err(Error::invalid_field("mcp_servers", "mcp_servers must be an array").into()),
    };
    let mut out: Vec<Declared> = vec![];
    for (i, s) in list.iter().enumerate() {
        if !matches!(s["type"].as_str(), None | Some("url")) {
            return Err(Error::invalid_field(&format!("mcp_servers[{i}].type"), "an MCP server is {type:\"url\", name, url}").into());
        }
        let text = |f: &str| {
            s[f].as_str()
                .filter(|t| !t.is_empty() && t.len() <= 2048)
                .map(String::from)
                .ok_or_else(|| Error::invalid_field(&format!("mcp_servers[{i}].{f}"), format!("{f} is required")))
        };
        let d = Declared { name: text("name")?, url: text("url")? };
        if out.iter().any(|o| o.name == d.name) {
            return Err(
                Error::invalid_field(&format!("mcp_servers[{i}].name"), format!("MCP server {:?} is declared twice", d.name)).into()
            );
        }
        out.push(d);
    }
    Ok(out)
}

/// Each server with its `mcp_toolset` (if any); a toolset naming no
/// declared server, or a second toolset for one, is refused.
pub fn pair<'a>(servers: &'a [Declared], toolsets: &'a [Value]) -> CmaResult<Vec<(&'a Declared, Option<&'a Value>)>> {
    for (i, t) in toolsets.iter().enumerate() {
        let name = t["mcp_server_name"].as_str().unwrap_or_default();
        if !servers.iter().any(|s| s.name == name) {
            return Err(Error::invalid_field(
                "tools",
                format!("mcp_toolset {i} names server {name:?}, which mcp_servers does not declare"),
            )
            .into());
        }
        if toolsets[..i].iter().any(|o| o["mcp_server_name"] == name) {
            return Err(Error::invalid_field("tools", format!("server {name:?} has two mcp_toolsets")).into());
        }
    }
    Ok(servers.iter().map(|s| (s, toolsets.iter().find(|t| t["mcp_server_name"] == s.name.as_str()))).collect())
}

/// The active ToolSource `name` over a Connection at `url` the caller may
/// use, created over the one such Connection when there is none.
pub async fn resolve(cx: &Cx, name: &str, url: &str) -> CmaResult<Source> {
    let env = &cx.env_id;
    let sources: Vec<ToolSource> = cx.native.all(&format!("/v1/tool-sources?environment_id={env}"), 1000).await?;
    if let Some(ts) = sources.iter().find(|t| t.name == name && t.status == "active") {
        let cid = &ts.connection_id;
        let fits = match cx.native.get(&format!("/v1/connections/{cid}")).await {
            Ok(c) => usable(cx, &c, url).await?,
            Err(e) if matches!(e.0.code, Code::NotFound | Code::PermissionDenied) => false,
            Err(e) => return Err(e),
        };
        if !fits {
            return Err(refuse(
                "mcp_server_unresolved",
                format!("ToolSource {name:?} reaches another URL than {url:?}, or over a Connection you may not use"),
            ));
        }
        return Ok(source(ts));
    }
    let mut found = vec![];
    for c in cx.native.all::<Connection>(&format!("/v1/connections?environment_id={env}&kind=mcp&status=active"), 1000).await? {
        if usable(cx, &c, url).await? {
            found.push(c);
        }
    }
    let c = match found.as_slice() {
        [one] => one,
        [] => {
            return Err(refuse(
                "mcp_server_unresolved",
                format!("no ToolSource {name:?} and no active Connection at {url:?} you may use: add a vault credential for it"),
            ));
        }
        many => {
            return Err(refuse(
                "mcp_server_ambiguous",
                format!("{} active Connections at {url:?} could serve {name:?}: create ToolSource {name:?} natively over one", many.len()),
            ));
        }
    };
    let create = json!({"environment_id": env, "name": name, "connection_id": c.id, "default_config": {"enabled": true}});
    Ok(source(&cx.native.post("/v1/tool-sources", &create).await?))
}

/// An active Connection at `url` on which the caller holds `use_connection`.
async fn usable(cx: &Cx, c: &Connection, url: &str) -> CmaResult<bool> {
    if c.status != "active" || !same_url(&c.endpoint.url, url) {
        return Ok(false);
    }
    Ok(cx.state.allowed(&cx.caller.principal_id, "use_connection", "connection", &c.id, &c.environment_id).await?)
}

/// URLs match up to a trailing slash.
pub fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

fn source(ts: &ToolSource) -> Source {
    let offered = ts.tools.iter().filter(|t| t.offered).map(|t| t.name.clone()).collect();
    Source { id: ts.id.clone(), connection_id: ts.connection_id.clone(), offered }
}

/// The tools a toolset selects from `tools`, with each one's disposition:
/// `default_config.enabled` (default true) and per-tool `configs`.
pub fn selected(tools: &[String], toolset: &Value) -> CmaResult<Vec<(String, Option<String>)>> {
    let server = toolset["mcp_server_name"].as_str().unwrap_or_default();
    let default_on = toolset["default_config"]["enabled"].as_bool().unwrap_or(true);
    let default_policy = policy(&toolset["default_config"]["permission_policy"])?;
    let configs = toolset["configs"].as_array().cloned().unwrap_or_default();
    for c in &configs {
        let name = c["name"].as_str().unwrap_or_default();
        if !tools.iter().any(|t| t == name) {
            return Err(refuse("tool_not_offered", format!("MCP server {server:?} offers no tool {name:?}")));
        }
    }
    let mut out = vec![];
    for t in tools {
        let config = configs.iter().find(|c| c["name"] == t.as_str());
        if !config.and_then(|c| c["enabled"].as_bool()).unwrap_or(default_on) {
            continue;
        }
        let p = match config {
            Some(c) if !c["permission_policy"].is_null() => policy(&c["permission_policy"])?,
            _ => default_policy.clone(),
        };
        out.push((t.clone(), p));
    }
    Ok(out)
}

/// The native declaration of a resolved server's toolset (none without a
/// toolset, or when it selects nothing) and its tools' rules.
pub fn declaration(source: &Source, toolset: Option<&Value>) -> CmaResult<(Option<Value>, Vec<Rule>)> {
    let Some(t) = toolset else { return Ok((None, vec![])) };
    let chosen = selected(&source.offered, t)?;
    if chosen.is_empty() {
        return Ok((None, vec![]));
    }
    let names: Vec<&str> = chosen.iter().map(|(n, _)| n.as_str()).collect();
    let rules = chosen.iter().filter_map(|(n, d)| d.clone().map(|d| (n.clone(), d))).collect();
    Ok((Some(json!({"type": "tool_source", "tool_source_id": source.id, "tools": names})), rules))
}

/// The servers a published definition declares: each ToolSource
/// declaration with its name and its pinned Connection's URL.
pub async fn servers_of(st: &AppState, def: &ss::AgentDefinition) -> CmaResult<Vec<Server>> {
    let mut out = vec![];
    for t in &def.tools {
        let Some(Kind::ToolSource(d)) = &t.kind else { continue };
        let ts = st.tool_sources.clone().get_tool_source(cap::GetToolSourceRequest { id: d.tool_source_id.clone() }).await?.into_inner();
        let cid = d.connection_id.as_deref().filter(|c| !c.is_empty()).unwrap_or(&ts.connection_id).to_string();
        let c = st.connections.clone().get_connection(cap::GetConnectionRequest { id: cid }).await?.into_inner();
        out.push(Server { name: ts.name, url: c.url, tools: d.tools.clone() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_checked_and_paired_with_their_toolsets() {
        let servers = declared(&json!([{"type": "url", "name": "fx", "url": "http://m/mcp"}])).expect("one");
        assert_eq!(servers, [Declared { name: "fx".into(), url: "http://m/mcp".into() }]);
        assert!(declared(&json!([{"name": "fx", "url": "u"}, {"name": "fx", "url": "v"}])).is_err(), "names are unique");
        assert!(declared(&json!([{"name": "fx"}])).is_err(), "a url is required");
        let toolsets = [json!({"type": "mcp_toolset", "mcp_server_name": "fx"})];
        let paired = pair(&servers, &toolsets).expect("paired");
        assert!(paired[0].1.is_some());
        assert!(pair(&servers, &[json!({"mcp_server_name": "nope"})]).is_err());
        assert!(same_url("http://m/mcp/", "http://m/mcp"));
    }

    #[test]
    fn a_toolset_selects_tools_and_their_policies() {
        let tools = ["add".to_string(), "whoami".to_string()];
        let t = json!({"mcp_server_name": "fx", "default_config": {"permission_policy": {"type": "always_allow"}},
            "configs": [{"name": "whoami", "enabled": false}]});
        assert_eq!(selected(&tools, &t).expect("ok"), [("add".to_string(), Some("allow".to_string()))]);
        let auto = json!({"mcp_server_name": "fx"});
        assert_eq!(selected(&tools, &auto).expect("ok").len(), 2, "default on; auto writes no rule");
        let unknown = json!({"mcp_server_name": "fx", "configs": [{"name": "nope"}]});
        assert_eq!(selected(&tools, &unknown).expect_err("unknown").0.details["reason"], "tool_not_offered");
        let src = Source { id: "tsrc_1".into(), connection_id: "conn_1".into(), offered: tools.to_vec() };
        let (decl, rules) = declaration(&src, Some(&t)).expect("declared");
        assert_eq!(decl, Some(json!({"type": "tool_source", "tool_source_id": "tsrc_1", "tools": ["add"]})));
        assert_eq!(rules, [("add".to_string(), "allow".to_string())]);
        assert_eq!(declaration(&src, None).expect("none").0, None);
    }
}
