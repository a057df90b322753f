//! The query parameters every list shares: `?limit=&page=` ([`Paging`]) and
//! `?environment_id=` ([`InEnvironment`]). A list declares its own filters
//! in a struct of its own and takes these beside it, so the paging
//! parameters are declared, documented and validated once.

use crate::error::ApiError;
use crate::extract::Query;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::Deserialize;
use utoipa::IntoParams;

/// `?limit=&page=`: one page of a list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Paging {
    /// 1 to 100; default 20.
    #[serde(default)]
    limit: Option<u32>,
    /// The `next_page` token of the previous page.
    #[serde(default)]
    page: Option<String>,
}

impl Paging {
    /// The limit as the services take it: absent → 0 (their default); an
    /// explicit 0 → out of range, so it is refused like 101 rather than
    /// read as "the default".
    pub fn limit(&self) -> u32 {
        match self.limit {
            Some(0) => u32::MAX,
            Some(n) => n,
            None => 0,
        }
    }

    /// The page token; empty for the first page.
    pub fn page(&self) -> String {
        self.page.clone().unwrap_or_default()
    }
}

/// Read from the query string beside a list's own filters (both ignore the
/// other's parameters), with the error envelope on a bad value.
impl<S: Send + Sync> FromRequestParts<S> for Paging {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<Paging>::from_request_parts(parts, state).await.map(|Query(p)| p)
    }
}

/// `?environment_id=`: a list narrowed to one Environment.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InEnvironment {
    /// Only this Environment.
    #[serde(default)]
    pub environment_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn paging(q: &str) -> Result<Paging, String> {
        let mut parts = axum::http::Request::get(format!("/v1/x?{q}")).body(()).map_err(|e| e.to_string())?.into_parts().0;
        Paging::from_request_parts(&mut parts, &()).await.map_err(|e| e.0.message)
    }

    #[tokio::test]
    async fn absent_limit_is_the_default_and_zero_is_out_of_range() {
        assert_eq!(paging("").await.map(|p| p.limit()), Ok(0));
        assert_eq!(paging("limit=0").await.map(|p| p.limit()), Ok(u32::MAX));
        let p = paging("limit=7&page=abc&status=idle").await.map(|p| (p.limit(), p.page()));
        assert_eq!(p, Ok((7, "abc".to_string())));
    }

    #[tokio::test]
    async fn a_bad_limit_is_a_client_error() {
        let e = paging("limit=ten").await.err().unwrap_or_default();
        assert!(e.starts_with("invalid query string"), "{e}");
    }
}
