//! The public gateway: the REST and SSE API of docs/api.md under `/v1`. It owns
//! authentication, the error envelope, request ids and idempotency, and
//! reaches every other service only through its tonic client.

pub mod auth;
pub mod authz;
pub mod automation_wire;
pub mod bodies;
pub mod catalog_facts;
pub mod cma;
pub mod console;
pub mod decisions;
pub mod error;
pub mod execution_wire;
pub mod extract;
pub mod graph_wire;
pub mod idempotency;
pub mod json_text;
pub mod live;
pub mod memory_wire;
pub mod multipart;
pub mod openapi_rules;
pub mod policy_rules;
pub mod reach_wire;
pub mod routes;
pub mod runner_edge;
pub mod sandbox_wire;
pub mod streams;
pub mod threads_wire;
pub mod uploads_wire;
pub mod views;

use crate::error::{ApiError, REQUEST_ID};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use checkfu_core::{Code, Error, Result};
use checkfu_proto::capability::v1::connections_service_client::ConnectionsServiceClient;
use checkfu_proto::capability::v1::tool_sources_service_client::ToolSourcesServiceClient;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::memory::v1::memory_service_client::MemoryServiceClient;
use checkfu_proto::modelgateway::v1::model_gateway_service_client::ModelGatewayServiceClient;
use checkfu_proto::scheduler::v1::scheduler_service_client::SchedulerServiceClient;
use checkfu_proto::sessions::v1::files_service_client::FilesServiceClient;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_proto::sessions::v1::skills_service_client::SkillsServiceClient;
use checkfu_proto::transport::Transport;
use checkfu_proto::webhooks::v1::webhooks_service_client::WebhooksServiceClient;
use checkfu_store::{Db, Location, Migrations};
use idempotency::IdempotencyStore;
use std::sync::Arc;

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/gateway":
    "0001_init",
);

/// Clients of the services behind the gateway, and its own store: one
/// [`Shared`] behind an `Arc`. axum hands every request (and every
/// middleware layer) a clone of its state; cloning ten service clients,
/// the limits and the caches' handles, then dropping them, was 3% of the
/// embedded installation's CPU per accepted message. Fields read through
/// `Deref`.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What every request of a gateway replica shares.
pub struct Shared {
    pub gov: GovernanceServiceClient<Transport>,
    pub sessions: SessionsServiceClient<Transport>,
    pub models: ModelGatewayServiceClient<Transport>,
    pub webhooks: WebhooksServiceClient<Transport>,
    /// Connections, credentials and capability status (the capability gateway).
    pub connections: ConnectionsServiceClient<Transport>,
    pub tool_sources: ToolSourcesServiceClient<Transport>,
    /// Uploaded Files and skill bundles (the sessions service).
    pub files: FilesServiceClient<Transport>,
    pub skills: SkillsServiceClient<Transport>,
    /// Automations and their firings.
    pub scheduler: SchedulerServiceClient<Transport>,
    pub memory: MemoryServiceClient<Transport>,
    /// Per-principal request limits, shared by every gateway replica.
    pub limits: RateLimits,
    /// One shared live feed per followed Session (see `live.rs`).
    pub feeds: Arc<live::Feeds>,
    /// Open streams per Principal, and their revocation checks.
    pub streams: Arc<streams::Streams>,
    pub idem: Arc<IdempotencyStore>,
    /// Cancelled when the node drains: long-lived streams end with it.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// How often an idle SSE stream gets a `: ping` comment.
    pub sse_ping: std::time::Duration,
    /// Who a Session acts as, where it lives and what it runs never change,
    /// so the gateway keeps those facts instead of asking on every write.
    pub session_facts: Arc<checkfu_core::cache::Bounded<String, SessionFacts>>,
    /// Published agent versions by `agent_id:version`: a version never
    /// changes once published, so what is read once holds.
    pub agent_versions: Arc<checkfu_core::cache::Bounded<String, views::AgentVersion>>,
    /// Keys' Principals and permission answers, kept while governance's
    /// `decisions` epoch stands (see `decisions.rs`).
    pub decisions: Arc<decisions::Decisions>,
    /// Catalog rows a create reads, kept under the same epoch (see
    /// `catalog_facts.rs`).
    pub catalog: catalog_facts::CatalogFacts,
}

/// The immutable facts of a Session that authorization needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFacts {
    pub principal_id: String,
    pub environment_id: String,
    pub agent_id: String,
}

/// Facts kept in memory; beyond this the cache starts over.
pub const SESSION_FACTS_CACHE: usize = 100_000;
/// Agent versions kept (each a definition: a few KB at most).
pub const AGENT_VERSIONS_CACHE: usize = 4_096;

/// How many requests one principal may make per second, counted in a
/// limiter every gateway replica shares (Redis in production).
#[derive(Clone)]
pub struct RateLimits {
    pub limiter: Arc<dyn checkfu_ephemeral::RateLimiter>,
    pub per_second: u32,
    /// Open SSE streams one Principal may hold on one gateway replica.
    pub max_streams_per_principal: usize,
    /// Invalid keys one client address may present per window.
    pub auth_failures_per_window: u32,
    /// Client addresses refused until the instant given, for presenting
    /// too many invalid keys (see `auth.rs`).
    pub throttled: Arc<checkfu_core::cache::Bounded<std::net::IpAddr, std::time::Instant>>,
    /// Digests of keys that authenticated lately, and when: they pass an
    /// address's throttle (and are still checked every time).
    pub known_keys: Arc<checkfu_core::cache::Bounded<String, std::time::Instant>>,
    /// Warnings while the limiter cannot be reached (not one per request).
    pub unreachable: Arc<checkfu_ephemeral::outage::FailureLog>,
}

impl RateLimits {
    pub fn new(limiter: Arc<dyn checkfu_ephemeral::RateLimiter>, per_second: u32) -> Self {
        let unreachable = checkfu_ephemeral::outage::FailureLog::new("the rate limiter is unreachable; letting requests through");
        RateLimits {
            limiter,
            per_second,
            max_streams_per_principal: streams::DEFAULT_MAX_PER_PRINCIPAL,
            auth_failures_per_window: auth::AUTH_FAILURES_PER_WINDOW,
            throttled: Arc::new(checkfu_core::cache::Bounded::new(100_000)),
            known_keys: Arc::new(checkfu_core::cache::Bounded::new(100_000)),
            unreachable: Arc::new(unreachable),
        }
    }
}

/// How the gateway reaches the services it calls (local or remote).
pub struct Upstreams {
    pub governance: Transport,
    pub sessions: Transport,
    pub model_gateway: Transport,
    pub webhooks: Transport,
    pub capability_gateway: Transport,
    pub scheduler: Transport,
    pub memory: Transport,
}

impl AppState {
    pub async fn open(
        location: &Location,
        up: Upstreams,
        shutdown: tokio_util::sync::CancellationToken,
        sse_ping: std::time::Duration,
        limits: RateLimits,
        epochs: Option<Arc<dyn checkfu_ephemeral::Epochs>>,
        keep_catalog: bool,
    ) -> Result<AppState> {
        let max_streams = limits.max_streams_per_principal;
        let db = Db::open(location, "gateway", &MIGRATIONS).await?;
        let idem = Arc::new(IdempotencyStore::new(db));
        let purge = idem.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = purge.purge_expired().await {
                    tracing::warn!(error = %e, "purging idempotency records failed");
                }
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            }
        });
        const MAX: usize = 64 * 1024 * 1024;
        Ok(AppState(Arc::new(Shared {
            gov: GovernanceServiceClient::new(up.governance).max_decoding_message_size(MAX),
            sessions: SessionsServiceClient::new(up.sessions.clone()).max_decoding_message_size(MAX),
            files: FilesServiceClient::new(up.sessions.clone()).max_decoding_message_size(MAX),
            skills: SkillsServiceClient::new(up.sessions).max_decoding_message_size(MAX).max_encoding_message_size(MAX),
            scheduler: SchedulerServiceClient::new(up.scheduler).max_decoding_message_size(MAX),
            memory: MemoryServiceClient::new(up.memory).max_decoding_message_size(MAX),
            models: ModelGatewayServiceClient::new(up.model_gateway).max_decoding_message_size(MAX),
            webhooks: WebhooksServiceClient::new(up.webhooks).max_decoding_message_size(MAX),
            connections: ConnectionsServiceClient::new(up.capability_gateway.clone()).max_decoding_message_size(MAX),
            tool_sources: ToolSourcesServiceClient::new(up.capability_gateway).max_decoding_message_size(MAX),
            limits,
            feeds: Arc::new(live::Feeds::new(sse_ping)),
            streams: Arc::new(streams::Streams::new(max_streams)),
            idem,
            shutdown,
            sse_ping,
            session_facts: Arc::new(checkfu_core::cache::Bounded::new(SESSION_FACTS_CACHE)),
            agent_versions: Arc::new(checkfu_core::cache::Bounded::new(AGENT_VERSIONS_CACHE)),
            decisions: Arc::new(decisions::Decisions::new(epochs)),
            catalog: catalog_facts::CatalogFacts::new(keep_catalog),
        })))
    }

    /// Every Environment id (for callers whose reach is their own Sessions).
    pub async fn all_envs(&self) -> Result<Vec<String>, ApiError> {
        let mut out = vec![];
        let mut page = String::new();
        loop {
            let r = self.gov.clone().list_environments(gov::ListRequest { limit: 100, page: page.clone() }).await?.into_inner();
            out.extend(r.data.into_iter().map(|e| e.id));
            if r.next_page.is_empty() {
                return Ok(out);
            }
            page = r.next_page;
        }
    }
}

/// Gives every request an id (`request-id` header, and `request_id` in error
/// envelopes) and keeps it in scope for the handler, with the request's one
/// reading of the decisions epoch.
async fn request_id(req: Request, next: Next) -> Response {
    let id = checkfu_core::id::new_id("req");
    let mut resp = REQUEST_ID.scope(id.clone(), decisions::Decisions::scope(next.run(req))).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("request-id", v);
    }
    resp
}

async fn not_found() -> Response {
    ApiError(Error::new(Code::NotFound, "no such endpoint")).into_response()
}

async fn method_not_allowed(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    if resp.status() == axum::http::StatusCode::METHOD_NOT_ALLOWED {
        let mut e = ApiError(Error::invalid("this method is not allowed on this endpoint")).into_response();
        *e.status_mut() = axum::http::StatusCode::METHOD_NOT_ALLOWED;
        return e;
    }
    resp
}

/// The OpenAPI document's frame; every path and schema in it comes from
/// the handlers' `#[utoipa::path]` annotations and the derived schemas.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "Checkfu API", version = "1", description = "The public API of Checkfu, a governed managed-agents platform. Authenticate with `Authorization: Bearer <api key>`."),
    modifiers(&BearerAuth),
    security(("api_key" = [])),
    tags(
        (name = "principals", description = "Principals: the people and services that act"),
        (name = "apiKeys", description = "API keys: a Principal's credentials, shown once"),
        (name = "groups", description = "Groups of Principals, subjects of grants and rules"),
        (name = "environments", description = "Environments: the isolation boundary every resource lives in"),
        (name = "permissionAssignments", description = "PermissionAssignments: who may do what on what"),
        (name = "actionPolicies", description = "ActionPolicies: allow, require_approval or deny, and their dry run"),
        (name = "auditEvents", description = "The append-only audit log"),
        (name = "approvals", description = "ActionApprovals: calls waiting for a person's decision"),
        (name = "standingApprovals", description = "StandingApprovals minted by approve responses, and their revocation"),
        (name = "budgets", description = "Budgets: caps on model spend or tokens"),
        (name = "webhookEndpoints", description = "Outbound webhook endpoints and their deliveries"),
        (name = "agents", description = "Agents, their drafts and immutable versions"),
        (name = "sandboxProfiles", description = "SandboxProfiles and their immutable revisions"),
        (name = "modelRoutingProfiles", description = "ModelRoutingProfiles: ordered model candidates"),
        (name = "evaluatorQualifications", description = "EvaluatorQualifications: which models may judge a Check or screen a delivery"),
        (name = "models", description = "The configured provider endpoints and the price catalog"),
        (name = "agentDeployments", description = "AgentDeployments and their revisions"),
        (name = "sessions", description = "Sessions, their event log and stream, Runs, threads, Outcomes and output files"),
        (name = "runners", description = "Self-hosted Runners: pairing codes, Runners, revocation"),
        (name = "connections", description = "Connections and their write-only credentials"),
        (name = "capabilities", description = "What this installation can do now"),
        (name = "connectionVaults", description = "ConnectionVaults: Connections granted together"),
        (name = "toolSources", description = "MCP ToolSources and their tools"),
        (name = "files", description = "Uploaded Files: given to Sessions as resources and message blocks"),
        (name = "skills", description = "Skills: versioned bundles mounted read-only into Sessions"),
        (name = "memoryStores", description = "MemoryStores: versioned document trees with compare-and-set writes"),
        (name = "skillProposals", description = "SkillProposals: SKILL.md files graphs proposed, for a person to adopt or reject"),
        (name = "webhookSources", description = "WebhookSources: a provider's events on one resource, starting an Automation"),
        (name = "providerWebhookRegistrations", description = "ProviderWebhookRegistrations: a WebhookSource's hook at its provider"),
        (name = "providerTriggers", description = "The providers this installation offers triggers from"),
        (name = "memoryProposals", description = "MemoryProposals: reviewed changes to a MemoryStore"),
        (name = "dreams", description = "Dreams: curation runs over MemoryStores"),
        (name = "automations", description = "Automations: work started without a person at a keyboard, run as a service Principal"),
        (name = "automationFirings", description = "AutomationFirings and their traces"),
        (name = "automationGraphs", description = "AutomationGraphs: authored documents planned and applied into Automations"),
        (name = "consoleSessions", description = "Console sessions: the web console's sign-in, an API key exchanged once for an HttpOnly cookie"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("ck_...").build()),
        );
        // The web console's session (docs/console.md): every route takes it
        // where no key is sent; the console's own routes take only it.
        components.add_security_scheme(
            "console_session",
            SecurityScheme::ApiKey(utoipa::openapi::security::ApiKey::Cookie(utoipa::openapi::security::ApiKeyValue::new(
                crate::console::cookies::SESSION,
            ))),
        );
    }
}

/// The `/v1` API and its OpenAPI document, assembled from the annotated
/// handlers (so every route served is described). No fallback: see [`finish`].
pub fn router_and_doc(state: AppState) -> (Router, utoipa::openapi::OpenApi) {
    use routes::{
        approvals as a, automations as au, budgets as b, catalog as c, connections as cn, console_sessions as cs, dreams as dr,
        evaluators as ev, files as f, governance as g, graphs as gr, identity as i, memory as m, runners as r, sessions as s, skills as sk,
        tool_sources as ts, uploads as up, vaults as v, webhooks as w,
    };
    // Uploads and skill bundles take bodies past the API's 1 MiB default.
    let files = OpenApiRouter::new().routes(routes!(up::upload_file, up::list_files)).layer(DefaultBodyLimit::max(up::MAX_FORM_BYTES + 1));
    let skills = OpenApiRouter::new()
        .routes(routes!(sk::create_skill, sk::list_skills))
        .routes(routes!(sk::create_version, sk::list_versions))
        .layer(DefaultBodyLimit::max(sk::MAX_BUNDLE_BODY + 1));
    use utoipa::OpenApi;
    use utoipa_axum::{router::OpenApiRouter, routes};
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(i::create_principal, i::list_principals))
        .routes(routes!(i::get_principal, i::update_principal))
        .routes(routes!(i::create_api_key, i::list_api_keys))
        .routes(routes!(i::revoke_api_key))
        .routes(routes!(i::create_group, i::list_groups))
        .routes(routes!(i::get_group))
        .routes(routes!(i::add_member))
        .routes(routes!(i::remove_member))
        .routes(routes!(i::create_environment, i::list_environments))
        .routes(routes!(i::get_environment, i::update_environment))
        .routes(routes!(i::create_assignment, i::list_assignments))
        .routes(routes!(i::get_assignment, i::delete_assignment))
        .routes(routes!(g::create_policy, g::list_policies))
        .routes(routes!(g::evaluate))
        .routes(routes!(g::get_policy, g::update_policy, g::delete_policy))
        .routes(routes!(g::list_audit))
        .routes(routes!(a::list_approvals))
        .routes(routes!(a::get_approval))
        .routes(routes!(a::respond))
        .routes(routes!(a::list_standing))
        .routes(routes!(a::get_standing, a::revoke_standing))
        .routes(routes!(b::list_budgets, b::create_budget))
        .routes(routes!(b::get_budget, b::update_budget, b::detach_budget))
        .routes(routes!(b::pause_budget))
        .routes(routes!(b::resume_budget))
        .routes(routes!(w::create_endpoint, w::list_endpoints))
        .routes(routes!(w::get_endpoint, w::update_endpoint, w::delete_endpoint))
        .routes(routes!(w::rotate_secret))
        .routes(routes!(w::list_deliveries))
        .routes(routes!(cn::create_connection, cn::list_connections))
        .routes(routes!(cn::get_connection, cn::update_connection))
        .routes(routes!(cn::revoke_connection))
        .routes(routes!(cn::set_credential, cn::delete_credential))
        .routes(routes!(cn::list_capabilities))
        .routes(routes!(v::create_vault, v::list_vaults))
        .routes(routes!(v::get_vault, v::update_vault, v::delete_vault))
        .routes(routes!(v::archive_vault))
        .routes(routes!(ts::create_tool_source, ts::list_tool_sources))
        .routes(routes!(ts::get_tool_source, ts::update_tool_source))
        .routes(routes!(ts::archive_tool_source))
        .routes(routes!(ts::sync_tool_source))
        .routes(routes!(ts::set_tool))
        .routes(routes!(c::create_agent, c::list_agents))
        .routes(routes!(c::get_agent, c::update_agent))
        .routes(routes!(c::archive_agent))
        .routes(routes!(c::publish_version, c::list_versions))
        .routes(routes!(c::get_version))
        .routes(routes!(c::create_sandbox_profile, c::list_sandbox_profiles))
        .routes(routes!(c::get_sandbox_profile))
        .routes(routes!(c::publish_sandbox_revision))
        .routes(routes!(c::archive_sandbox_profile))
        .routes(routes!(c::get_sandbox_revision))
        .routes(routes!(c::create_routing_profile, c::list_routing_profiles))
        .routes(routes!(c::get_routing_profile))
        .routes(routes!(ev::create, ev::list))
        .routes(routes!(ev::get))
        .routes(routes!(ev::revoke))
        .routes(routes!(c::price_catalog))
        .routes(routes!(c::model_endpoints))
        .routes(routes!(c::create_deployment, c::list_deployments))
        .routes(routes!(c::get_deployment))
        .routes(routes!(c::create_deployment_revision))
        .routes(routes!(s::create_session, s::list_sessions))
        .routes(routes!(s::get_session, s::update_session))
        .routes(routes!(s::archive_session))
        .routes(routes!(s::update_selection))
        .routes(routes!(s::post_event, s::list_events))
        .routes(routes!(s::stream_events))
        .routes(routes!(f::list_files))
        .routes(routes!(f::file_content))
        .routes(routes!(r::create_pairing))
        .routes(routes!(r::list_runners))
        .routes(routes!(r::get_runner))
        .routes(routes!(r::revoke_runner))
        .routes(routes!(s::list_runs))
        .routes(routes!(s::get_run))
        .merge(files)
        .routes(routes!(up::get_file, up::delete_file))
        .routes(routes!(up::file_content))
        .merge(skills)
        .routes(routes!(sk::get_skill))
        .routes(routes!(sk::get_version))
        .routes(routes!(sk::version_content))
        .routes(routes!(sk::archive_skill))
        .routes(routes!(au::create_automation, au::list_automations))
        .routes(routes!(au::get_automation, au::update_automation, au::delete_automation))
        .routes(routes!(au::pause_automation))
        .routes(routes!(au::resume_automation))
        .routes(routes!(au::fire_automation))
        .routes(routes!(au::list_firings))
        .routes(routes!(au::get_firing))
        .routes(routes!(au::get_trace))
        .routes(routes!(au::list_filtered))
        .routes(routes!(au::list_frontiers))
        .routes(routes!(routes::skill_proposals::list))
        .routes(routes!(routes::skill_proposals::get))
        .routes(routes!(routes::skill_proposals::adopt))
        .routes(routes!(routes::skill_proposals::reject))
        .routes(routes!(routes::webhook_sources::create, routes::webhook_sources::list))
        .routes(routes!(routes::webhook_sources::get, routes::webhook_sources::delete))
        .routes(routes!(routes::webhook_sources::list_registrations))
        .routes(routes!(routes::webhook_sources::get_registration))
        .routes(routes!(routes::webhook_sources::check))
        .routes(routes!(routes::webhook_sources::repair))
        .routes(routes!(routes::webhook_sources::revoke))
        .routes(routes!(routes::webhook_sources::triggers))
        .routes(routes!(routes::webhook_sources::ingest))
        .routes(routes!(au::ingest))
        .routes(routes!(gr::create_graph, gr::list_graphs))
        .routes(routes!(gr::get_graph, gr::delete_graph))
        .routes(routes!(gr::revise_graph, gr::list_revisions))
        .routes(routes!(gr::get_revision))
        .routes(routes!(gr::plan_graph))
        .routes(routes!(gr::apply_graph))
        .routes(routes!(gr::list_applications))
        .routes(routes!(m::create_store, m::list_stores))
        .routes(routes!(m::get_store, m::update_store, m::delete_store))
        .routes(routes!(m::archive_store))
        .routes(routes!(m::read_document, m::write_document, m::delete_document))
        .routes(routes!(m::list_documents))
        .routes(routes!(m::list_versions))
        .routes(routes!(m::get_version))
        .routes(routes!(m::create_proposal, m::list_proposals))
        .routes(routes!(m::get_proposal))
        .routes(routes!(m::approve_proposal))
        .routes(routes!(m::reject_proposal))
        .routes(routes!(s::list_outcomes))
        .routes(routes!(s::list_threads))
        .routes(routes!(s::get_thread))
        .routes(routes!(s::archive_thread))
        .routes(routes!(s::list_thread_events))
        .routes(routes!(s::stream_thread_events))
        .routes(routes!(s::get_outcome))
        .routes(routes!(dr::create_dream, dr::list_dreams))
        .routes(routes!(dr::get_dream))
        .routes(routes!(dr::cancel_dream))
        .routes(routes!(dr::archive_dream))
        .routes(routes!(gr::test_node))
        .routes(routes!(gr::test_rule))
        .routes(routes!(cs::create_console_session))
        .routes(routes!(cs::get_console_session, cs::delete_console_session))
        .with_state(state)
        .split_for_parts()
}

/// The `/v1` API, with its document at `GET /v1/openapi.json` (no auth).
pub fn router(state: AppState) -> Router {
    let (router, doc) = router_and_doc(state);
    let mut doc = serde_json::to_value(&doc).unwrap_or_default();
    openapi_rules::constrain(&mut doc);
    openapi_rules::optional_empty_bodies(&mut doc);
    openapi_rules::name_resources(&mut doc);
    // Served as the bytes it is: the document is large (25,000 JSON nodes),
    // and a tree of it held for the process's life would cost megabytes to
    // keep and a deep copy per request.
    let doc = bytes::Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
    let serve = move || {
        let doc = doc.clone();
        async move { ([(axum::http::header::CONTENT_TYPE, "application/json")], doc) }
    };
    router.route("/v1/openapi.json", axum::routing::get(serve)).merge(console::router())
}

/// Wraps the node's whole router (API, gRPC, health) with the edge
/// behaviour: request ids, the body limit, and envelopes for unknown paths
/// and methods. Applied once, last, because a router has one fallback.
pub fn finish(app: Router) -> Router {
    app.fallback(not_found)
        .layer(axum::middleware::from_fn(method_not_allowed))
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES + 1))
        .layer(axum::middleware::from_fn(request_id))
}
