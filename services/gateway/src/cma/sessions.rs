//! CMA sessions (api.md §17.7) ↔ native Sessions on Deployments keyed
//! `cma:<sbp>:<agt>:v<n>`, created as the caller's Principal.

use super::cx::{Cx, encode, view_of};
use super::deployments::{self, self_hosted};
use super::facts;
use super::mapping;
use super::wire::{self, CmaResult, refuse};
use crate::threads_wire::Outcome;
use crate::{AppState, views};
use axum::Json;
use axum::extract::{Path, RawQuery};
use checkfu_core::{Code, Error};
use checkfu_proto::sessions::v1::{ToolDeclaration, tool_declaration::Kind};
use serde_json::{Value, json};

/// `POST /v1/sessions`.
pub async fn create(cx: Cx, headers: axum::http::HeaderMap, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let sbp = super::environments::checked(body["environment_id"].as_str().unwrap_or_default())
        .map_err(|_| Error::invalid_field("environment_id", "environment_id must name an environment (sbp_…)"))?;
    let (agent_id, version, overrides) = agent_ref(&body["agent"])?;
    // A fact, not a permission: the native create checks `invoke`. What
    // picks the deployment does not depend on the agent: read both at once.
    let (agent, found) = tokio::join!(facts::agent(&cx.state, &agent_id), deployments::lookup(&cx, &sbp));
    let agent = agent.map_err(|e| match e.0.code {
        Code::NotFound => Error::invalid_field("agent", format!("no such agent {agent_id}")).into(),
        _ => e,
    })?;
    if agent.environment_id != cx.env_id {
        return Err(Error::invalid_field("agent", format!("no such agent {agent_id} in this workspace")).into());
    }
    if agent.archived {
        return Err(refuse("agent_archived", "the agent is archived"));
    }
    let version = match version {
        Some(v) => v,
        None => agent.latest_version.ok_or_else(|| refuse("agent_unpublished", "the agent has no published version"))?,
    };
    let resources = resources(&body["resources"])?;
    if !resources.is_empty() && facts::profile(&cx.state, &sbp).await.is_ok_and(|p| self_hosted(&p)) {
        return Err(refuse(
            "self_hosted_resources_unsupported_error",
            "a self_hosted environment's sessions take no resources: files and memory live on the worker's machine",
        ));
    }
    let vault_ids = vaults_for(&cx, &agent_id, version, &body["vault_ids"]).await?;
    let budget = match body.get("budget").filter(|b| !b.is_null()) {
        Some(b) => Some(budget_limit(b)?),
        None => None,
    };
    let deployment = deployments::choose(&cx, &agent_id, version, &sbp, found).await?;
    if budget.is_some() {
        require_priced(&cx, &deployment.id).await?;
    }
    let initial = body["initial_events"].as_array().cloned().unwrap_or_default();
    if initial.len() > 50 {
        return Err(Error::invalid_field("initial_events", "at most 50 initial events").into());
    }
    let mut inputs = vec![];
    for (i, e) in initial.iter().enumerate() {
        match e["type"].as_str() {
            Some("user.message") => {}
            Some("user.define_outcome") if i == 0 => {}
            _ => {
                let why = "initial events are user.message, and user.define_outcome first";
                return Err(Error::invalid_field(&format!("initial_events[{i}].type"), why).into());
            }
        }
        let e = super::events::read_rubric(&cx, e).await?;
        inputs.push(mapping::native_input(&cx.caller.principal_id, &e, &Default::default())?);
    }
    let several = inputs.len() > 1;
    let defines_outcome = initial.iter().any(|e| e["type"] == "user.define_outcome");
    let mut native = json!({
        "agent_deployment_id": deployment.id,
        "principal_id": cx.caller.principal_id,
        "metadata": wire::metadata(&body["metadata"])?,
        "initial_events": inputs,
    });
    if let Some(t) = body["title"].as_str() {
        native["title"] = json!(t);
    }
    if let Some(limit) = budget {
        native["budget"] = json!({"limit": limit, "metric": "model_spend"});
    }
    if !resources.is_empty() {
        native["resources"] = json!(resources);
    }
    if !vault_ids.is_empty() {
        native["connection_vault_ids"] = json!(vault_ids);
    }
    narrow(&cx, &agent_id, version, &overrides, &mut native).await?;
    if let Some(system) = overrides.get("system").and_then(Value::as_str) {
        native["instructions"] = json!(system);
    }
    // A sent Idempotency-Key reaches the native create; several initial
    // events need one natively, so the projection mints one if none came.
    let sent = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(String::from);
    let key = sent.or_else(|| (several).then(|| checkfu_core::id::new_id("cma")));
    let idem: Vec<(&str, String)> = key.map(|k| ("idempotency-key", k)).into_iter().collect();
    // The create, and the agent it pins as CMA shows it, at once: the
    // response is then made of what this request already read, where
    // reading the new Session back would take six more calls.
    let create = async { view_of::<views::Session>(cx.native.call(axum::http::Method::POST, "/v1/sessions", Some(&native), &idem).await?) };
    let (s, pinned) = tokio::try_join!(create, pinned_agent(&cx.state, &agent, version))?;
    // A new Session has Outcomes only when its first event defined one.
    let evaluations = if defines_outcome { evaluations(&cx.state, &s.id).await? } else { vec![] };
    let budget = budget.filter(|_| s.budget_id.as_deref().is_some_and(|b| !b.is_empty()));
    Ok(Json(compose(&s, &deployment, pinned, budget, evaluations)))
}

/// `GET /v1/sessions/{id}`.
pub async fn retrieve(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let s = cx.native.get(&format!("/v1/sessions/{}", super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?)).await?;
    Ok(Json(render(&cx.state, &s).await?))
}

/// `GET /v1/sessions`: newest first, `{data, next_page, prev_page}`.
pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 20, 100)?;
    if wire::param(&q, "deployment_id").is_some() {
        return Err(refuse("unsupported", "deployment_id is not a filter here: CMA deployments are not served"));
    }
    let descending = wire::descending(&q, true)?;
    let cursor = wire::param(&q, "page").map(|p| Cursor::parse(p, descending)).transpose()?;
    let statuses = wire::params(&q, "statuses");
    let agent_filter = wire::param(&q, "agent_id");
    let version_filter = wire::number::<i64>(&q, "agent_version", "agent_version is a version number")?;
    let store_filter = wire::param(&q, "memory_store_id");
    let created = wire::created_at_filter(&q)?;
    let include_archived = wire::param(&q, "include_archived") == Some("true");
    // A page back is the native page the other way from its first id,
    // reversed.
    let back = cursor.as_ref().is_some_and(|c| c.back);
    let ascending = descending == back;
    let mut url = format!("/v1/sessions?environment_id={}&limit={limit}&order={}", cx.env_id, if ascending { "asc" } else { "desc" });
    if let Some(c) = &cursor {
        url.push_str(&format!("&page={}", encode(&checkfu_core::page::encode_token(&c.id))));
    }
    let r: views::Page<views::Session> = cx.native.get(&url).await?;
    let mut rows = r.data;
    if back {
        rows.reverse();
    }
    let (first, last) = (rows.first().map(|s| json!(s.id)), rows.last().map(|s| json!(s.id)));
    let native_more = r.next_page.is_some_and(|p| !p.is_empty());
    let token =
        |back: bool, id: &Option<Value>| id.as_ref().and_then(Value::as_str).map(|id| Cursor { descending, back, id: id.into() }.token());
    // Forward: more when the native page says so; a page back always has
    // its way forward. Back: none on page one; from a page back, while the
    // native page (going back) had more.
    let next_page = if back || native_more { token(false, &last) } else { None };
    let prev_page = match &cursor {
        None => None,
        Some(c) if c.back && !native_more => None,
        Some(_) => token(true, &first),
    };
    let mut data = vec![];
    for s in rows {
        let status = s.status.as_str();
        if (!statuses.is_empty() && !statuses.contains(&status))
            || (status == "terminated" && !include_archived && !statuses.contains(&"terminated"))
        {
            continue;
        }
        if !created(&json!(s.created_at)) {
            continue;
        }
        if store_filter.is_some_and(|m| !s.resources.iter().any(|r| r.memory_store_id == m)) {
            continue;
        }
        let v = render(&cx.state, &s).await?;
        if agent_filter.is_some_and(|a| v["agent"]["id"] != a) || version_filter.is_some_and(|n| v["agent"]["version"] != n) {
            continue;
        }
        data.push(v);
    }
    let mut out = wire::page(data, next_page);
    out["prev_page"] = json!(prev_page);
    Ok(Json(out))
}

/// A native Outcome as CMA's per-outcome evaluation state: `running`
/// while active (being worked on or graded), else how it ended.
fn outcome_evaluation(o: &Outcome) -> Value {
    // The newest evaluation's payload (free JSON, as its event recorded it).
    let last = o.evaluations.last().cloned().unwrap_or(Value::Null);
    let result = match o.status.as_str() {
        "active" => "running",
        other => other,
    };
    json!({
        "type": "outcome_evaluation",
        "outcome_id": o.id,
        "description": o.description,
        "iteration": o.iterations_used,
        "result": result,
        "explanation": last["explanation"],
        "completed_at": o.completed_at,
    })
}

/// CMA's timing statistics: the Session's age (frozen once terminated);
/// time spent running is not tracked, so it is left out (`null`).
fn stats(s: &views::Session, status: &str) -> Value {
    let at = |t: &str| checkfu_core::time::parse_rfc3339(t, 9);
    let end = if status == "terminated" { at(&s.updated_at) } else { Some(checkfu_core::time::now_ms()) };
    let duration = match (at(&s.created_at), end) {
        (Some(a), Some(b)) => json!((b - a).max(0) as f64 / 1000.0),
        _ => Value::Null,
    };
    json!({"duration_seconds": duration, "active_seconds": null})
}

/// A `sessions.list` page token: the order it was given in, whether it
/// goes back (`prev_page`) or on, and the Session id it starts from.
#[derive(Debug, PartialEq)]
struct Cursor {
    descending: bool,
    back: bool,
    id: String,
}

impl Cursor {
    fn token(&self) -> String {
        format!("{}{}.{}", if self.descending { 'd' } else { 'a' }, if self.back { 'p' } else { 'n' }, self.id)
    }

    /// A token this list gave, for the order asked (another order's → 400).
    fn parse(token: &str, descending: bool) -> CmaResult<Cursor> {
        let bad = || Error::invalid_field("page", "page is not a token this list gave for this order");
        let (head, id) = token.split_once('.').ok_or_else(bad)?;
        let c = match head {
            "dn" => Cursor { descending: true, back: false, id: id.into() },
            "dp" => Cursor { descending: true, back: true, id: id.into() },
            "an" => Cursor { descending: false, back: false, id: id.into() },
            "ap" => Cursor { descending: false, back: true, id: id.into() },
            _ => return Err(bad().into()),
        };
        if c.descending != descending || checkfu_core::id::SessionId::check("page", &c.id).is_err() {
            return Err(bad().into());
        }
        Ok(c)
    }
}

/// CMA session resources → native ones: a File at its upload path, a
/// MemoryStore mounted at `/mnt/memory/<id>` (`read_write` unless said).
fn resources(v: &Value) -> CmaResult<Vec<Value>> {
    let mut out = vec![];
    for (i, r) in v.as_array().into_iter().flatten().enumerate() {
        let field = format!("resources[{i}]");
        match r["type"].as_str() {
            Some("file") => {
                let file = r["file_id"].as_str().unwrap_or_default();
                if let Some(m) = r["mount_path"].as_str()
                    && !m.starts_with(&format!("/mnt/session/uploads/{file}/"))
                {
                    return Err(refuse(
                        "mount_path_unsupported",
                        format!("{field}: a File is mounted at /mnt/session/uploads/{file}/<filename>"),
                    ));
                }
                out.push(json!({"type": "file", "file_id": file}));
            }
            Some("memory_store") => {
                if r.get("instructions").is_some_and(|x| !x.is_null()) {
                    return Err(refuse(
                        "memory_instructions_unsupported",
                        format!("{field}: per-session memory instructions are not served"),
                    ));
                }
                let access = r["access"].as_str().unwrap_or("read_write");
                out.push(json!({"type": "memory_store", "memory_store_id": r["memory_store_id"], "access": access}));
            }
            Some("github_repository") => {
                return Err(refuse(
                    "github_repository_unsupported",
                    "github_repository resources are not served: give the agent a Connection, or the files",
                ));
            }
            other => return Err(Error::invalid_field(&format!("{field}.type"), format!("unknown resource type {other:?}")).into()),
        }
    }
    Ok(out)
}

/// A native Session resource — a MemoryStore it mounts — as CMA shows
/// it: its id is the store's, its path where it is mounted.
fn resource(r: &views::SessionResource) -> Value {
    json!({"type": r.kind, "id": r.memory_store_id, "memory_store_id": r.memory_store_id, "access": r.access,
        "mount_name": r.mount_name, "store_version": r.store_version, "mount_path": format!("/mnt/memory/{}", r.mount_name)})
}

/// `GET /v1/sessions/{id}/resources`.
pub async fn list_resources(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let s: views::Session =
        cx.native.get(&format!("/v1/sessions/{}", super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?)).await?;
    let data = s.resources.iter().map(resource).collect();
    Ok(Json(wire::page(data, None)))
}

/// `GET /v1/sessions/{id}/resources/{rid}`.
pub async fn retrieve_resource(cx: Cx, Path((id, rid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let s: views::Session =
        cx.native.get(&format!("/v1/sessions/{}", super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?)).await?;
    let found = s.resources.iter().find(|r| r.memory_store_id == rid).map(resource);
    found.map(Json).ok_or_else(|| Error::not_found("session resource", &rid).into())
}

/// Adding, changing or removing a resource: fixed at creation.
pub async fn fixed_resources(_cx: Cx) -> super::wire::CmaError {
    refuse("resources_fixed_at_creation", "a session's resources are fixed when it is created (its mounts are recorded then)")
}

/// `POST /v1/sessions/{id}`: title and metadata natively; `budget` raised
/// (work stopped at the cap restarts), attached, or detached with `null`.
pub async fn update(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let id = super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?;
    if body.get("vault_ids").is_some_and(|v| !v.is_null()) {
        return Err(refuse("vault_ids_fixed_at_creation", "vault_ids cannot be changed on a session"));
    }
    if body["agent"].get("mcp_servers").is_some_and(|v| !v.is_null()) {
        return Err(refuse("mcp_servers_fixed", "a session's MCP servers are its release's: they cannot be changed"));
    }
    let current: views::Session = cx.native.get(&format!("/v1/sessions/{id}")).await?;
    // `agent.tools` narrows the selection (while idle, natively checked).
    if let Some(t) = body["agent"].get("tools").filter(|t| !t.is_null()) {
        let d = facts::deployment(&cx.state, &current.agent_deployment_id).await?;
        let def = facts::version(&cx.state, &d.agent_id, d.pins.agent_version).await?.definition.0;
        let names = super::agents::tool_names(t, &super::mcp::servers_of(&cx.state, &def).await?)?;
        cx.native.post::<views::Session>(&format!("/v1/sessions/{id}/selection"), &json!({"tools": names})).await.map_err(|e| {
            match e.0.code {
                Code::Invalid => refuse("override_widens", e.0.message),
                _ => e,
            }
        })?;
    }
    let mut change = json!({});
    if let Some(t) = body.get("title") {
        change["title"] = json!(t.as_str().unwrap_or_default());
    }
    if let Some(m) = body.get("metadata") {
        change["metadata"] = if m.is_null() { json!({}) } else { wire::patch_metadata(&current.metadata, m)? };
    }
    if change.as_object().is_some_and(|c| !c.is_empty()) {
        cx.native.post::<views::Session>(&format!("/v1/sessions/{id}"), &change).await?;
    }
    if let Some(b) = body.get("budget") {
        let existing = current.budget_id.as_deref().filter(|b| !b.is_empty());
        match (b.is_null(), existing) {
            (true, Some(budget)) => {
                cx.native.delete(&format!("/v1/budgets/{budget}")).await?;
            }
            (true, None) => {}
            (false, Some(budget)) => {
                let limit = budget_limit(b)?;
                let now: views::Budget = cx.native.get(&format!("/v1/budgets/{budget}")).await?;
                if limit <= now.consumed {
                    return Err(refuse(
                        "budget_not_raised",
                        "the new budget is not above what the session has consumed; raise it or detach it",
                    ));
                }
                cx.native.post::<views::Budget>(&format!("/v1/budgets/{budget}"), &json!({"limit": limit})).await?;
            }
            (false, None) => {
                require_priced(&cx, &current.agent_deployment_id).await?;
                let attach = json!({"scope": {"kind": "session", "id": id}, "limit": budget_limit(b)?, "metric": "model_spend"});
                cx.native.post::<views::Budget>("/v1/budgets", &attach).await?;
            }
        }
    }
    let s: views::Session = cx.native.get(&format!("/v1/sessions/{id}")).await?;
    Ok(Json(render(&cx.state, &s).await?))
}

/// CMA's `{type:"limit", max_list_cost:{amount:"<cents>", currency:"USD"}}`
/// → a `model_spend` limit in micro-USD.
fn budget_limit(b: &Value) -> CmaResult<i64> {
    if b["type"] != "limit" {
        return Err(Error::invalid_field("budget.type", "budget.type must be \"limit\"").into());
    }
    let cost = &b["max_list_cost"];
    if cost["currency"].as_str().is_some_and(|c| c != "USD") {
        return Err(refuse("currency_unsupported", "budgets are in USD"));
    }
    let cents: i64 = match &cost["amount"] {
        Value::String(a) => {
            a.trim().parse().map_err(|_| Error::invalid_field("budget.max_list_cost.amount", "amount is a whole number of cents"))?
        }
        Value::Number(n) => {
            n.as_i64().ok_or_else(|| Error::invalid_field("budget.max_list_cost.amount", "amount is a whole number of cents"))?
        }
        _ => return Err(Error::invalid_field("budget.max_list_cost.amount", "amount is required").into()),
    };
    if !(1..=1_000_000_000).contains(&cents) {
        return Err(Error::invalid_field("budget.max_list_cost.amount", "amount is 1 to 1,000,000,000 cents").into());
    }
    Ok(cents * 10_000)
}

/// A Budget on spend needs every candidate of the deployment's route to
/// have a price (else 400 `model_not_budgetable`).
async fn require_priced(cx: &Cx, deployment_id: &str) -> CmaResult<()> {
    let d = facts::deployment(&cx.state, deployment_id).await?;
    let route = facts::route(&cx.state, &d.pins.model_routing_profile_id).await?;
    let prices = facts::prices(&cx.state).await?;
    for c in &route.candidates {
        let (p, m) = (c.provider.as_str(), c.model.as_str());
        if !prices.iter().any(|(pp, pm)| pp == p && (pm == m || pm == "*")) {
            return Err(refuse("model_not_budgetable", format!("{p}/{m} has no price, so spend on it cannot be capped")));
        }
    }
    Ok(())
}

/// `POST /v1/sessions/{id}/archive`.
pub async fn archive(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?;
    let s: views::Session = cx.native.post(&format!("/v1/sessions/{id}/archive"), &json!({})).await?;
    Ok(Json(render(&cx.state, &s).await?))
}

/// `DELETE /v1/sessions/{id}`: the log is append-only.
pub async fn delete(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    cx.native
        .get::<views::Session>(&format!("/v1/sessions/{}", super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?))
        .await?;
    Err(refuse("session_delete_unsupported", "sessions are not deleted: their event log is the audit record; archive it"))
}

/// `agent`: `"agt_…"`, `{type:"agent", id, version?}` or
/// `{type:"agent_with_overrides", …}` → (id, version, overrides).
fn agent_ref(v: &Value) -> CmaResult<(String, Option<i64>, Value)> {
    let (id, version, overrides) = match v {
        Value::String(s) => (s.clone(), None, json!({})),
        Value::Object(o) => {
            let id = o.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
            let version = o.get("version").and_then(Value::as_i64);
            if o.get("type").and_then(Value::as_str) == Some("agent_with_overrides") {
                for k in ["model", "mcp_servers"] {
                    if o.get(k).is_some_and(|x| !x.is_null()) {
                        return Err(refuse("override_unsupported", format!("{k} cannot be overridden per session here")));
                    }
                }
            }
            (id, version, v.clone())
        }
        _ => return Err(Error::invalid_field("agent", "agent is an agent id or {type:\"agent\", id, version}").into()),
    };
    if checkfu_core::id::AgentId::check("agent", &id).is_err() {
        return Err(Error::invalid_field("agent", format!("no such agent {id:?}")).into());
    }
    Ok((id, version, overrides))
}

/// A session's `vault_ids` (§17.10): vaults the caller can read (404), not
/// archived (400). Checkfu picks no credential per Session (calls use the
/// Connections the release pins), so a vault holding a credential for one
/// of the agent's MCP URLs other than the pinned one is refused
/// (`vault_credential_not_pinned`), never silently ignored.
async fn vaults_for(cx: &Cx, agent_id: &str, version: i64, v: &Value) -> CmaResult<Vec<String>> {
    let ids: Vec<String> = match v {
        Value::Null => return Ok(vec![]),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| x.as_str().map(String::from).ok_or_else(|| Error::invalid_field(&format!("vault_ids[{i}]"), "a vault id").into()))
            .collect::<CmaResult<_>>()?,
        _ => return Err(Error::invalid_field("vault_ids", "vault_ids must be an array of vault ids").into()),
    };
    if ids.is_empty() {
        return Ok(ids);
    }
    let def = facts::version(&cx.state, agent_id, version).await?.definition.0;
    let pinned: Vec<String> = def
        .tools
        .into_iter()
        .filter_map(|t| match t.kind {
            Some(Kind::ToolSource(s)) => s.connection_id,
            _ => None,
        })
        .collect();
    let mut pinned_urls = vec![];
    for c in &pinned {
        pinned_urls.push((c.clone(), facts::connection(&cx.state, c).await?.url));
    }
    for id in &ids {
        let vault = super::vaults::read(cx, id).await?;
        if vault.status == "archived" {
            return Err(refuse("vault_archived", format!("vault {id} is archived")));
        }
        for cid in &vault.connection_ids {
            let c = facts::connection(&cx.state, cid).await?;
            let url = c.url.as_str();
            let live = c.status != "revoked";
            let competes = pinned_urls.iter().any(|(p, u)| super::mcp::same_url(u, url) && p != cid);
            let is_pinned = pinned_urls.iter().any(|(p, _)| p == cid);
            if live && competes && !is_pinned {
                return Err(refuse(
                    "vault_credential_not_pinned",
                    format!(
                        "vault {id} holds credential {cid} for {url}, but the agent's version pins another Connection there; \
                         Checkfu picks no credential per session (publish the agent over this one instead)"
                    ),
                ));
            }
        }
    }
    Ok(ids)
}

/// `agent_with_overrides` `tools` and `skills` narrow the Session's
/// selection (§6); naming more than the version declares → 400
/// `override_widens`.
async fn narrow(cx: &Cx, agent_id: &str, version: i64, overrides: &Value, native: &mut Value) -> CmaResult<()> {
    let tools = overrides.get("tools").filter(|t| !t.is_null());
    let skills = overrides.get("skills").filter(|t| !t.is_null());
    if tools.is_none() && skills.is_none() {
        return Ok(());
    }
    let def = facts::version(&cx.state, agent_id, version).await?.definition.0;
    let declared: Vec<String> = def.tools.iter().flat_map(ToolDeclaration::names).collect();
    if let Some(t) = tools {
        let names = super::agents::tool_names(t, &super::mcp::servers_of(&cx.state, &def).await?)?;
        if let Some(extra) = names.iter().find(|n| !declared.contains(n)) {
            return Err(refuse("override_widens", format!("{extra:?} is not a tool of the agent's version: overrides only narrow")));
        }
        native["tools"] = json!(names);
    }
    if let Some(sk) = skills {
        let ids: Vec<String> = super::agents::skill_ids(sk)?;
        let have: Vec<&str> = def.skills.iter().map(|r| r.skill_id.as_str()).collect();
        if let Some(extra) = ids.iter().find(|i| !have.contains(&i.as_str())) {
            return Err(refuse("override_widens", format!("{extra} is not a skill of the agent's version: overrides only narrow")));
        }
        native["skills"] = json!(ids);
    }
    Ok(())
}

/// A native Session (which the caller was allowed to read) as a CMA
/// session; what it was pinned to is read as facts.
pub async fn render(st: &AppState, s: &views::Session) -> CmaResult<Value> {
    let d = facts::deployment(st, &s.agent_deployment_id).await?;
    let agent = facts::agent(st, &d.agent_id).await?;
    let pinned = pinned_agent(st, &agent, d.pins.agent_version).await?;
    let budget = match s.budget_id.as_deref().filter(|b| !b.is_empty()) {
        Some(b) => Some(facts::budget(st, b).await?.limit),
        None => None,
    };
    Ok(compose(s, &d, pinned, budget, evaluations(st, &s.id).await?))
}

/// The agent version a Session is pinned to, as a session shows it.
async fn pinned_agent(st: &AppState, agent: &views::Agent, version: i64) -> CmaResult<Value> {
    let v = facts::version(st, &agent.id, version).await?;
    let mut pinned = super::agents::render(st, agent, &v).await?;
    if let Some(o) = pinned.as_object_mut() {
        for k in ["created_at", "updated_at", "archived_at", "metadata"] {
            o.remove(k);
        }
    }
    Ok(pinned)
}

async fn evaluations(st: &AppState, session_id: &str) -> CmaResult<Vec<Value>> {
    Ok(facts::outcomes(st, session_id).await?.iter().map(outcome_evaluation).collect())
}

/// The CMA session from its parts: the native Session, its deployment, the
/// pinned agent as shown, its budget's limit (native units) and its
/// Outcomes' evaluations.
fn compose(s: &views::Session, d: &views::AgentDeployment, pinned: Value, budget: Option<i64>, evaluations: Vec<Value>) -> Value {
    let micro = u64::try_from(s.usage.model_spend_micro_usd).unwrap_or(0);
    let budget = match budget {
        Some(limit) => json!({"type": "limit", "max_list_cost": {"amount": (limit / 10_000).to_string(), "currency": "USD"}}),
        None => Value::Null,
    };
    let status = s.status.as_str();
    json!({
        "type": "session",
        "id": s.id,
        "status": status,
        "title": s.title,
        "metadata": Some(s.metadata.clone()).filter(Value::is_object).unwrap_or(json!({})),
        "agent": pinned,
        "environment_id": d.pins.sandbox_profile_id,
        "usage": {
            "input_tokens": s.usage.input_tokens,
            "output_tokens": s.usage.output_tokens,
            "cache_read_input_tokens": 0,
            "list_cost": {"amount": micro.div_ceil(10_000).to_string(), "currency": "USD"},
        },
        "stats": stats(s, status),
        "resources": s.resources.iter().map(resource).collect::<Vec<_>>(),
        "vault_ids": s.connection_vault_ids,
        "outcome_evaluations": evaluations,
        "budget": budget,
        "deployment_id": Value::Null,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "archived_at": if status == "terminated" { json!(s.updated_at) } else { Value::Null },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_tokens_keep_their_order_and_direction() {
        let c = Cursor { descending: true, back: true, id: "sess_01m8n5w2381sjtydkyxnv11e90".into() };
        assert_eq!(Cursor::parse(&c.token(), true).expect("round trip"), c);
        assert!(Cursor::parse(&c.token(), false).is_err(), "a cursor keeps its order");
        assert!(Cursor::parse("dn.agt_01m8n5w2381sjtydkyxnv11e90", true).is_err() && Cursor::parse("zz", true).is_err());
    }

    #[test]
    fn agent_references_take_every_cma_form() {
        let id = "agt_01m8w32jy9rqjgj5trhpwws2p7";
        assert_eq!(agent_ref(&json!(id)).expect("string").0, id);
        let (_, v, _) = agent_ref(&json!({"type": "agent", "id": id, "version": 2})).expect("pinned");
        assert_eq!(v, Some(2));
        let e = agent_ref(&json!({"type": "agent_with_overrides", "id": id, "model": "x"})).expect_err("model override");
        assert!(agent_ref(&json!({"type": "agent_with_overrides", "id": id, "tools": []})).is_ok(), "tools narrow");
        assert_eq!(e.0.details["reason"], "override_unsupported");
        assert!(agent_ref(&json!("nope")).is_err());
    }
}
