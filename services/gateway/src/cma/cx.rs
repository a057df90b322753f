//! Who is calling a CMA route, in which Environment, with which betas —
//! and the native API, called in process as that caller.

use super::wire::{CmaError, CmaResult};
use crate::AppState;
use crate::auth::Caller;
use crate::views::Page;
use axum::Router;
use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use checkfu_core::{Code, Error};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use tower::ServiceExt;

/// The projection's shared state: the gateway's, and the native router it
/// translates onto.
#[derive(Clone)]
pub struct Cma {
    pub state: AppState,
    pub native: Router,
    /// Whether `cma_projection` is offered here (api.md §16.8).
    pub enabled: bool,
    /// The installation's CMA default workspace (the `default`
    /// Environment), found once.
    pub default_env: Arc<tokio::sync::OnceCell<String>>,
    /// Sessions' mapped logs (`logcache`).
    pub logs: Arc<super::logcache::LogCache>,
}

pub const BETA_AGENTS: &str = "managed-agents-2026-04-01";
pub const BETA_MEMORY: &str = "agent-memory-2026-07-22";
pub const BETA_DREAMS: &str = "dreaming-2026-04-21";

/// A CMA request's caller, Environment and native handle.
pub struct Cx {
    pub caller: Caller,
    /// The Environment the `anthropic-workspace-id` header picked.
    pub env_id: String,
    pub native: Native,
    pub state: AppState,
    pub logs: Arc<super::logcache::LogCache>,
    /// The work token the caller holds, when it is a worker's (§17.13):
    /// the token and what it may reach.
    pub work: Option<(String, checkfu_proto::sessions::v1::WorkScope)>,
}

/// The beta a path's family needs (§17.2); files, skills and models none.
/// `path` is seen inside the nested router (`/agents/…`) or whole.
fn required_beta(path: &str) -> Option<&'static str> {
    let rest = path.split_once("/v1/").map(|(_, r)| r).unwrap_or(path.trim_start_matches('/'));
    let family = rest.split('/').next().unwrap_or_default();
    match family {
        "agents" | "sessions" | "environments" | "vaults" => Some(BETA_AGENTS),
        "memory_stores" => Some(BETA_MEMORY),
        "dreams" => Some(BETA_DREAMS),
        _ => None,
    }
}

/// The API key: `x-api-key` or `Authorization: Bearer`; two different
/// keys are refused, not chosen between.
pub fn api_key(headers: &HeaderMap) -> CmaResult<String> {
    let x = headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim).filter(|k| !k.is_empty());
    let bearer = Some(crate::auth::bearer(headers)).filter(|k| !k.is_empty());
    match (x, bearer) {
        (Some(a), Some(b)) if a != b => {
            Err(Error::new(Code::InvalidKey, "two different API keys were sent (x-api-key and Authorization)").into())
        }
        (Some(k), _) | (None, Some(k)) => Ok(k.to_string()),
        (None, None) => Err(Error::new(Code::MissingKey, "an API key is required: send x-api-key or Authorization: Bearer").into()),
    }
}

/// The path's beta was sent, or it needs none (§17.2).
pub fn required_beta_sent(parts: &Parts) -> CmaResult<()> {
    if let Some(beta) = required_beta(parts.uri.path()) {
        let sent = parts
            .headers
            .get_all("anthropic-beta")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|b| b.trim() == beta);
        if !sent {
            return Err(Error::invalid(format!("this endpoint is in beta: send anthropic-beta: {beta}"))
                .with_reason("missing_beta")
                .into());
        }
    }
    Ok(())
}

/// What a work token may reach (§17.13): its Session (read it, stream it,
/// send tool results) and skills (download them); nothing else.
fn token_reaches(method: &Method, path: &str, session_id: &str) -> bool {
    let rest = path.split_once("/v1/").map(|(_, r)| r).unwrap_or(path.trim_start_matches('/'));
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        ["sessions", sid, tail @ ..] if *sid == session_id => {
            matches!((method, tail), (&Method::GET, [] | ["events"] | ["events", "stream"] | ["threads", ..]) | (&Method::POST, ["events"]))
        }
        ["skills", ..] => method == Method::GET,
        _ => false,
    }
}

impl FromRequestParts<Cma> for Cx {
    type Rejection = CmaError;

    async fn from_request_parts(parts: &mut Parts, cma: &Cma) -> Result<Self, Self::Rejection> {
        cma.check_enabled()?;
        let key = api_key(&parts.headers)?;
        if key.starts_with(checkfu_core::RUNNER_CREDENTIAL_PREFIX) {
            return Err(Error::new(Code::InvalidKey, "a Runner credential authenticates only the Environment Work API").into());
        }
        if key.starts_with(checkfu_core::WORK_TOKEN_PREFIX) {
            return Cx::for_work_token(parts, cma, key).await;
        }
        let bearer =
            HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| Error::new(Code::InvalidKey, "the API key is malformed"))?;
        parts.headers.insert(axum::http::header::AUTHORIZATION, bearer);
        let caller = Caller::from_request_parts(parts, &cma.state).await?;
        required_beta_sent(parts)?;
        let native = Native { router: cma.native.clone(), caller: caller.clone(), key };
        let env_id = match parts.headers.get("anthropic-workspace-id").and_then(|v| v.to_str().ok()).map(str::trim) {
            Some(id) => {
                // Unreadable or malformed: not found, as any other id.
                native
                    .get::<crate::views::Environment>(&format!("/v1/environments/{}", encode(id)))
                    .await
                    .map_err(|_| Error::not_found("workspace", id))?;
                id.to_string()
            }
            None => cma.default_env().await?,
        };
        Ok(Cx { caller, env_id, native, state: cma.state.clone(), logs: cma.logs.clone(), work: None })
    }
}

impl Cx {
    /// A worker's call with its delivery's token: it acts as the Runner's
    /// pairing Principal (so every native check still applies to that
    /// Principal), narrowed to the token's Session.
    async fn for_work_token(parts: &Parts, cma: &Cma, token: String) -> CmaResult<Cx> {
        let req = checkfu_proto::sessions::v1::VerifyWorkTokenRequest { token: token.clone() };
        let scope = cma.state.sessions.clone().verify_work_token(req).await.map_err(Error::from)?.into_inner();
        if !token_reaches(&parts.method, parts.uri.path(), &scope.session_id) {
            return Err(Error::new(Code::PermissionDenied, "a work token reaches only its own Session and skills")
                .with_reason("work_token_scope")
                .into());
        }
        // A superseded delivery reads nothing more; its sends reach the
        // sessions service, which refuses them the same way, fenced.
        if !scope.current && parts.method != Method::POST {
            return Err(Error::conflict("this work item was delivered again or stopped; this token no longer holds it")
                .with_reason("work_lease_superseded")
                .into());
        }
        required_beta_sent(parts)?;
        let caller = Caller { principal_id: scope.principal_id.clone(), key_id: format!("work:{}", scope.work_id) };
        let native = Native { router: cma.native.clone(), caller: caller.clone(), key: token.clone() };
        Ok(Cx {
            caller,
            env_id: scope.environment_id.clone(),
            native,
            state: cma.state.clone(),
            logs: cma.logs.clone(),
            work: Some((token, scope)),
        })
    }
}

impl Cma {
    /// Refuses every route when `cma_projection` is off (§16.8).
    pub fn check_enabled(&self) -> CmaResult<()> {
        if self.enabled {
            return Ok(());
        }
        Err(checkfu_core::features::unavailable("cma_projection", checkfu_core::features::FEATURE_DISABLED)
            .with_reason("capability_unavailable")
            .into())
    }

    /// The `default` Environment, looked up once.
    async fn default_env(&self) -> CmaResult<String> {
        let st = &self.state;
        let found = self
            .default_env
            .get_or_try_init(|| async {
                let mut page = String::new();
                loop {
                    let req = checkfu_proto::governance::v1::ListRequest { limit: 100, page: page.clone() };
                    let r = st.gov.clone().list_environments(req).await.map_err(Error::from)?.into_inner();
                    if let Some(e) = r.data.iter().find(|e| e.name == "default") {
                        return Ok::<_, Error>(e.id.clone());
                    }
                    if r.next_page.is_empty() {
                        return Err(Error::new(Code::NotFound, "this installation has no default workspace; send anthropic-workspace-id"));
                    }
                    page = r.next_page;
                }
            })
            .await?;
        Ok(found.clone())
    }
}

/// Percent-encodes a path segment taken from a client (ids are plain, but
/// a malformed one must stay one segment and end in a 404).
pub fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The native `/v1` API, called in process as the CMA caller: every
/// permission check, ActionPolicy, audit row and limit of the native route
/// holds, and the projection keeps nothing of its own.
#[derive(Clone)]
pub struct Native {
    router: Router,
    pub caller: Caller,
    key: String,
}

impl Native {
    /// The native response, whole (streams, bytes).
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> CmaResult<axum::response::Response> {
        let mut all: Vec<(&str, String)> = headers.to_vec();
        let body = match body {
            Some(v) => {
                all.push(("content-type", "application/json".into()));
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        self.send(method, path, body, &all).await
    }

    /// A request with a body of its own type (a multipart upload).
    pub async fn raw_bytes(&self, method: Method, path: &str, body: Vec<u8>, content_type: &str) -> CmaResult<axum::response::Response> {
        self.send(method, path, Body::from(body), &[("content-type", content_type.to_string())]).await
    }

    async fn send(&self, method: Method, path: &str, body: Body, headers: &[(&str, String)]) -> CmaResult<axum::response::Response> {
        let mut b = Request::builder().method(method).uri(path).header("authorization", format!("Bearer {}", self.key));
        for (k, v) in headers {
            b = b.header(*k, v.as_str());
        }
        let mut req = b.body(body).map_err(|e| Error::internal(format!("building a native request: {e}")))?;
        req.extensions_mut().insert(self.caller.clone());
        let writes = req.method() != Method::GET;
        let resp = self.router.clone().oneshot(req).await.map_err(|e| Error::internal(format!("native call: {e}")))?;
        if writes {
            // What this request reads next must see what it just wrote, or
            // what a conflict says another request wrote.
            crate::decisions::Decisions::renew();
        }
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(native_error(resp).await.into())
    }

    /// Creates a PermissionAssignment `{subject, permission, resource}`
    /// as the caller; one that exists already is kept (not an error).
    pub async fn grant(&self, subject: Value, permission: &str, resource: Value) -> CmaResult<()> {
        let row = serde_json::json!({"subject": subject, "permission": permission, "resource": resource});
        match self.post::<crate::views::PermissionAssignment>("/v1/permission-assignments", &row).await {
            Err(e) if e.0.code != Code::Conflict => Err(e),
            _ => Ok(()),
        }
    }

    /// A JSON call; a native error comes back as its [`Error`].
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>, headers: &[(&str, String)]) -> CmaResult<Value> {
        let resp = self.raw(method, path, body, headers).await?;
        let bytes = axum::body::to_bytes(resp.into_body(), 64 << 20)
            .await
            .map_err(|e| Error::internal(format!("reading a native response: {e}")))?;
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::internal(format!("a native response is not JSON: {e}")).into())
    }

    /// A native answer read as the view the native route renders, so a
    /// field the projection reads is one the compiler knows (`Value` only
    /// where the native route itself passes a service's JSON through).
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> CmaResult<T> {
        view_of(self.call(Method::GET, path, None, &[]).await?)
    }

    /// [`Native::get`] for a `POST`.
    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> CmaResult<T> {
        view_of(self.call(Method::POST, path, Some(body), &[]).await?)
    }

    /// A `DELETE`; what the native route answers is not read.
    pub async fn delete(&self, path: &str) -> CmaResult<()> {
        self.call(Method::DELETE, path, None, &[]).await.map(drop)
    }

    /// One page of the native list at `path` (its own filters in a
    /// `?query`), as a CMA page of `map`ped items: CMA's `limit` (default
    /// 20, at most 100) and `page` token go through unchanged.
    pub async fn page<T: DeserializeOwned>(&self, path: &str, q: &[(String, String)], map: impl Fn(&T) -> Value) -> CmaResult<Value> {
        self.page_where(path, q, map, |_| true).await
    }

    /// [`Native::page`] keeping only the mapped items `keep` accepts (a
    /// filter the native list lacks: a page may then hold fewer than
    /// `limit` while `next_page` goes on).
    pub async fn page_where<T: DeserializeOwned>(
        &self,
        path: &str,
        q: &[(String, String)],
        map: impl Fn(&T) -> Value,
        keep: impl Fn(&Value) -> bool,
    ) -> CmaResult<Value> {
        let limit = super::wire::limit(q, 20, 100)?;
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = format!("{path}{sep}limit={limit}");
        if let Some(p) = super::wire::param(q, "page") {
            url.push_str(&format!("&page={}", encode(p)));
        }
        let r: Page<T> = self.get(&url).await?;
        let data = r.data.iter().map(map).filter(|v| keep(v)).collect();
        Ok(super::wire::page(data, r.next_page))
    }

    /// Every item of a native list, following `next_page` (at most
    /// `max` items: the projection's own reads stay bounded).
    pub async fn all<T: DeserializeOwned>(&self, path: &str, max: usize) -> CmaResult<Vec<T>> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut out = vec![];
        let mut page = String::new();
        loop {
            let url =
                if page.is_empty() { format!("{path}{sep}limit=100") } else { format!("{path}{sep}limit=100&page={}", encode(&page)) };
            let r: Page<T> = self.get(&url).await?;
            out.extend(r.data);
            match r.next_page {
                Some(p) if !p.is_empty() && out.len() < max => page = p,
                _ => return Ok(out),
            }
        }
    }
}

/// The native envelope of a failed call, as the [`Error`] it carried.
async fn native_error(resp: axum::response::Response) -> Error {
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap_or_default();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let code = v["error"]["type"].as_str().and_then(Code::from_type).unwrap_or(match status {
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => Code::Invalid,
        _ => Code::Internal,
    });
    let message = v["error"]["message"].as_str().unwrap_or("the request failed").to_string();
    let mut e = Error::new(code, message);
    if !v["error"]["details"].is_null() {
        e = e.with_details(v["error"]["details"].clone());
    }
    e
}

#[cfg(test)]
mod work_scope_tests {
    use super::token_reaches;
    use axum::http::Method;

    #[test]
    fn a_work_token_reaches_its_session_and_skills_only() {
        let s = "sess_1";
        assert!(token_reaches(&Method::GET, "/sessions/sess_1", s));
        assert!(token_reaches(&Method::GET, "/cma/v1/sessions/sess_1/events/stream", s));
        assert!(token_reaches(&Method::POST, "/sessions/sess_1/events", s));
        assert!(token_reaches(&Method::GET, "/skills/skl_1/versions/2/content", s));
        assert!(!token_reaches(&Method::GET, "/sessions/sess_2", s), "another Session");
        assert!(!token_reaches(&Method::POST, "/sessions/sess_1", s), "no update");
        assert!(!token_reaches(&Method::POST, "/sessions/sess_1/archive", s));
        assert!(!token_reaches(&Method::GET, "/sessions", s), "no list");
        assert!(!token_reaches(&Method::POST, "/skills", s));
        assert!(!token_reaches(&Method::GET, "/agents", s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn betas_follow_the_path_family() {
        assert_eq!(required_beta("/cma/v1/sessions/sess_1/events"), Some(BETA_AGENTS));
        assert_eq!(required_beta("/cma/v1/memory_stores"), Some(BETA_MEMORY));
        assert_eq!(required_beta("/cma/v1/dreams"), Some(BETA_DREAMS));
        assert_eq!(required_beta("/cma/v1/files"), None);
        assert_eq!(required_beta("/cma/v1/models"), None);
        assert_eq!(required_beta("/agents"), Some(BETA_AGENTS), "as the nested router sees it");
        assert_eq!(required_beta("/files/file_1"), None);
    }

    #[test]
    fn keys_come_from_either_header_but_never_two() {
        let mut h = HeaderMap::new();
        assert_eq!(api_key(&h).expect_err("none").0.code, Code::MissingKey);
        h.insert("x-api-key", HeaderValue::from_static("ck_a"));
        assert_eq!(api_key(&h).expect("x-api-key"), "ck_a");
        h.insert("authorization", HeaderValue::from_static("Bearer ck_a"));
        assert_eq!(api_key(&h).expect("the same twice"), "ck_a");
        h.insert("authorization", HeaderValue::from_static("Bearer ck_b"));
        assert_eq!(api_key(&h).expect_err("two").0.code, Code::InvalidKey);
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode("sess_01abc"), "sess_01abc");
        assert_eq!(encode("a/b?c"), "a%2Fb%3Fc");
    }
}

/// A native answer (or one item of a list) read as its view.
pub fn view_of<T: DeserializeOwned>(v: Value) -> CmaResult<T> {
    serde_json::from_value(v).map_err(|e| Error::internal(format!("a native answer is not its view: {e}")).into())
}
