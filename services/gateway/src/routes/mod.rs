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
pub mod files;
pub mod governance;
pub mod graphs;
pub mod identity;
pub mod memory;
pub mod runners;
pub mod sessions;
pub mod skills;
pub mod tool_sources;
pub mod uploads;
pub mod vaults;
pub mod webhooks;

use serde::Deserialize;
use utoipa::IntoParams;

/// `?limit=&page=` of every list endpoint.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// 1 to 100; default 20.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next_page` token of the previous page.
    #[serde(default)]
    pub page: Option<String>,
    /// Only this Environment.
    #[serde(default)]
    pub environment_id: Option<String>,
}

impl ListQuery {
    /// Absent means the default; an explicit 0 is out of range like 101.
    pub fn limit(&self) -> u32 {
        explicit_limit(self.limit)
    }
    pub fn page(&self) -> String {
        self.page.clone().unwrap_or_default()
    }
}

/// Maps `?limit=` for the services: absent → 0 (their default), an explicit
/// 0 → out of range, so it is refused like any other bad limit.
pub fn explicit_limit(l: Option<u32>) -> u32 {
    match l {
        Some(0) => u32::MAX,
        Some(n) => n,
        None => 0,
    }
}

/// A page of resources a service answered as JSON texts:
/// `{data, next_page}` (null on the last page).
pub fn json_page(items: &[String], next_page: &str) -> serde_json::Value {
    let data: Vec<serde_json::Value> = items.iter().map(|d| serde_json::from_str(d).unwrap_or(serde_json::Value::Null)).collect();
    serde_json::json!({"data": data, "next_page": (!next_page.is_empty()).then_some(next_page)})
}

/// A created resource: 201 with its JSON, through the idempotency layer.
pub fn created<T: serde::Serialize>(v: T) -> crate::error::ApiResult<(axum::http::StatusCode, serde_json::Value)> {
    Ok((axum::http::StatusCode::CREATED, serde_json::to_value(v).map_err(|e| checkfu_core::Error::internal(e.to_string()))?))
}
