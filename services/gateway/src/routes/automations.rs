//! Automations (api.md §12.2–12.5): writes (fire included) need `manage`
//! on the Environment, reads `read`; creating one also needs `act_as` on its
//! service Principal. An Automation in an Environment the caller cannot
//! read does not exist (404). Signed ingest has no Principal: the
//! scheduler checks the Automation's ingest secret (`ingest`).

use super::Paging;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query, RawBody};
use crate::idempotency::once;
use crate::json_text::doc;
use crate::views::{ErrorEnvelope, Page, opt, page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_core::Error;
use checkfu_core::time::rfc3339;
use checkfu_proto::scheduler::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

type J<T> = ApiResult<Json<T>>;

#[derive(Debug, Serialize, ToSchema)]
pub struct Automation {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub service_principal_id: String,
    /// `active` or `paused`.
    pub status: String,
    /// `null`, or `{code: manual | readiness_blocked | occurrence_failed, note}`.
    #[schema(value_type = Option<Object>)]
    pub pause_reason: Value,
    #[schema(value_type = Vec<Object>)]
    pub triggers: Value,
    /// The first trigger, or `null`.
    #[schema(value_type = Option<Object>)]
    pub trigger: Value,
    /// `{kind:"agent", agent_deployment_id, deployment_revision, prompt, budget?, session_target}`.
    #[schema(value_type = Object)]
    pub target: Value,
    /// `{state: ready | blocked, checked_at, checks:[{name, status, reason, resource_id?}]}`, evaluated for this answer.
    #[schema(value_type = Object)]
    pub readiness: Value,
    #[schema(value_type = Object)]
    pub managed_by: Value,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
    /// The newest firing, `null` before the first.
    pub last_firing: Option<LastFiring>,
    /// The ingest secret, only in the answer of the write that generated
    /// it; never readable later (an idempotent replay shows it redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingest_secret: Option<String>,
}

/// An Automation's newest firing, enough to show and link it from a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastFiring {
    pub id: String,
    /// `manual`, `schedule` or `webhook`.
    pub source: String,
    /// `running`, `succeeded`, `failed` or `skipped`.
    pub state: String,
    pub created_at: String,
}

fn automation(a: &pb::Automation) -> Automation {
    let triggers = crate::automation_wire::triggers(a);
    Automation {
        id: a.id.clone(),
        environment_id: a.environment_id.clone(),
        name: a.name.clone(),
        service_principal_id: a.service_principal_id.clone(),
        status: a.status.clone(),
        pause_reason: crate::automation_wire::pause_reason(a),
        trigger: triggers.get(0).cloned().unwrap_or(Value::Null),
        triggers,
        target: crate::automation_wire::target(a),
        readiness: crate::automation_wire::readiness(a),
        managed_by: crate::automation_wire::managed_by(a),
        metadata: doc(&a.metadata_json),
        version: a.version,
        created_at: rfc3339(a.created_ms),
        updated_at: rfc3339(a.updated_ms),
        last_firing: a.last_firing.as_ref().map(|f| LastFiring {
            id: f.id.clone(),
            source: f.source.clone(),
            state: f.state.clone(),
            created_at: rfc3339(f.created_ms),
        }),
        ingest_secret: None,
    }
}

/// A write's answer: the Automation, with the ingest secret it generated.
fn written(w: pb::AutomationWrite) -> Automation {
    Automation { ingest_secret: opt(&w.ingest_secret), ..automation(&w.automation.unwrap_or_default()) }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FiringUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub model_spend_micro_usd: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Firing {
    pub id: String,
    pub automation_id: String,
    pub environment_id: String,
    /// `manual`, `schedule`, `webhook` or `subscription`.
    pub source: String,
    #[schema(value_type = Option<Object>)]
    pub event: Value,
    /// The WebhookSource a provider delivery fired it through (§18.9).
    pub webhook_source_id: Option<String>,
    pub scheduled_for: Option<String>,
    pub dedupe_value: Option<String>,
    pub actor_principal_id: Option<String>,
    pub automation_version: i64,
    #[schema(value_type = Option<Object>)]
    pub graph: Value,
    /// `running`, `succeeded`, `failed` or `skipped`.
    pub state: String,
    pub child_session_ids: Vec<String>,
    /// `null` for an Agent target.
    #[schema(value_type = Option<Object>)]
    pub program: Value,
    pub usage: FiringUsage,
    /// `null`, or `{reason, message}`.
    #[schema(value_type = Option<Object>)]
    pub error: Value,
    pub created_at: String,
    pub settled_at: Option<String>,
}

pub(crate) fn firing(f: &pb::Firing) -> Firing {
    let u = f.usage.unwrap_or_default();
    Firing {
        id: f.id.clone(),
        automation_id: f.automation_id.clone(),
        environment_id: f.environment_id.clone(),
        source: f.source.clone(),
        event: doc(&f.event_json),
        webhook_source_id: opt(&f.webhook_source_id),
        scheduled_for: (f.scheduled_for_ms > 0).then(|| rfc3339(f.scheduled_for_ms)),
        dedupe_value: opt(&f.dedupe_value),
        actor_principal_id: opt(&f.actor_principal_id),
        automation_version: f.automation_version,
        graph: crate::automation_wire::firing_graph(f),
        state: f.state.clone(),
        child_session_ids: f.child_session_ids.clone(),
        program: crate::automation_wire::firing_program(f),
        usage: FiringUsage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, model_spend_micro_usd: u.model_spend_micro_usd },
        error: crate::automation_wire::firing_error(f),
        created_at: rfc3339(f.created_ms),
        settled_at: (f.settled_ms > 0).then(|| rfc3339(f.settled_ms)),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAutomation {
    pub environment_id: String,
    /// 1–200 printable characters, unique in the Environment.
    pub name: String,
    /// A `service` Principal the caller may `act_as`; it must hold `invoke` on the target's Agent.
    pub service_principal_id: String,
    /// 0–2 entries; `[]` (the default) fires manually only.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub triggers: Option<Value>,
    /// One trigger, instead of `triggers`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub trigger: Option<Value>,
    #[schema(value_type = Object)]
    pub target: Value,
    /// 32–256 printable ASCII characters; generated (`whsec_…`, shown once)
    /// when a webhook trigger needs one and none is given.
    #[serde(default)]
    pub ingest_secret: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateAutomation {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub triggers: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub trigger: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub target: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    #[serde(default)]
    pub ingest_secret: Option<String>,
    #[serde(default)]
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseAutomation {
    #[serde(default)]
    pub expected_version: Option<i64>,
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeAutomation {
    #[serde(default)]
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FireAutomation {
    /// Any JSON; the prompt is rendered against it.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub event: Option<Value>,
}

fn body<T: serde::de::DeserializeOwned>(v: &Value) -> ApiResult<T> {
    Ok(crate::bodies::parse(v)?)
}

/// `triggers` as the service takes it: the list, or the one `trigger`.
/// The triggers a body sets (`triggers`, or the one `trigger`), their
/// shape read: typed, and as the text a 0.1.0 scheduler reads.
fn triggers_of(triggers: &Option<Value>, trigger: &Option<Value>) -> ApiResult<Option<(pb::TriggerList, String)>> {
    let list = match (triggers.as_ref().filter(|t| !t.is_null()), trigger.as_ref().filter(|t| !t.is_null())) {
        (Some(_), Some(_)) => return Err(Error::invalid_field("trigger", "send triggers or trigger, not both").into()),
        (Some(t), None) => t.clone(),
        (None, Some(t)) => json!([t]),
        (None, None) => return Ok(None),
    };
    Ok(Some((pb::TriggerList { triggers: pb::Trigger::list_from_json(&list)? }, list.to_string())))
}

/// The Automation, if the caller may read its Environment (else 404).
async fn readable(st: &AppState, caller: &Caller, id: &str) -> ApiResult<pb::Automation> {
    checkfu_core::id::AutomationId::check("id", id)?;
    let a = st.scheduler.clone().get_automation(pb::GetByIdRequest { id: id.into() }).await?.into_inner();
    if st.allowed(&caller.principal_id, "read", "environment", &a.environment_id, &a.environment_id).await? {
        Ok(a)
    } else {
        Err(Error::not_found("automation", id).into())
    }
}

/// The Automation, if the caller may change it (`manage`).
async fn writable(st: &AppState, caller: &Caller, id: &str) -> ApiResult<pb::Automation> {
    let a = readable(st, caller, id).await?;
    st.require(caller, "manage", "environment", &a.environment_id, &a.environment_id).await?;
    Ok(a)
}

#[utoipa::path(post, path = "/v1/automations", tag = "automations", operation_id = "automations.createAutomation", params(crate::idempotency::IdempotencyKeyHeader), request_body = CreateAutomation,
    responses((status = 201, body = Automation), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_automation(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(raw): JsonBody,
) -> ApiResult<Response> {
    let b: CreateAutomation = body(&raw)?;
    st.require_manage(&caller, &b.environment_id).await?;
    crate::authz::require_speaks_for(&st, &caller, &b.service_principal_id, "service_principal_id").await?;
    let (triggers, triggers_json) = triggers_of(&b.triggers, &b.trigger)?.unwrap_or_default();
    let target = pb::AgentTarget::from_json(&b.target)?;
    #[allow(deprecated)] // the JSON fields: a 0.1.0 scheduler's
    let req = pb::CreateAutomationRequest {
        environment_id: b.environment_id,
        name: b.name,
        service_principal_id: b.service_principal_id,
        triggers_json,
        target_json: b.target.to_string(),
        triggers: Some(triggers),
        target: Some(target),
        metadata_json: b.metadata.map(|m| m.to_string()).unwrap_or_default(),
        ingest_secret: b.ingest_secret.unwrap_or_default(),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/automations", &raw, || async {
        super::created(written(st.scheduler.clone().create_automation(req).await?.into_inner()))
    })
    .await
}

/// `?environment_id=&status=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AutomationQuery {
    /// Only this Environment.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// `active` or `paused`.
    #[serde(default)]
    pub status: Option<String>,
}

#[utoipa::path(get, path = "/v1/automations", tag = "automations", operation_id = "automations.listAutomations", params(Paging, AutomationQuery),
    responses((status = 200, description = "Newest first", body = Page<Automation>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_automations(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<AutomationQuery>,
    paging: Paging,
) -> J<Page<Automation>> {
    let envs = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let req = pb::ListAutomationsRequest {
        environment_ids: envs,
        status: q.status.unwrap_or_default(),
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.scheduler.clone().list_automations(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, automation)))
}

#[utoipa::path(get, path = "/v1/automations/{id}", tag = "automations", operation_id = "automations.getAutomation", params(("id" = String, Path)),
    responses((status = 200, body = Automation), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_automation(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<Automation> {
    Ok(Json(automation(&readable(&st, &caller, &id).await?)))
}

#[utoipa::path(post, path = "/v1/automations/{id}", tag = "automations", operation_id = "automations.updateAutomation", params(("id" = String, Path)), request_body = UpdateAutomation,
    responses((status = 200, body = Automation), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_automation(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(raw): JsonBody,
) -> J<Automation> {
    let b: UpdateAutomation = body(&raw)?;
    writable(&st, &caller, &id).await?;
    let (triggers, triggers_json) = triggers_of(&b.triggers, &b.trigger)?.unzip();
    let target = b.target.as_ref().map(pb::AgentTarget::from_json).transpose()?;
    #[allow(deprecated)] // the JSON fields: a 0.1.0 scheduler's
    let req = pb::UpdateAutomationRequest {
        id,
        name: b.name,
        triggers_json,
        target_json: b.target.map(|t| t.to_string()),
        triggers,
        target,
        metadata_json: b.metadata.map(|m| m.to_string()),
        ingest_secret: b.ingest_secret,
        expected_version: b.expected_version,
        actor_id: caller.principal_id,
    };
    Ok(Json(written(st.scheduler.clone().update_automation(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/automations/{id}/pause", tag = "automations", operation_id = "automations.pauseAutomation", params(("id" = String, Path)), request_body = PauseAutomation,
    responses((status = 200, body = Automation), (status = "4XX", body = ErrorEnvelope)))]
pub async fn pause_automation(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(raw): JsonBody,
) -> J<Automation> {
    let b: PauseAutomation = body(&raw)?;
    writable(&st, &caller, &id).await?;
    let req = pb::PauseAutomationRequest {
        id,
        expected_version: b.expected_version,
        note: b.note.unwrap_or_default(),
        actor_id: caller.principal_id,
    };
    Ok(Json(automation(&st.scheduler.clone().pause_automation(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/automations/{id}/resume", tag = "automations", operation_id = "automations.resumeAutomation", params(("id" = String, Path)), request_body = ResumeAutomation,
    responses((status = 200, body = Automation), (status = "4XX", body = ErrorEnvelope)))]
pub async fn resume_automation(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(raw): JsonBody,
) -> J<Automation> {
    let b: ResumeAutomation = body(&raw)?;
    writable(&st, &caller, &id).await?;
    let req = pb::ResumeAutomationRequest { id, expected_version: b.expected_version, actor_id: caller.principal_id };
    Ok(Json(automation(&st.scheduler.clone().resume_automation(req).await?.into_inner())))
}

#[utoipa::path(delete, path = "/v1/automations/{id}", tag = "automations", operation_id = "automations.deleteAutomation", params(("id" = String, Path)),
    responses((status = 200, description = "Deleted, with its last state; its firings stay readable", body = Automation),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_automation(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<Automation> {
    writable(&st, &caller, &id).await?;
    let req = pb::ActorRequest { id, actor_id: caller.principal_id };
    Ok(Json(automation(&st.scheduler.clone().delete_automation(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/automations/{id}/fire", tag = "automations", operation_id = "automations.fireAutomation", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = FireAutomation,
    responses((status = 201, body = Firing), (status = "4XX", body = ErrorEnvelope)))]
pub async fn fire_automation(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(raw): JsonBody,
) -> ApiResult<Response> {
    let b: FireAutomation = body(&raw)?;
    writable(&st, &caller, &id).await?;
    let route = format!("POST /v1/automations/{id}/fire");
    let req = pb::FireAutomationRequest {
        id,
        event_json: b.event.filter(|e| !e.is_null()).map(|e| e.to_string()).unwrap_or_default(),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, &route, &raw, || async {
        super::created(firing(&st.scheduler.clone().fire_automation(req).await?.into_inner()))
    })
    .await
}

/// `?source=&state=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FiringQuery {
    /// `manual`, `schedule` or `webhook`.
    #[serde(default)]
    pub source: Option<String>,
    /// `running`, `succeeded`, `failed` or `skipped`.
    #[serde(default)]
    pub state: Option<String>,
}

/// Readable after the Automation is deleted.
#[utoipa::path(get, path = "/v1/automations/{id}/firings", tag = "automations", operation_id = "automations.listAutomationFirings", params(("id" = String, Path), Paging, FiringQuery),
    responses((status = 200, description = "Newest first", body = Page<Firing>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_firings(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<FiringQuery>,
    paging: Paging,
) -> J<Page<Firing>> {
    checkfu_core::id::AutomationId::check("id", &id)?;
    let req = pb::ListFiringsRequest {
        automation_id: id.clone(),
        source: q.source.unwrap_or_default(),
        state: q.state.unwrap_or_default(),
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.scheduler.clone().list_firings(req).await?.into_inner();
    // Firings name their Environment; a caller who cannot read it sees none.
    if let Some(f) = r.data.first()
        && !st.allowed(&caller.principal_id, "read", "environment", &f.environment_id, &f.environment_id).await?
    {
        return Err(Error::not_found("automation", &id).into());
    }
    Ok(Json(page(&r.data, &r.next_page, firing)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FiringTrace {
    pub firing: Firing,
    /// `{state, result, attempt, outcomes}` for a steps program; `null` for an Agent target.
    #[schema(value_type = Option<Object>)]
    pub steps: Value,
    /// `{sessions:[{step_id, session_id, status, stop_reason}], approvals, waits}`.
    #[schema(value_type = Object)]
    pub receipts: Value,
    /// `{complete, missing:[{kind, id}]}`.
    #[schema(value_type = Object)]
    pub evidence: Value,
}

/// What a firing did, with a receipt for each child Session; reading resumes nothing.
#[utoipa::path(get, path = "/v1/automation-firings/{id}/trace", tag = "automationFirings", operation_id = "automationFirings.getAutomationFiringTrace", params(("id" = String, Path)),
    responses((status = 200, body = FiringTrace), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_trace(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<FiringTrace> {
    checkfu_core::id::FiringId::check("id", &id)?;
    let mut t = st.scheduler.clone().get_firing_trace(pb::GetByIdRequest { id: id.clone() }).await?.into_inner();
    let f = t.firing.take().unwrap_or_default();
    if !st.allowed(&caller.principal_id, "read", "environment", &f.environment_id, &f.environment_id).await? {
        return Err(Error::not_found("automation_firing", &id).into());
    }
    Ok(Json(FiringTrace {
        firing: firing(&f),
        steps: crate::automation_wire::trace_steps(&t),
        receipts: crate::automation_wire::trace_receipts(&t),
        evidence: crate::automation_wire::trace_evidence(&t),
    }))
}

#[utoipa::path(get, path = "/v1/automation-firings/{id}", tag = "automationFirings", operation_id = "automationFirings.getAutomationFiring", params(("id" = String, Path)),
    responses((status = 200, body = Firing), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_firing(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<Firing> {
    checkfu_core::id::FiringId::check("id", &id)?;
    let f = st.scheduler.clone().get_firing(pb::GetByIdRequest { id: id.clone() }).await?.into_inner();
    if !st.allowed(&caller.principal_id, "read", "environment", &f.environment_id, &f.environment_id).await? {
        return Err(Error::not_found("automation_firing", &id).into());
    }
    Ok(Json(firing(&f)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FilteredDelivery {
    pub id: String,
    pub automation_id: String,
    /// The dedupe value (an integer shown as its digits).
    pub dedupe_value: String,
    pub body_sha256: String,
    /// `admission_filter`.
    pub reason: String,
    /// The first predicate that did not hold.
    pub predicate_index: i64,
    pub created_at: String,
}

pub(crate) fn filtered(d: &pb::FilteredDelivery) -> FilteredDelivery {
    FilteredDelivery {
        id: d.id.clone(),
        automation_id: d.automation_id.clone(),
        dedupe_value: d.dedupe_value.clone(),
        body_sha256: d.body_sha256.clone(),
        reason: d.reason.clone(),
        predicate_index: d.predicate_index,
        created_at: rfc3339(d.created_ms),
    }
}

/// Webhook events the admission filter stopped, newest first; readable
/// after the Automation is deleted.
#[utoipa::path(get, path = "/v1/automations/{id}/filtered-deliveries", tag = "automations", operation_id = "automations.listAutomationFilteredDeliveries", params(("id" = String, Path), Paging),
    responses((status = 200, description = "Newest first", body = Page<FilteredDelivery>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_filtered(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    paging: Paging,
) -> J<Page<FilteredDelivery>> {
    checkfu_core::id::AutomationId::check("id", &id)?;
    let req = pb::ListFilteredRequest { automation_id: id.clone(), limit: paging.limit(), page: paging.page() };
    let r = st.scheduler.clone().list_filtered_deliveries(req).await?.into_inner();
    if !st.allowed(&caller.principal_id, "read", "environment", &r.environment_id, &r.environment_id).await? {
        return Err(Error::not_found("automation", &id).into());
    }
    Ok(Json(page(&r.data, &r.next_page, filtered)))
}

/// Where one of an Automation's history frontiers stands (api.md §18.7).
#[derive(Debug, Serialize, ToSchema)]
pub struct Frontier {
    pub name: String,
    /// The last Session recorded as processed: the next selection takes
    /// Sessions created after it.
    pub position: String,
    /// The firing whose `step_record_history` moved it there.
    pub firing_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FrontierList {
    pub data: Vec<Frontier>,
}

/// An Automation's history frontiers, by name: each moved by a graph's
/// `step_record_history`. Readable after the Automation is deleted.
#[utoipa::path(get, path = "/v1/automations/{id}/frontiers", tag = "automations", operation_id = "automations.listAutomationFrontiers", params(("id" = String, Path)),
    responses((status = 200, description = "By name", body = FrontierList), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_frontiers(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<FrontierList> {
    checkfu_core::id::AutomationId::check("id", &id)?;
    let r = st.scheduler.clone().list_frontiers(pb::ListFrontiersRequest { automation_id: id.clone() }).await?.into_inner();
    if !st.allowed(&caller.principal_id, "read", "environment", &r.environment_id, &r.environment_id).await? {
        return Err(Error::not_found("automation", &id).into());
    }
    let data = r.data.into_iter().map(|f| Frontier { name: f.name, position: f.position, firing_id: f.firing_id }).collect();
    Ok(Json(FrontierList { data }))
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

/// Signed ingest: no API key; `Checkfu-Signature` made with the
/// Automation's ingest secret authenticates (api.md §12.4). 201 with the
/// firing it admitted (or recorded `skipped`), 200 with the delivery its
/// admission filter stopped; the same event again answers the same result
/// with `Idempotent-Replayed: true`.
#[utoipa::path(post, path = "/v1/ingest/automations/{id}", tag = "automations", operation_id = "automations.ingestAutomationEvent", security(()),
    params(("id" = String, Path),
        ("Checkfu-Version" = String, Header, description = "1"),
        ("Checkfu-Signature" = String, Header, description = "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, \"<t>.<body>\")>")),
    request_body(content = Object, content_type = "application/json", description = "Any JSON event, at most 1 MiB, signed as sent"),
    responses((status = 201, description = "Admitted", body = Firing), (status = 200, description = "Stopped by the admission filter", body = FilteredDelivery),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn ingest(State(st): State<AppState>, Path(id): Path<String>, headers: HeaderMap, RawBody(body): RawBody) -> ApiResult<Response> {
    use axum::response::IntoResponse;
    let req = pb::IngestRequest {
        automation_id: id,
        version: header(&headers, "checkfu-version"),
        content_type: header(&headers, "content-type"),
        signature: header(&headers, "checkfu-signature"),
        body: body.to_vec(),
    };
    let r = st.scheduler.clone().ingest(req).await?.into_inner();
    let mut resp = match r.result {
        Some(pb::ingest_response::Result::Firing(f)) => (axum::http::StatusCode::CREATED, Json(firing(&f))).into_response(),
        Some(pb::ingest_response::Result::Filtered(d)) => (axum::http::StatusCode::OK, Json(filtered(&d))).into_response(),
        None => return Err(Error::internal("the scheduler answered nothing").into()),
    };
    if r.replayed {
        resp.headers_mut().insert("idempotent-replayed", axum::http::HeaderValue::from_static("true"));
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::{pb, triggers_of};
    use serde_json::json;

    #[test]
    fn one_trigger_becomes_a_list_and_both_are_refused() {
        let text = |r: Option<(pb::TriggerList, String)>| r.map(|(_, t)| t);
        assert_eq!(text(triggers_of(&Some(json!([])), &None).expect("list")).as_deref(), Some("[]"));
        let one = json!({"kind": "schedule_once", "at": "2030-01-01T00:00:00Z"});
        let (typed, json) = triggers_of(&None, &Some(one.clone())).expect("one").expect("set");
        assert_eq!((typed.triggers.len(), json), (1, json!([one]).to_string()));
        assert!(triggers_of(&None, &None).expect("none").is_none());
        assert!(triggers_of(&None, &Some(json!({"kind": "x"}))).is_err(), "its shape is read here");
        assert!(triggers_of(&Some(json!([])), &Some(json!({}))).is_err(), "triggers and trigger together");
    }
}
