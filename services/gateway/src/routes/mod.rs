//! The `/v1` routes, grouped by area. Every handler carries its OpenAPI
//! description (`#[utoipa::path]`); the router is assembled from them, so
//! nothing is served that the document does not describe.

pub mod approvals;
pub mod automations;
pub mod budgets;
pub mod catalog;
pub mod connections;
pub mod console_sessions;
pub mod dreams;
pub mod evaluators;
pub mod files;
pub mod governance;
pub mod graphs;
pub mod identity;
pub mod memory;
pub mod paging;
pub mod runners;
pub mod sessions;
pub mod skill_proposals;
pub mod skills;
pub mod tool_sources;
pub mod uploads;
pub mod vaults;
pub mod webhook_sources;
pub mod webhooks;

pub use paging::{InEnvironment, Paging};

/// A created resource: 201 with its JSON, through the idempotency layer.
pub fn created<T: serde::Serialize>(v: T) -> crate::error::ApiResult<(axum::http::StatusCode, serde_json::Value)> {
    Ok((axum::http::StatusCode::CREATED, crate::json_text::value(v)?))
}
