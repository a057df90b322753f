//! CMA dreams (api.md §17.12) ↔ §13.5's Dreams: one input store plus
//! Sessions, the model routed as an agent's (§17.5), `create_new` output.

use super::cx::Cx;
use super::wire::{self, CmaResult, refuse};
use crate::memory_wire::Dream;
use axum::Json;
use axum::extract::{Path, RawQuery};
use checkfu_core::Error;
use serde_json::{Value, json};

/// `POST /v1/dreams`.
pub async fn create(cx: Cx, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let mut store = None;
    let mut sessions: Vec<Value> = vec![];
    for (i, input) in body["inputs"].as_array().into_iter().flatten().enumerate() {
        match input["type"].as_str() {
            Some("memory_store") if store.is_none() => store = Some(input["memory_store_id"].clone()),
            Some("memory_store") => return Err(refuse("dream_inputs_unsupported", "a dream reads one memory store")),
            Some("sessions") => sessions.extend(input["session_ids"].as_array().cloned().unwrap_or_default()),
            other => return Err(Error::invalid_field(&format!("inputs[{i}].type"), format!("unknown input type {other:?}")).into()),
        }
    }
    let store =
        store.ok_or_else(|| Error::invalid_field("inputs", "a dream reads one memory store: {type:\"memory_store\", memory_store_id}"))?;
    match body["output_behavior"]["type"].as_str() {
        None | Some("create_new") => {}
        Some("update_existing") => {
            return Err(refuse("output_behavior_unsupported", "a dream writes a new store (create_new); review it, then adopt it"));
        }
        Some(other) => return Err(Error::invalid_field("output_behavior.type", format!("unknown output behavior {other:?}")).into()),
    }
    let route = super::agents::route_for(&cx, &body["model"]).await?;
    let mut native = json!({"memory_store_id": store, "session_ids": sessions, "model_routing_profile_id": route});
    if let Some(i) = body["instructions"].as_str() {
        native["instructions"] = json!(i);
    }
    let d = cx.native.post::<Dream>("/v1/dreams", &native).await?;
    Ok(Json(dream(&d, &body["model"])))
}

pub async fn retrieve(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let d = cx.native.get::<Dream>(&format!("/v1/dreams/{}", checked(&id)?)).await?;
    Ok(Json(shown(&cx, &d).await))
}

/// A native Dream with the model it ran, as CMA shows it.
async fn shown(cx: &Cx, d: &Dream) -> Value {
    dream(d, &model_of(cx, d).await)
}

/// The model a Dream ran, as CMA names it: its route's `cma:<id>` (the
/// catch-all `cma:*` names none).
async fn model_of(cx: &Cx, d: &Dream) -> Value {
    let Some(route) = d.model_routing_profile_id.as_deref() else { return Value::Null };
    match super::facts::route(&cx.state, route).await {
        Ok(r) => r.name.strip_prefix("cma:").filter(|n| *n != "*").map(|n| json!(n)).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let archived = if wire::param(&q, "include_archived") == Some("true") { "&include_archived=true" } else { "" };
    let created = wire::created_at_filter(&q)?;
    let statuses = wire::params(&q, "statuses");
    let keep =
        |d: &Value| created(&d["created_at"]) && (statuses.is_empty() || statuses.contains(&d["status"].as_str().unwrap_or_default()));
    let path = format!("/v1/dreams?environment_id={}{archived}", cx.env_id);
    Ok(Json(cx.native.page_where(&path, &q, |d: &Dream| dream(d, &Value::Null), keep).await?))
}

pub async fn cancel(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let d = cx.native.post::<Dream>(&format!("/v1/dreams/{}/cancel", checked(&id)?), &json!({})).await?;
    Ok(Json(shown(&cx, &d).await))
}

pub async fn archive(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let d = cx.native.post::<Dream>(&format!("/v1/dreams/{}/archive", checked(&id)?), &json!({})).await?;
    Ok(Json(shown(&cx, &d).await))
}

fn checked(id: &str) -> CmaResult<String> {
    super::wire::path_id::<checkfu_core::id::DreamId>("dream", id)
}

/// A native Dream as CMA shows it; `model` echoes the request's when known.
fn dream(d: &Dream, model: &Value) -> Value {
    let mut inputs = vec![json!({"type": "memory_store", "memory_store_id": d.inputs.memory_store_id})];
    if !d.inputs.session_ids.is_empty() {
        inputs.push(json!({"type": "sessions", "session_ids": d.inputs.session_ids}));
    }
    let outputs: Vec<Value> = d.outputs.memory_store_id.iter().map(|s| json!({"type": "memory_store", "memory_store_id": s})).collect();
    let model = match model {
        Value::String(id) => json!({"id": id}),
        Value::Object(_) => model.clone(),
        _ => json!({"id": Value::Null}),
    };
    json!({
        "type": "dream", "id": d.id, "status": d.status, "inputs": inputs, "outputs": outputs, "instructions": d.instructions,
        "model": model, "output_behavior": {"type": "create_new"}, "usage": d.usage, "error": d.error,
        "created_at": d.created_at, "ended_at": d.ended_at, "archived_at": d.archived_at, "session_id": Value::Null,
    })
}
