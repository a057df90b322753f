//! Durable idempotency. The first response to `(principal, Idempotency-Key)`
//! is stored in the gateway's database; a retry with the same body replays
//! it, a different body is refused. Records live at least 24 hours.
//!
//! Secrets are shown once: a response's `secret` fields (API keys,
//! webhook signing secrets) are never stored here. A replay returns the
//! stored response with each secret set to `null`, `secret_redacted: true`
//! beside it and the header `Checkfu-Secret-Redacted: true`.

use crate::error::{ApiError, ApiResult};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result, sha256_hex};
use checkfu_store::sqlx::{self, Row};
use checkfu_store::{Db, db_err, is_unique_violation};
use serde_json::Value;
use std::future::Future;

pub const RETENTION_MS: i64 = 48 * 3600 * 1000;
/// A reservation older than this is treated as abandoned (its request died).
const STALE_PENDING_MS: i64 = 60_000;
const MAX_KEY_LEN: usize = 255;

/// A stored first response.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub request_sha256: String,
    pub status: u16,
    pub body: String,
}

pub enum Reservation {
    /// We own the key: run the request, then `finish`.
    Fresh,
    Replay(Stored),
}

#[derive(Clone, Debug)]
pub struct IdempotencyStore {
    db: Db,
}

impl IdempotencyStore {
    pub fn new(db: Db) -> Self {
        IdempotencyStore { db }
    }

    /// Readiness: the store answers.
    pub async fn ready(&self) -> bool {
        self.db.ping().await
    }

    /// Claims `key` for a request with digest `sha`, or returns the record
    /// that already holds it.
    pub async fn reserve(&self, principal: &str, key: &str, sha: &str) -> Result<Reservation> {
        let now = now_ms();
        for _ in 0..2 {
            let inserted = sqlx::query(
                "INSERT INTO idempotency_keys (principal_id, key, request_sha256, status, body, created_ms) VALUES ($1, $2, $3, 0, '', $4)",
            )
            .bind(principal)
            .bind(key)
            .bind(sha)
            .bind(now)
            .execute(&self.db.pool)
            .await;
            match inserted {
                Ok(_) => return Ok(Reservation::Fresh),
                Err(e) if is_unique_violation(&e) => {}
                Err(e) => return Err(db_err(e)),
            }
            let row =
                sqlx::query("SELECT request_sha256, status, body, created_ms FROM idempotency_keys WHERE principal_id = $1 AND key = $2")
                    .bind(principal)
                    .bind(key)
                    .fetch_optional(&self.db.pool)
                    .await
                    .map_err(db_err)?;
            let Some(row) = row else { continue };
            let stored = Stored {
                request_sha256: row.try_get("request_sha256").map_err(db_err)?,
                status: row.try_get::<i64, _>("status").map_err(db_err)? as u16,
                body: row.try_get("body").map_err(db_err)?,
            };
            let created: i64 = row.try_get("created_ms").map_err(db_err)?;
            if stored.request_sha256 != sha {
                return Err(Error::new(Code::IdempotencyKeyReused, "this Idempotency-Key was used with a different request"));
            }
            if stored.status != 0 {
                return Ok(Reservation::Replay(stored));
            }
            if now - created < STALE_PENDING_MS {
                return Err(Error::conflict("a request with this Idempotency-Key is still in progress; retry shortly"));
            }
            // The first attempt died mid-flight: take its reservation over.
            let took = sqlx::query(
                "UPDATE idempotency_keys SET created_ms = $1 WHERE principal_id = $2 AND key = $3 AND status = 0 AND created_ms = $4",
            )
            .bind(now)
            .bind(principal)
            .bind(key)
            .bind(created)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
            if took.rows_affected() == 1 {
                return Ok(Reservation::Fresh);
            }
        }
        Err(Error::conflict("a request with this Idempotency-Key is still in progress; retry shortly"))
    }

    pub async fn finish(&self, principal: &str, key: &str, status: u16, body: &str) -> Result<()> {
        sqlx::query("UPDATE idempotency_keys SET status = $1, body = $2 WHERE principal_id = $3 AND key = $4")
            .bind(i64::from(status))
            .bind(body)
            .bind(principal)
            .bind(key)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    /// Releases a reservation whose request failed, so the client may retry.
    pub async fn release(&self, principal: &str, key: &str) -> Result<()> {
        sqlx::query("DELETE FROM idempotency_keys WHERE principal_id = $1 AND key = $2 AND status = 0")
            .bind(principal)
            .bind(key)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    pub async fn purge_expired(&self) -> Result<u64> {
        let r = sqlx::query("DELETE FROM idempotency_keys WHERE created_ms < $1")
            .bind(now_ms() - RETENTION_MS)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(r.rows_affected())
    }
}

/// Fields whose values are shown once and never kept for a replay.
const SECRET_FIELDS: &[&str] = &["secret", "code", "ingest_secret", "signing_secret"];

/// `v` as it may be stored: every secret field nulled (at any depth), with
/// `secret_redacted: true` beside it. Returns whether anything was removed.
pub fn redact_secrets(v: &mut Value) -> bool {
    match v {
        Value::Object(map) => {
            let mut removed = false;
            for field in SECRET_FIELDS {
                if map.get(*field).is_some_and(|s| !s.is_null()) {
                    map.insert((*field).to_string(), Value::Null);
                    map.insert(format!("{field}_redacted"), Value::Bool(true));
                    removed = true;
                }
            }
            for child in map.values_mut() {
                removed |= redact_secrets(child);
            }
            removed
        }
        Value::Array(items) => items.iter_mut().fold(false, |acc, i| redact_secrets(i) | acc),
        _ => false,
    }
}

/// The `Idempotency-Key` request header, as the OpenAPI document declares it
/// on every operation that honours it (through [`once`]): clients such as
/// the SDK retry a POST only where this parameter is declared.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code, reason = "a parameter's description for the OpenAPI document; the header is read by `key_of`")]
pub struct IdempotencyKeyHeader {
    /// A retry with the same key and body replays the first answer (kept at
    /// least 24 h); a different body with the key → 409 `idempotency.key_reused`.
    #[param(rename = "Idempotency-Key")]
    idempotency_key: Option<String>,
}

/// The `Idempotency-Key` header, validated.
pub fn key_of(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let Some(v) = headers.get("idempotency-key") else { return Ok(None) };
    let k = v.to_str().map_err(|_| Error::invalid_field("Idempotency-Key", "the key must be visible ASCII"))?.trim();
    if k.is_empty() || k.len() > MAX_KEY_LEN {
        return Err(Error::invalid_field("Idempotency-Key", "the key must be 1 to 255 characters").into());
    }
    Ok(Some(k.to_string()))
}

/// Runs `create` at most once per key: a replay returns the stored status and
/// body with `Idempotent-Replayed: true`. Only successful responses are kept,
/// so a failed attempt may be retried with the same key.
pub async fn once<F, Fut>(
    store: &IdempotencyStore,
    principal: &str,
    headers: &HeaderMap,
    route: &str,
    body: &Value,
    create: F,
) -> ApiResult<Response>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ApiResult<(StatusCode, Value)>>,
{
    let Some(key) = key_of(headers)? else {
        let (status, v) = create().await?;
        return Ok((status, axum::Json(v)).into_response());
    };
    let sha = sha256_hex(format!("{route}\n{body}"));
    match store.reserve(principal, &key, &sha).await? {
        Reservation::Replay(s) => {
            let status = StatusCode::from_u16(s.status).unwrap_or(StatusCode::OK);
            let redacted = serde_json::from_str::<Value>(&s.body).is_ok_and(|mut v| redact_secrets(&mut v) || has_redaction(&v));
            let mut resp = (status, [(axum::http::header::CONTENT_TYPE, "application/json")], s.body).into_response();
            resp.headers_mut().insert("idempotent-replayed", axum::http::HeaderValue::from_static("true"));
            if redacted {
                resp.headers_mut().insert("checkfu-secret-redacted", axum::http::HeaderValue::from_static("true"));
            }
            Ok(resp)
        }
        Reservation::Fresh => match create().await {
            Ok((status, v)) => {
                let text = v.to_string();
                let mut kept = v;
                redact_secrets(&mut kept);
                store.finish(principal, &key, status.as_u16(), &kept.to_string()).await?;
                Ok((status, [(axum::http::header::CONTENT_TYPE, "application/json")], text).into_response())
            }
            Err(ApiError(e)) => {
                if let Err(release) = store.release(principal, &key).await {
                    tracing::warn!(error = %release, "could not release an idempotency reservation");
                }
                Err(ApiError(e))
            }
        },
    }
}

/// Whether a stored body says a secret was removed from it.
fn has_redaction(v: &Value) -> bool {
    match v {
        Value::Object(map) => {
            SECRET_FIELDS.iter().any(|f| map.get(&format!("{f}_redacted")) == Some(&Value::Bool(true))) || map.values().any(has_redaction)
        }
        Value::Array(items) => items.iter().any(has_redaction),
        _ => false,
    }
}

#[cfg(test)]
mod redaction {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_nulled_at_any_depth_and_marked() {
        let mut v = json!({"id": "key_1", "secret": "ck_abc", "nested": [{"secret": "whsec_x"}], "other": {"secret": null}});
        assert!(redact_secrets(&mut v));
        assert_eq!(
            v,
            json!({"id": "key_1", "secret": null, "secret_redacted": true, "nested": [{"secret": null, "secret_redacted": true}], "other": {"secret": null}})
        );
        assert!(has_redaction(&v));
        let mut plain = json!({"id": "x"});
        assert!(!redact_secrets(&mut plain) && !has_redaction(&plain));
    }
}

#[cfg(test)]
mod conformance {
    //! The idempotency store on every backend: SQLite always, PostgreSQL
    //! when `CHECKFU_TEST_POSTGRES_URL` is set (a fresh schema per run).
    use super::*;
    use checkfu_store::Location;

    async fn suite(s: &IdempotencyStore) {
        assert!(matches!(s.reserve("prin_a", "k1", "sha-1").await.expect("reserve"), Reservation::Fresh));
        let busy = s.reserve("prin_a", "k1", "sha-1").await.err().expect("in flight");
        assert_eq!(busy.code, Code::Conflict, "a retry while the first is in flight waits");
        s.finish("prin_a", "k1", 201, "{\"id\":1}").await.expect("finish");
        match s.reserve("prin_a", "k1", "sha-1").await.expect("replay") {
            Reservation::Replay(st) => assert_eq!((st.status, st.body.as_str()), (201, "{\"id\":1}")),
            Reservation::Fresh => panic!("a finished key replays"),
        }
        let reused = s.reserve("prin_a", "k1", "sha-2").await.err().expect("reused");
        assert_eq!(reused.code, Code::IdempotencyKeyReused);
        assert!(matches!(s.reserve("prin_b", "k1", "sha-2").await.expect("other principal"), Reservation::Fresh), "keys are per principal");
        s.release("prin_b", "k1").await.expect("release");
        assert!(matches!(s.reserve("prin_b", "k1", "sha-3").await.expect("released"), Reservation::Fresh), "a released key is free again");
        // An abandoned reservation (its request died) is taken over after a while.
        sqlx::query("UPDATE idempotency_keys SET created_ms = 1 WHERE principal_id = 'prin_b' AND key = 'k1'")
            .execute(&s.db.pool)
            .await
            .expect("age");
        assert!(matches!(s.reserve("prin_b", "k1", "sha-3").await.expect("stale"), Reservation::Fresh));
        // Records older than the retention are purged; recent ones are kept.
        sqlx::query("UPDATE idempotency_keys SET created_ms = 1 WHERE principal_id = 'prin_b'").execute(&s.db.pool).await.expect("age");
        assert_eq!(s.purge_expired().await.expect("purge"), 1);
        assert!(matches!(s.reserve("prin_a", "k1", "sha-1").await.expect("kept"), Reservation::Replay(_)));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn idempotency_store_conformance() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(&Location::SqliteDir(dir.path().into()), "gateway", &crate::MIGRATIONS).await.expect("sqlite");
        suite(&IdempotencyStore::new(db)).await;
        if let Some(url) = checkfu_core::testing::postgres("the idempotency store on PostgreSQL") {
            let schema = checkfu_core::testing::fresh_schema("gw");
            let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
            suite(&IdempotencyStore::new(db)).await;
        }
    }
}
