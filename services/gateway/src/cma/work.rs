//! The Environment Work API (api.md §17.13) ↔ the runner core's claims,
//! leases and fencing (`checkfu_sessions::work`).
//!
//! Three credentials reach these routes. The environment key is a Runner
//! credential (`crr_`) of the environment's pool `cma:<sbp>`: it polls,
//! acknowledges and lists. A poll's `secret` carries a work token (`cwt_`),
//! a capability for one Session and one delivery: it heartbeats and stops
//! its item and reads and answers its Session (`cx.rs`). An API key with
//! `manage` on the workspace lists, reads, updates, stops and counts.

use super::cx::{Cma, Cx, api_key, encode, required_beta_sent};
use super::wire::{self, CmaError, CmaResult};
use axum::Json;
use axum::extract::{FromRequestParts, Path, RawQuery};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use base64::Engine;
use checkfu_core::{Code, Error};
use checkfu_proto::sessions::v1 as pb;
use serde_json::{Value, json};

/// Who calls a work route.
pub enum Cred {
    /// A Runner credential: the environment key.
    Runner(String),
    /// A delivery's work token.
    Token(String),
    /// An API key (its caller, for `manage`).
    Key(Box<Cx>),
}

pub struct WorkCx {
    pub cma: Cma,
    pub cred: Cred,
    /// Where the worker reaches this API (the `secret`'s `api_base_url`).
    pub base_url: String,
}

impl FromRequestParts<Cma> for WorkCx {
    type Rejection = CmaError;

    async fn from_request_parts(parts: &mut Parts, cma: &Cma) -> Result<Self, Self::Rejection> {
        let key = api_key(&parts.headers)?;
        let base_url = base_url(&parts.headers);
        let cred = if key.starts_with(checkfu_core::RUNNER_CREDENTIAL_PREFIX) {
            cma.check_enabled()?;
            required_beta_sent(parts)?;
            Cred::Runner(key)
        } else if key.starts_with(checkfu_core::WORK_TOKEN_PREFIX) {
            cma.check_enabled()?;
            required_beta_sent(parts)?;
            Cred::Token(key)
        } else {
            Cred::Key(Box::new(Cx::from_request_parts(parts, cma).await?))
        };
        Ok(WorkCx { cma: cma.clone(), cred, base_url })
    }
}

/// `http(s)://<host>/cma`: what the client called, as a worker on its
/// machine reaches it.
fn base_url(headers: &HeaderMap) -> String {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
    let proto = h("x-forwarded-proto").filter(|p| *p == "https").unwrap_or("http");
    let host = h("x-forwarded-host").or_else(|| h("host")).unwrap_or("localhost");
    format!("{proto}://{host}/cma")
}

fn refused(why: &str) -> CmaError {
    Error::new(Code::PermissionDenied, why).with_reason("work_credential_refused").into()
}

impl WorkCx {
    fn sessions(&self) -> checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient<checkfu_proto::transport::Transport> {
        self.cma.state.sessions.clone()
    }

    /// The credential the sessions service checks: the Runner's or the
    /// token; empty for a manager this checked.
    async fn credential(&self, profile_id: &str, allow_key: bool) -> CmaResult<String> {
        match &self.cred {
            Cred::Runner(c) | Cred::Token(c) => Ok(c.clone()),
            Cred::Key(_) if !allow_key => {
                Err(refused("this call takes the environment key (a Runner credential of the environment's pool), not an API key"))
            }
            Cred::Key(cx) => {
                let p: crate::views::SandboxProfile = cx.native.get(&format!("/v1/sandbox-profiles/{}", encode(profile_id))).await?;
                cx.state.require_manage(&cx.caller, &p.environment_id).await?;
                Ok(String::new())
            }
        }
    }

    /// A manager's call only.
    async fn manager(&self, profile_id: &str) -> CmaResult<()> {
        if !matches!(self.cred, Cred::Key(_)) {
            return Err(refused("this call takes an API key with manage on the workspace"));
        }
        self.credential(profile_id, true).await.map(|_| ())
    }
}

fn checked(profile_id: &str) -> CmaResult<&str> {
    checkfu_core::id::SandboxProfileId::check("environment_id", profile_id).map_err(|_| Error::not_found("environment", profile_id))?;
    Ok(profile_id)
}

/// A work item as CMA shows it; `secret` only on the poll that delivered it.
fn render(w: &pb::WorkItem, secret: Option<String>) -> Value {
    let t = |s: &str| if s.is_empty() { Value::Null } else { json!(s) };
    json!({
        "type": "work",
        "id": w.id,
        "environment_id": w.profile_id,
        "data": {"type": "session", "id": w.session_id},
        "state": w.state,
        "metadata": serde_json::from_str::<Value>(&w.metadata_json).unwrap_or_else(|_| json!({})),
        "secret": secret,
        "created_at": w.created_at,
        "acknowledged_at": t(&w.acknowledged_at),
        "started_at": t(&w.started_at),
        "latest_heartbeat_at": t(&w.latest_heartbeat_at),
        "stop_requested_at": t(&w.stop_requested_at),
        "stopped_at": t(&w.stopped_at),
    })
}

/// The poll's `secret`: URL-safe base64 JSON of the work token and where
/// to use it. Never logged.
fn secret(token: &str, base_url: &str) -> String {
    let payload = json!({"sessions_token": token, "api_base_url": base_url});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.to_string())
}

/// `GET /v1/environments/{id}/work/poll`: `null` when there is no work.
pub async fn poll(w: WorkCx, Path(id): Path<String>, headers: HeaderMap, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    if !matches!(w.cred, Cred::Runner(_)) {
        return Err(refused("poll takes the environment key (a Runner credential of the environment's pool)"));
    }
    let q = wire::query_pairs(raw.as_deref())?;
    const BLOCK_MS: &str = "block_ms must be 1 to 999";
    let block_ms = match wire::number::<u32>(&q, "block_ms", BLOCK_MS)? {
        None => 0,
        Some(n) if (1..=999).contains(&n) => n,
        Some(_) => return Err(Error::invalid_field("block_ms", BLOCK_MS).into()),
    };
    let reclaim = wire::number::<i64>(&q, "reclaim_older_than_ms", "reclaim_older_than_ms must be a number")?;
    let worker_id = headers.get("anthropic-worker-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let req = pb::PollWorkRequest {
        profile_id: id.into(),
        credential: w.credential(id, false).await?,
        block_ms,
        reclaim_older_than_ms: reclaim,
        worker_id,
    };
    let r = w.sessions().poll_work(req).await.map_err(Error::from)?.into_inner();
    Ok(Json(match r.work {
        Some(item) => render(&item, Some(secret(&r.token, &w.base_url))),
        None => Value::Null,
    }))
}

/// `POST /v1/environments/{id}/work/{wid}/ack`.
pub async fn ack(w: WorkCx, Path((id, wid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let req = pb::WorkRequest { profile_id: id.into(), work_id: wid, credential: w.credential(id, false).await? };
    Ok(Json(render(&w.sessions().ack_work(req).await.map_err(Error::from)?.into_inner(), None)))
}

/// `POST /v1/environments/{id}/work/{wid}/heartbeat`.
pub async fn heartbeat(w: WorkCx, Path((id, wid)): Path<(String, String)>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    let ttl = wire::number::<i64>(&q, "desired_ttl_seconds", "desired_ttl_seconds must be a number")?;
    let req = pb::HeartbeatWorkRequest {
        profile_id: id.into(),
        work_id: wid,
        credential: w.credential(id, false).await?,
        expected_last_heartbeat: wire::param(&q, "expected_last_heartbeat").unwrap_or_default().to_string(),
        desired_ttl_seconds: ttl,
    };
    let r = w.sessions().heartbeat_work(req).await.map_err(Error::from)?.into_inner();
    Ok(Json(json!({"type": "work_heartbeat", "last_heartbeat": r.last_heartbeat, "lease_extended": r.lease_extended,
        "state": r.state, "ttl_seconds": r.ttl_seconds})))
}

/// `POST /v1/environments/{id}/work/{wid}/stop`.
pub async fn stop(w: WorkCx, Path((id, wid)): Path<(String, String)>, body: Option<Json<Value>>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let force = body.as_ref().and_then(|b| b.0.get("force")).and_then(Value::as_bool).unwrap_or(false);
    let req = pb::StopWorkRequest { profile_id: id.into(), work_id: wid, credential: w.credential(id, true).await?, force };
    Ok(Json(render(&w.sessions().stop_work(req).await.map_err(Error::from)?.into_inner(), None)))
}

/// `GET /v1/environments/{id}/work/{wid}`.
pub async fn retrieve(w: WorkCx, Path((id, wid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    w.manager(id).await?;
    let req = pb::WorkRequest { profile_id: id.into(), work_id: wid, credential: String::new() };
    Ok(Json(render(&w.sessions().get_work(req).await.map_err(Error::from)?.into_inner(), None)))
}

/// `POST /v1/environments/{id}/work/{wid}`: a metadata patch.
pub async fn update(w: WorkCx, Path((id, wid)): Path<(String, String)>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    w.manager(id).await?;
    let patch = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let req = pb::UpdateWorkRequest { profile_id: id.into(), work_id: wid, metadata_patch_json: patch.to_string() };
    Ok(Json(render(&w.sessions().update_work(req).await.map_err(Error::from)?.into_inner(), None)))
}

/// `GET /v1/environments/{id}/work`.
pub async fn list(w: WorkCx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    if matches!(w.cred, Cred::Token(_)) {
        return Err(refused("list takes the environment key or an API key with manage"));
    }
    let q = wire::query_pairs(raw.as_deref())?;
    let req = pb::ListWorkRequest {
        profile_id: id.into(),
        credential: w.credential(id, true).await?,
        limit: wire::limit(&q, 20, 100)?,
        page: wire::param(&q, "page").unwrap_or_default().to_string(),
    };
    let r = w.sessions().list_work(req).await.map_err(Error::from)?.into_inner();
    Ok(Json(wire::page(r.data.iter().map(|i| render(i, None)).collect(), Some(r.next_page))))
}

/// `GET /v1/environments/{id}/work/stats`.
pub async fn stats(w: WorkCx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    w.manager(id).await?;
    let r = w.sessions().work_stats(pb::WorkStatsRequest { profile_id: id.into() }).await.map_err(Error::from)?.into_inner();
    let oldest = if r.oldest_queued_at.is_empty() { Value::Null } else { json!(r.oldest_queued_at) };
    Ok(Json(json!({"type": "work_queue_stats", "depth": r.depth, "pending": r.pending, "oldest_queued_at": oldest,
        "workers_polling": r.workers_polling})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_what_the_sdk_decodes() {
        let s = secret("cwt_abc", "http://h:1/cma");
        assert!(!s.contains('=') && !s.contains('+') && !s.contains('/'), "URL-safe, unpadded: {s}");
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&s).expect("decodes");
        let v: Value = serde_json::from_slice(&raw).expect("json");
        assert_eq!(v, json!({"sessions_token": "cwt_abc", "api_base_url": "http://h:1/cma"}));
    }

    #[test]
    fn the_base_url_follows_the_request() {
        let mut h = HeaderMap::new();
        h.insert("host", "127.0.0.1:7460".parse().expect("header"));
        assert_eq!(base_url(&h), "http://127.0.0.1:7460/cma");
        h.insert("x-forwarded-proto", "https".parse().expect("header"));
        h.insert("x-forwarded-host", "api.example.com".parse().expect("header"));
        assert_eq!(base_url(&h), "https://api.example.com/cma");
    }
}
