//! The `/v1` routes, grouped by area.

pub mod catalog;
pub mod identity;
pub mod sessions;

use serde::Deserialize;

/// `?limit=&page=` of every list endpoint.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub page: Option<String>,
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
