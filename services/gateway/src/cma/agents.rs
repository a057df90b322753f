//! CMA agents (api.md §17.5) ↔ native Agents, versions and the
//! ActionPolicy `cma:<agt>` their permission policies compile into; MCP
//! servers (§17.10) ↔ ToolSources over Connections the publisher may use.

use super::cx::{Cx, Native, encode};
use super::facts;
use super::permissions::{Rule, policy};
use super::wire::{self, CmaResult, refuse};
use crate::{AppState, views};
use axum::Json;
use axum::extract::{Path, RawQuery};
use checkfu_core::Error;
use checkfu_proto::sessions::v1::{self as ss, tool_declaration::Kind};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The builtins CMA's `agent_toolset_20260401` names, in its order.
pub const TOOLSET: &[&str] = &["bash", "read", "write", "edit", "glob", "grep", "web_fetch"];
const TOOLSET_TYPE: &str = "agent_toolset_20260401";

/// `POST /v1/agents`: a native Agent, its version 1 and its rules.
pub async fn create(cx: Cx, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let name = body["name"].as_str().ok_or_else(|| Error::invalid_field("name", "name is required"))?;
    let compiled = compile(&cx, &body, None).await?;
    let created: views::Agent =
        cx.native.post("/v1/agents", &json!({"environment_id": cx.env_id, "name": name, "draft": compiled.draft})).await?;
    let id = created.id;
    cx.native.post::<views::AgentVersion>(&format!("/v1/agents/{id}/versions"), &json!({})).await?;
    replace_rules(&cx, &id, &compiled.rules).await?;
    mint_use_agent(&cx, &id).await?;
    mint_use_connection(&cx, &id, &compiled.connections).await?;
    Ok(Json(render_latest(&cx, &id, None).await?))
}

/// `GET /v1/agents/{id}?version=n`.
pub async fn retrieve(cx: Cx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let version = wire::number::<i64>(&q, "version", "version must be an integer")?;
    Ok(Json(render_latest(&cx, &checked(&id)?, version).await?))
}

/// `GET /v1/agents`: the workspace's agents, newest first.
pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 20, 100)?;
    let include_archived = wire::param(&q, "include_archived") == Some("true");
    let created = wire::created_at_filter(&q)?;
    let mut url = format!("/v1/agents?environment_id={}&limit={limit}", cx.env_id);
    if let Some(p) = wire::param(&q, "page") {
        url.push_str(&format!("&page={}", encode(p)));
    }
    let r: views::Page<views::Agent> = cx.native.get(&url).await?;
    let mut data = vec![];
    for a in r.data {
        if a.latest_version.is_none() || (a.archived && !include_archived) || !created(&json!(a.created_at)) {
            continue;
        }
        data.push(render(&cx.state, &a, &version_of(&cx.native, &a.id, None, &a).await?).await?);
    }
    Ok(Json(wire::page(data, r.next_page)))
}

/// `GET /v1/agents/{id}/versions`: newest first.
pub async fn versions(cx: Cx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 20, 100)?;
    let agent: views::Agent = cx.native.get(&format!("/v1/agents/{id}")).await?;
    let latest = agent.latest_version.unwrap_or(0);
    let top = wire::number_token::<i64>(&q)?.unwrap_or(latest);
    let mut data = vec![];
    let mut n = top;
    while n >= 1 && data.len() < limit as usize {
        let v = cx.native.get(&format!("/v1/agents/{id}/versions/{n}")).await?;
        data.push(render(&cx.state, &agent, &v).await?);
        n -= 1;
    }
    Ok(Json(wire::page(data, (n >= 1).then(|| n.to_string()))))
}

/// `POST /v1/agents/{id}`: CMA's merge, a new version only if the
/// definition changed; `version` must be the latest (409 else).
pub async fn update(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let agent: views::Agent = cx.native.get(&format!("/v1/agents/{id}")).await?;
    let latest = agent.latest_version.unwrap_or(0);
    let expected =
        body["version"].as_i64().ok_or_else(|| Error::invalid_field("version", "version is required: the version you updated from"))?;
    if expected != latest {
        return Err(Error::conflict(format!("version {expected} is not the latest ({latest}); retrieve the agent and retry"))
            .with_reason("version_mismatch")
            .into());
    }
    let current: views::AgentVersion = cx.native.get(&format!("/v1/agents/{id}/versions/{latest}")).await?;
    let rules_now = current_rules(&cx.state, &cx.env_id, &id).await?;
    let current_view = render_with(&cx.state, &agent, &current, &rules_now).await?;
    // CMA's merge: omitted keeps, arrays replace, metadata is a patch.
    let mut merged = current_view.clone();
    for k in ["name", "description", "system", "model", "tools", "mcp_servers", "skills", "multiagent", "execution_identity"] {
        if let Some(v) = body.get(k) {
            merged[k] = v.clone();
        }
    }
    if let Some(m) = body.get("metadata") {
        merged["metadata"] = wire::patch_metadata(&current_view["metadata"], m)?;
    }
    let compiled = compile(&cx, &merged, Some(&current.definition.0)).await?;
    let name_changed = merged["name"] != json!(agent.name);
    let rules_changed = compiled.rules != rules_now;
    if compiled.draft == current.definition.0.to_json() && !name_changed && !rules_changed {
        return Ok(Json(current_view));
    }
    let mut change = json!({"draft": compiled.draft, "expected_version": agent.version});
    if name_changed {
        change["name"] = merged["name"].clone();
    }
    cx.native.post::<views::Agent>(&format!("/v1/agents/{id}"), &change).await?;
    cx.native.post::<views::AgentVersion>(&format!("/v1/agents/{id}/versions"), &json!({})).await?;
    replace_rules(&cx, &id, &compiled.rules).await?;
    mint_use_agent(&cx, &id).await?;
    mint_use_connection(&cx, &id, &compiled.connections).await?;
    super::deployments::advance_deployments(&cx, &id).await?;
    Ok(Json(render_latest(&cx, &id, None).await?))
}

/// `POST /v1/agents/{id}/archive`.
pub async fn archive(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    cx.native.post::<views::Agent>(&format!("/v1/agents/{id}/archive"), &json!({})).await?;
    Ok(Json(render_latest(&cx, &id, None).await?))
}

/// An id of the kind a path names: anything else is not found (§17.1).
pub fn checked(id: &str) -> CmaResult<String> {
    super::wire::path_id::<checkfu_core::id::AgentId>("agent", id)
}

/// A CMA agent body compiled: the native draft, its policy's rules and
/// the Connections its MCP servers resolved to.
struct Compiled {
    draft: Value,
    rules: Vec<Rule>,
    connections: Vec<String>,
}

/// Compiles a CMA agent body into a native draft. `previous` is the
/// current definition on update (its route is kept when the model is).
async fn compile(cx: &Cx, body: &Value, previous: Option<&ss::AgentDefinition>) -> CmaResult<Compiled> {
    let (route, label) = resolve_model(&cx.native, &cx.env_id, &body["model"], previous).await?;
    if let Some(e) = body.get("execution_identity").filter(|e| !e.is_null())
        && e["type"] != "service_account"
    {
        return Err(refuse(
            "execution_identity_unsupported",
            "execution_identity: only service_account is served (the Session's Principal acts)",
        ));
    }
    let skills = skill_refs(&body["skills"])?;
    let multiagent = roster(&body["multiagent"])?;
    let (mut tools, mut rules, toolsets) = compile_tools(&body["tools"])?;
    let servers = super::mcp::declared(&body["mcp_servers"])?;
    let mut connections = vec![];
    for (server, toolset) in super::mcp::pair(&servers, &toolsets)? {
        let source = super::mcp::resolve(cx, &server.name, &server.url).await?;
        let (decl, toolset_rules) = super::mcp::declaration(&source, toolset)?;
        if let Some(d) = decl {
            tools.push(d);
        }
        rules.extend(toolset_rules);
        connections.push(source.connection_id);
    }
    let allowed_tools = declared_tool_names(&tools);
    let allowed_skills: Vec<&str> = skills.iter().filter_map(|r| r["skill_id"].as_str()).collect();
    let mut draft = json!({
        "instructions": body["system"].as_str().unwrap_or_default(),
        "model": {"routing_profile_id": route, "label": label},
        "tools": tools,
        // Sessions may narrow to any declared tool or skill (api.md §17.5).
        "session_variable": {"tools": {"allowed": allowed_tools}, "skills": {"allowed": allowed_skills}},
        "skills": skills,
    });
    if let Some(d) = body["description"].as_str() {
        draft["description"] = json!(d);
    }
    if let Some(m) = multiagent {
        draft["multiagent"] = m;
    }
    let metadata = wire::metadata(&body["metadata"])?;
    if metadata.as_object().is_some_and(|m| !m.is_empty()) {
        draft["metadata"] = metadata;
    }
    Ok(Compiled { draft, rules, connections })
}

/// The tool names native declarations offer: a builtin's or custom
/// tool's `name`, a ToolSource declaration's `tools`.
pub fn declared_tool_names(decls: &[Value]) -> Vec<String> {
    decls
        .iter()
        .flat_map(|t| match t["tools"].as_array() {
            Some(names) => names.iter().filter_map(|n| n.as_str().map(String::from)).collect(),
            None => t["name"].as_str().map(String::from).into_iter().collect::<Vec<_>>(),
        })
        .collect()
}

/// The tool names a CMA `tools` list declares; an `mcp_toolset` names the
/// tools of its server in `mcp` (server name → its declared tools).
pub fn tool_names(tools: &Value, mcp: &[super::mcp::Server]) -> CmaResult<Vec<String>> {
    let (decls, _, toolsets) = compile_tools(tools)?;
    let mut names: Vec<String> = decls.iter().filter_map(|d| d["name"].as_str().map(String::from)).collect();
    for t in toolsets {
        let server = t["mcp_server_name"].as_str().unwrap_or_default();
        let s = mcp.iter().find(|s| s.name == server).ok_or_else(|| {
            Error::invalid_field("tools", format!("mcp_toolset names server {server:?}, which the agent does not declare"))
        })?;
        names.extend(super::mcp::selected(&s.tools, &t)?.into_iter().map(|(n, _)| n));
    }
    Ok(names)
}

/// The publisher mints the agent's `use_connection` row on each Connection
/// its MCP servers resolved to (api.md §17.10); a row that exists is kept.
async fn mint_use_connection(cx: &Cx, agent: &str, connections: &[String]) -> CmaResult<()> {
    for c in connections {
        cx.native.grant(json!({"kind": "agent_definition", "id": agent}), "use_connection", json!({"kind": "connection", "id": c})).await?;
    }
    Ok(())
}

/// The skill ids a CMA `skills` list names.
pub fn skill_ids(skills: &Value) -> CmaResult<Vec<String>> {
    Ok(skill_refs(skills)?.iter().filter_map(|r| r["skill_id"].as_str().map(String::from)).collect())
}

/// CMA agent `skills` → native references: `custom` skills of the
/// workspace (`version` omitted: the latest at publication); Anthropic's
/// own skills are not here.
fn skill_refs(v: &Value) -> CmaResult<Vec<Value>> {
    let mut out = vec![];
    for (i, s) in v.as_array().into_iter().flatten().enumerate() {
        match s["type"].as_str() {
            Some("custom") => {
                let mut r = json!({"skill_id": s["skill_id"]});
                match &s["version"] {
                    Value::Null => {}
                    Value::String(v) => {
                        r["version"] =
                            json!(v.parse::<i64>().map_err(|_| Error::invalid_field(&format!("skills[{i}].version"), "a version number"))?)
                    }
                    v => r["version"] = v.clone(),
                }
                out.push(r);
            }
            Some("anthropic") => {
                return Err(refuse(
                    "skill_unavailable",
                    "Anthropic's skills are not available here: upload the skill and name it as custom",
                ));
            }
            other => return Err(Error::invalid_field(&format!("skills[{i}].type"), format!("unknown skill type {other:?}")).into()),
        }
    }
    Ok(out)
}

/// CMA `multiagent` → the §15.1 roster: `coordinator` only (advisors and
/// `multiagent_20261001` are refused); an `{type:"agent", id}` without a
/// version is the member's latest at publication.
fn roster(m: &Value) -> CmaResult<Option<Value>> {
    if m.is_null() {
        return Ok(None);
    }
    if m["type"] != "coordinator" {
        return Err(refuse(
            "multiagent_unsupported",
            "multiagent is {type:\"coordinator\", agents}: advisors and multiagent_20261001 are not served",
        ));
    }
    let mut agents = vec![];
    for a in m["agents"].as_array().into_iter().flatten() {
        agents.push(match a {
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("agent") && o.get("version").is_none_or(Value::is_null) => {
                o.get("id").cloned().unwrap_or_default()
            }
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("advisor") => {
                return Err(refuse("multiagent_unsupported", "advisors are not served"));
            }
            other => other.clone(),
        });
    }
    Ok(Some(json!({"type": "coordinator", "agents": agents})))
}

/// The publisher mints the coordinator's `use_agent` rows on its roster's
/// members (api.md §17.5); a row that exists already is kept.
async fn mint_use_agent(cx: &Cx, coordinator: &str) -> CmaResult<()> {
    let agent: views::Agent = cx.native.get(&format!("/v1/agents/{coordinator}")).await?;
    let Some(latest) = agent.latest_version else { return Ok(()) };
    let v: views::AgentVersion = cx.native.get(&format!("/v1/agents/{coordinator}/versions/{latest}")).await?;
    for member in v.definition.0.multiagent.map(|m| m.resolved_agents).unwrap_or_default() {
        let id = member.agent_id;
        cx.native.grant(json!({"kind": "agent_definition", "id": coordinator}), "use_agent", json!({"kind": "agent", "id": id})).await?;
    }
    Ok(())
}

/// CMA tools → native declarations and per-tool dispositions, and the
/// `mcp_toolset`s left for [`super::mcp`] to resolve. Omitted permission
/// policies are `auto`: Checkfu's defaults decide (read-only tools run;
/// `write`, `edit`, `bash` and MCP ask) — not CMA's `always_allow`.
fn compile_tools(tools: &Value) -> CmaResult<(Vec<Value>, Vec<Rule>, Vec<Value>)> {
    let mut decls = vec![];
    let mut rules = vec![];
    let mut toolsets = vec![];
    let list = match tools {
        Value::Null => vec![],
        Value::Array(a) => a.clone(),
        _ => return Err(Error::invalid_field("tools", "tools must be an array").into()),
    };
    for (i, t) in list.iter().enumerate() {
        match t["type"].as_str().unwrap_or_default() {
            TOOLSET_TYPE => {
                let default_on = t["default_config"]["enabled"].as_bool().unwrap_or(true);
                let default_policy = policy(&t["default_config"]["permission_policy"])?;
                let configs = t["configs"].as_array().cloned().unwrap_or_default();
                for c in &configs {
                    let name = c["name"].as_str().or(c["type"].as_str()).unwrap_or_default();
                    if name == "web_search" {
                        if c["enabled"].as_bool() == Some(true) {
                            return Err(refuse(
                                "tool_unsupported",
                                "web_search is not offered: use web_fetch through the egress allowlist",
                            ));
                        }
                        continue;
                    }
                    if !TOOLSET.contains(&name) {
                        return Err(Error::invalid_field(&format!("tools[{i}].configs"), format!("unknown tool {name:?}")).into());
                    }
                    if name == "web_fetch" && c.as_object().is_some_and(|o| o.keys().any(|k| k.contains("domain"))) {
                        return Err(refuse(
                            "tool_unsupported",
                            "web_fetch domain options are not served; the SandboxProfile's allowlist decides",
                        ));
                    }
                }
                for name in TOOLSET {
                    let config = configs.iter().find(|c| c["name"].as_str().or(c["type"].as_str()) == Some(name));
                    let on = config.and_then(|c| c["enabled"].as_bool()).unwrap_or(default_on);
                    if !on {
                        continue;
                    }
                    decls.push(json!({"type": "builtin", "name": name}));
                    let p = match config {
                        Some(c) if !c["permission_policy"].is_null() => policy(&c["permission_policy"])?,
                        _ => default_policy.clone(),
                    };
                    if let Some(d) = p {
                        rules.push((name.to_string(), d));
                    }
                }
            }
            "custom" => {
                let name =
                    t["name"].as_str().ok_or_else(|| Error::invalid_field(&format!("tools[{i}].name"), "a custom tool needs a name"))?;
                decls.push(json!({
                    "type": "custom", "name": name,
                    "description": t["description"].as_str().unwrap_or_default(),
                    "input_schema": t.get("input_schema").cloned().unwrap_or(json!({"type": "object"})),
                    "read_only": false, "destructive": false,
                }));
                // CMA's client decides custom tools: the call is allowed.
                rules.push((name.to_string(), "allow".into()));
            }
            "mcp_toolset" => toolsets.push(t.clone()),
            other => return Err(refuse("tool_unsupported", format!("tool type {other:?} is not served"))),
        }
    }
    Ok((decls, rules, toolsets))
}

/// The routing profile a CMA model names: `cma:<id>`, else `cma:*`, in the
/// workspace; options the route cannot honour are refused.
async fn resolve_model(
    native: &Native,
    env_id: &str,
    model: &Value,
    previous: Option<&ss::AgentDefinition>,
) -> CmaResult<(String, String)> {
    let (id, effort, speed) = match model {
        Value::String(s) => (s.clone(), None, None),
        Value::Object(o) => (
            o.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
            o.get("effort").and_then(Value::as_str).map(String::from),
            o.get("speed").and_then(Value::as_str).map(String::from),
        ),
        Value::Null if previous.is_some() => {
            let p = previous.and_then(|p| p.model.clone()).unwrap_or_default();
            return Ok((p.routing_profile_id.unwrap_or_default(), p.label.unwrap_or_default()));
        }
        _ => return Err(Error::invalid_field("model", "model is required: a model id or {id, effort?, speed?}").into()),
    };
    if id.is_empty() || id.len() > 200 {
        return Err(Error::invalid_field("model", "model id must be 1 to 200 characters").into());
    }
    if model.get("inference_geo").is_some_and(|g| !g.is_null()) || speed.as_deref().is_some_and(|s| s != "standard") {
        return Err(refuse("model_option_unsupported", "speed \"fast\" and inference_geo are not served"));
    }
    let profiles: Vec<views::ModelRoutingProfile> =
        native.all(&format!("/v1/model-routing-profiles?environment_id={env_id}"), 1000).await?;
    let find = |n: &str| profiles.iter().find(|p| p.name == n);
    let route = find(&format!("cma:{id}"))
        .or_else(|| find("cma:*"))
        .ok_or_else(|| refuse("model_not_routable", format!("no routing profile cma:{id} (or cma:*) in this workspace routes {id:?}")))?;
    let route_effort = route.candidates.first().map(|c| c.effort.as_str()).unwrap_or_default();
    if let Some(e) = effort
        && e != route_effort
    {
        return Err(refuse("model_option_unsupported", format!("effort {e:?} is not this route's ({route_effort:?})")));
    }
    Ok((route.id.clone(), id))
}

/// The routing profile a CMA `model` names in the caller's workspace
/// (for a Dream, say), with its options checked as an agent's are.
pub async fn route_for(cx: &Cx, model: &Value) -> CmaResult<String> {
    Ok(resolve_model(&cx.native, &cx.env_id, model, None).await?.0)
}

/// The ActionPolicy holding an agent's compiled rules.
fn policy_name(agent_id: &str) -> String {
    format!("cma:{agent_id}")
}

/// The rules now in force for an agent, as `(tool, disposition)`.
pub async fn current_rules(st: &AppState, env_id: &str, agent_id: &str) -> CmaResult<Vec<Rule>> {
    let Some(p) = facts::policy_named(st, env_id, &policy_name(agent_id)).await? else { return Ok(vec![]) };
    Ok(p.rules
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    (
                        r["resource"]["id_glob"].as_str().unwrap_or_default().to_string(),
                        r["disposition"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Replaces the agent's ActionPolicy whole (api.md §17.5): rules are live,
/// so they govern older versions' Sessions too. No rules: no policy.
async fn replace_rules(cx: &Cx, agent_id: &str, rules: &[Rule]) -> CmaResult<()> {
    let (native, env_id) = (&cx.native, cx.env_id.as_str());
    let rules: Vec<Value> = rules
        .iter()
        .map(|(tool, d)| {
            json!({"subject": {"kind": "agent_definition", "id_glob": agent_id}, "resource": {"kind": "tool", "id_glob": tool},
                "permission_glob": "invoke", "disposition": d})
        })
        .collect();
    match (facts::policy_named(&cx.state, env_id, &policy_name(agent_id)).await?, rules.is_empty()) {
        (None, true) => {}
        (None, false) => {
            native
                .post::<views::ActionPolicy>(
                    "/v1/action-policies",
                    &json!({"environment_id": env_id, "name": policy_name(agent_id), "rules": rules}),
                )
                .await?;
        }
        (Some(p), true) => {
            native.delete(&format!("/v1/action-policies/{}", p.id)).await?;
        }
        (Some(p), false) => {
            let change = json!({"rules": rules, "expected_version": p.version});
            native.post::<views::ActionPolicy>(&format!("/v1/action-policies/{}", p.id), &change).await?;
        }
    }
    Ok(())
}

/// A native version (`None`: the latest) of an agent already read.
async fn version_of(native: &Native, id: &str, version: Option<i64>, agent: &views::Agent) -> CmaResult<views::AgentVersion> {
    let n = version.or(agent.latest_version).ok_or_else(|| Error::not_found("agent version", id))?;
    native.get(&format!("/v1/agents/{id}/versions/{n}")).await
}

async fn render_latest(cx: &Cx, id: &str, version: Option<i64>) -> CmaResult<Value> {
    let agent: views::Agent = cx.native.get(&format!("/v1/agents/{id}")).await?;
    let v = version_of(&cx.native, id, version, &agent).await?;
    render(&cx.state, &agent, &v).await
}

/// A native Agent and one of its versions, as a CMA agent.
pub async fn render(st: &AppState, agent: &views::Agent, version: &views::AgentVersion) -> CmaResult<Value> {
    // Independent reads, at once.
    let (rules, shown) = tokio::try_join!(current_rules(st, &agent.environment_id, &agent.id), shown(st, version))?;
    Ok(finish(agent, version, &rules, shown))
}

/// [`render`] with the agent's rules already read.
async fn render_with(st: &AppState, agent: &views::Agent, version: &views::AgentVersion, rules: &[Rule]) -> CmaResult<Value> {
    Ok(finish(agent, version, rules, shown(st, version).await?))
}

/// What a version's view reads besides its rules: its route's effort and
/// its MCP servers.
async fn shown(st: &AppState, version: &views::AgentVersion) -> CmaResult<(Option<String>, Vec<super::mcp::Server>)> {
    let def = &version.definition.0;
    let effort = async {
        match def.model.as_ref().and_then(|m| m.routing_profile_id.as_deref()) {
            Some(r) => facts::route(st, r).await.ok().and_then(|p| p.candidates.first().map(|c| c.effort.clone())),
            None => None,
        }
    };
    let (effort, servers) = tokio::join!(effort, super::mcp::servers_of(st, def));
    Ok((effort, servers?))
}

fn finish(
    agent: &views::Agent,
    version: &views::AgentVersion,
    rules: &[Rule],
    (effort, servers): (Option<String>, Vec<super::mcp::Server>),
) -> Value {
    let def = &version.definition.0;
    let id = agent.id.as_str();
    let mut v = snapshot(def, rules, effort, &servers);
    v["id"] = json!(id);
    v["version"] = json!(version.version);
    v["name"] = json!(agent.name);
    v["created_at"] = json!(agent.created_at);
    v["updated_at"] = json!(version.published_at);
    v["archived_at"] = if agent.archived { json!(agent.updated_at) } else { Value::Null };
    v
}

/// The CMA view of a definition (a Session's pinned `agent` too); its
/// ToolSource declarations read back as `servers` name them.
pub fn snapshot(def: &ss::AgentDefinition, rules: &[Rule], effort: Option<String>, servers: &[super::mcp::Server]) -> Value {
    let rule_of = |n: &str| rules.iter().find(|(t, _)| t == n).map(|(_, d)| d.as_str());
    let show = |d: Option<&str>| match d {
        Some("allow") => json!({"type": "always_allow"}),
        Some("require_approval") => json!({"type": "always_ask"}),
        _ => json!({"type": "auto"}),
    };
    let builtins: Vec<&str> = def
        .tools
        .iter()
        .filter_map(|t| match &t.kind {
            Some(Kind::Builtin(b)) => Some(b.name.as_str()),
            _ => None,
        })
        .collect();
    let mut tools = vec![];
    if !builtins.is_empty() {
        let mut configs: Vec<Value> = TOOLSET
            .iter()
            .map(|n| json!({"name": n, "type": n, "enabled": builtins.contains(n), "permission_policy": show(rule_of(n))}))
            .collect();
        configs.push(json!({"name": "web_search", "type": "web_search", "enabled": false, "permission_policy": show(None)}));
        tools
            .push(json!({"type": TOOLSET_TYPE, "default_config": {"enabled": false, "permission_policy": show(None)}, "configs": configs}));
    }
    for t in &def.tools {
        if let Some(Kind::Custom(c)) = &t.kind {
            tools.push(json!({"type": "custom", "name": c.name, "description": c.description, "input_schema": c.input_schema()}));
        }
    }
    for s in servers {
        let configs: Vec<Value> =
            s.tools.iter().map(|n| json!({"name": n, "enabled": true, "permission_policy": show(rule_of(n))})).collect();
        tools.push(json!({"type": "mcp_toolset", "mcp_server_name": s.name,
            "default_config": {"enabled": false, "permission_policy": show(None)}, "configs": configs}));
    }
    let skills: Vec<Value> = def.skills.iter().map(|r| json!({"type": "custom", "skill_id": r.skill_id, "version": r.version})).collect();
    let metadata: BTreeMap<&String, &String> = def.metadata.iter().collect();
    json!({
        "type": "agent",
        "description": def.description,
        "system": Some(&def.instructions).filter(|s| !s.is_empty()),
        "model": {"id": def.model.as_ref().and_then(|m| m.label.as_ref()), "speed": "standard", "effort": effort},
        "tools": tools,
        "mcp_servers": servers.iter().map(|s| json!({"type": "url", "name": s.name, "url": s.url})).collect::<Vec<_>>(),
        "skills": skills,
        "multiagent": def.multiagent.as_ref().map(|m| json!({"type": "coordinator", "agents": m.agents_json()})),
        "metadata": metadata,
        "execution_identity": {"type": "service_account"},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_proto::agent_definition::read;

    #[test]
    fn the_toolset_compiles_to_builtins_and_rules() {
        let tools = json!([{"type": "agent_toolset_20260401",
            "default_config": {"permission_policy": {"type": "always_allow"}},
            "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}, {"name": "web_fetch", "enabled": false},
                        {"name": "web_search", "enabled": false}]}]);
        let (decls, rules, _) = compile_tools(&tools).expect("compiles");
        let names: Vec<&str> = decls.iter().filter_map(|d| d["name"].as_str()).collect();
        assert_eq!(names, ["bash", "read", "write", "edit", "glob", "grep"]);
        assert!(rules.contains(&("bash".into(), "require_approval".into())));
        assert!(rules.contains(&("read".into(), "allow".into())));
        assert_eq!(rules.len(), 6);
    }

    #[test]
    fn omitted_policies_leave_checkfu_defaults() {
        let (decls, rules, _) = compile_tools(&json!([{"type": "agent_toolset_20260401"}])).expect("compiles");
        assert_eq!(decls.len(), 7);
        assert!(rules.is_empty(), "auto writes no rule: read-only tools run, write/edit/bash ask");
    }

    #[test]
    fn unsupported_tools_are_refused_not_dropped() {
        let web_search = json!([{"type": "agent_toolset_20260401", "configs": [{"name": "web_search", "enabled": true}]}]);
        assert_eq!(compile_tools(&web_search).map(|_| ()).expect_err("refused").0.details["reason"], "tool_unsupported");
        let custom = json!([{"type": "custom", "name": "lookup", "description": "d", "input_schema": {"type": "object"}}]);
        let (decls, rules, _) = compile_tools(&custom).expect("custom");
        assert_eq!((decls[0]["type"].as_str(), rules[0].1.as_str()), (Some("custom"), "allow"));
    }

    #[test]
    fn an_mcp_toolset_names_its_servers_declared_tools() {
        let servers =
            [super::super::mcp::Server { name: "fx".into(), url: "http://m/mcp".into(), tools: vec!["add".into(), "leak".into()] }];
        let narrowed = json!([{"type": "agent_toolset_20260401", "default_config": {"enabled": false}, "configs": [{"name": "read", "enabled": true}]},
            {"type": "mcp_toolset", "mcp_server_name": "fx", "default_config": {"enabled": false}, "configs": [{"name": "add", "enabled": true}]}]);
        assert_eq!(tool_names(&narrowed, &servers).expect("names"), ["read", "add"]);
        let unknown = json!([{"type": "mcp_toolset", "mcp_server_name": "other"}]);
        assert!(tool_names(&unknown, &servers).is_err(), "a server the agent does not declare");
        let def = read(json!({"model": {"label": "m"}, "tools": [{"type": "tool_source", "tool_source_id": "tsrc_1", "tools": ["add"]}]}))
            .expect("definition");
        let v = snapshot(&def, &[("add".into(), "allow".into())], None, &servers);
        assert_eq!(v["mcp_servers"], json!([{"type": "url", "name": "fx", "url": "http://m/mcp"}]));
        let toolset = v["tools"].as_array().and_then(|t| t.iter().find(|t| t["type"] == "mcp_toolset").cloned()).expect("toolset");
        assert_eq!(toolset["configs"][0]["permission_policy"]["type"], "always_allow");
    }

    #[test]
    fn a_snapshot_reads_back_policies() {
        let def = read(json!({"instructions": "Be brief.", "model": {"label": "claude-sonnet-4-6"},
            "tools": [{"type": "builtin", "name": "bash"}]}))
        .expect("definition");
        let v = snapshot(&def, &[("bash".into(), "allow".into())], Some("medium".into()), &[]);
        assert_eq!(v["model"], json!({"id": "claude-sonnet-4-6", "speed": "standard", "effort": "medium"}));
        let bash = v["tools"][0]["configs"].as_array().and_then(|c| c.iter().find(|c| c["name"] == "bash").cloned()).expect("bash");
        assert_eq!(bash["permission_policy"]["type"], "always_allow");
        assert_eq!(v["system"], "Be brief.");
    }
}
