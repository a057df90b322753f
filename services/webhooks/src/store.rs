//! Webhook storage: the narrow trait the service needs and its SQL
//! implementation (one text for both dialects).

use crate::model::*;
use checkfu_core::id::{DeliveryId, EndpointId, EnvironmentId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one, flag};

#[async_trait::async_trait]
pub trait WebhooksStore: Send + Sync + 'static {
    async fn insert_endpoint(&self, e: &Endpoint) -> Result<()>;
    async fn get_endpoint(&self, id: &EndpointId) -> Result<Option<Endpoint>>;
    /// Endpoints of these Environments (and installation-wide ones when
    /// `include_installation`), newest first.
    async fn list_endpoints(&self, environment_ids: &[String], include_installation: bool, page: &PageRequest) -> Result<Vec<Endpoint>>;
    /// Enabled endpoints that may want events of `environment_id`.
    async fn endpoints_for(&self, environment_id: &str) -> Result<Vec<Endpoint>>;
    /// Compare-and-set on `version`.
    async fn update_endpoint(&self, e: &Endpoint, expected_version: i64) -> Result<bool>;
    async fn delete_endpoint(&self, id: &EndpointId) -> Result<bool>;

    /// False when the (endpoint, source event) pair already has one.
    async fn insert_delivery(&self, d: &Delivery) -> Result<bool>;
    /// Pending deliveries due at `now_ms`, oldest first.
    async fn due_deliveries(&self, now_ms: i64, limit: i64) -> Result<Vec<Delivery>>;
    /// Takes a due delivery for one attempt by pushing its next attempt to
    /// `hold_until_ms`; false when another worker took it first.
    async fn take_delivery(&self, id: &DeliveryId, seen_next_ms: i64, hold_until_ms: i64) -> Result<bool>;
    /// Records an attempt and the delivery's new state, in one transaction.
    async fn record_attempt(&self, d: &Delivery, a: &Attempt) -> Result<()>;
    async fn list_deliveries(&self, endpoint_id: &EndpointId, page: &PageRequest) -> Result<Vec<Delivery>>;
    async fn attempts_of(&self, delivery_ids: &[DeliveryId]) -> Result<Vec<Attempt>>;
}

pub struct SqlWebhooksStore {
    db: Db,
    /// Signing secrets are sealed in the table and opened on reading.
    sealer: checkfu_store::sealed::Sealer,
}

impl SqlWebhooksStore {
    pub fn new(db: Db, sealer: checkfu_store::sealed::Sealer) -> Self {
        SqlWebhooksStore { db, sealer }
    }

    fn opened(&self, mut e: Endpoint) -> Result<Endpoint> {
        e.secret = self.sealer.open(&e.secret)?;
        Ok(e)
    }
}

fn endpoint(r: &AnyRow) -> Result<Endpoint> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    Ok(Endpoint {
        id: r.try_get("id").map_err(db_err)?,
        // '' in the column: installation-wide.
        environment_id: Some(r.try_get::<EnvironmentId, _>("environment_id").map_err(db_err)?).filter(|e| !e.is_empty()),
        url: s("url")?,
        event_types: serde_json::from_str(&s("event_types_json")?)
            .map_err(|e| Error::internal(format!("stored event types unreadable: {e}")))?,
        secret: s("secret")?,
        disabled: r.try_get::<i64, _>("disabled").map_err(db_err)? != 0,
        version: r.try_get("version").map_err(db_err)?,
        created_by: s("created_by")?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        updated_ms: r.try_get("updated_ms").map_err(db_err)?,
    })
}

fn delivery(r: &AnyRow) -> Result<Delivery> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    let i = |c: &str| r.try_get::<i64, _>(c).map_err(db_err);
    Ok(Delivery {
        id: r.try_get("id").map_err(db_err)?,
        endpoint_id: r.try_get("endpoint_id").map_err(db_err)?,
        source_event_id: s("source_event_id")?,
        event_id: s("event_id")?,
        event_type: s("event_type")?,
        body: s("body")?,
        status: DeliveryStatus::parse("status", &s("status")?)?,
        attempts: i("attempts")?,
        next_attempt_ms: i("next_attempt_ms")?,
        last_response_code: i("last_response_code")?,
        created_ms: i("created_ms")?,
    })
}

fn attempt(r: &AnyRow) -> Result<Attempt> {
    let i = |c: &str| r.try_get::<i64, _>(c).map_err(db_err);
    Ok(Attempt {
        delivery_id: r.try_get("delivery_id").map_err(db_err)?,
        number: i("number")?,
        at_ms: i("at_ms")?,
        response_code: i("response_code")?,
        error: r.try_get("error").map_err(db_err)?,
        duration_ms: i("duration_ms")?,
    })
}

fn types_json(e: &Endpoint) -> String {
    serde_json::to_string(&e.event_types).unwrap_or_else(|_| "[]".into())
}

#[async_trait::async_trait]
impl WebhooksStore for SqlWebhooksStore {
    async fn insert_endpoint(&self, e: &Endpoint) -> Result<()> {
        sqlx::query(
            "INSERT INTO endpoints (id, environment_id, url, event_types_json, secret, disabled, version, created_by, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&e.id)
        .bind(e.environment_id.as_deref().unwrap_or(""))
        .bind(&e.url)
        .bind(types_json(e))
        .bind(self.sealer.seal(&e.secret)?)
        .bind(flag(e.disabled))
        .bind(e.version)
        .bind(&e.created_by)
        .bind(e.created_ms)
        .bind(e.updated_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn get_endpoint(&self, id: &EndpointId) -> Result<Option<Endpoint>> {
        find_one(&self.db, "SELECT * FROM endpoints WHERE id = $1", id, endpoint).await?.map(|e| self.opened(e)).transpose()
    }

    async fn list_endpoints(&self, environment_ids: &[String], include_installation: bool, page: &PageRequest) -> Result<Vec<Endpoint>> {
        let mut envs = environment_ids.to_vec();
        if include_installation {
            envs.push(String::new());
        }
        let sql = "SELECT * FROM endpoints WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        let found = checkfu_store::list_in_envs(&self.db, sql, &envs, page, endpoint, |e| &e.id).await?;
        found.into_iter().map(|e| self.opened(e)).collect()
    }

    async fn endpoints_for(&self, environment_id: &str) -> Result<Vec<Endpoint>> {
        sqlx::query("SELECT * FROM endpoints WHERE disabled = 0 AND (environment_id = $1 OR environment_id = '')")
            .bind(environment_id)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| endpoint(r).and_then(|e| self.opened(e)))
            .collect()
    }

    async fn update_endpoint(&self, e: &Endpoint, expected_version: i64) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE endpoints SET url = $1, event_types_json = $2, secret = $3, disabled = $4, version = $5, updated_ms = $6 \
             WHERE id = $7 AND version = $8",
        )
        .bind(&e.url)
        .bind(types_json(e))
        .bind(self.sealer.seal(&e.secret)?)
        .bind(flag(e.disabled))
        .bind(e.version)
        .bind(e.updated_ms)
        .bind(&e.id)
        .bind(expected_version)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn delete_endpoint(&self, id: &EndpointId) -> Result<bool> {
        let r = sqlx::query("DELETE FROM endpoints WHERE id = $1").bind(id).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn insert_delivery(&self, d: &Delivery) -> Result<bool> {
        let r = sqlx::query(
            "INSERT INTO deliveries (id, endpoint_id, source_event_id, event_id, event_type, body, status, attempts, next_attempt_ms, \
             last_response_code, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (endpoint_id, source_event_id) DO NOTHING",
        )
        .bind(&d.id)
        .bind(&d.endpoint_id)
        .bind(&d.source_event_id)
        .bind(&d.event_id)
        .bind(&d.event_type)
        .bind(&d.body)
        .bind(d.status.as_str())
        .bind(d.attempts)
        .bind(d.next_attempt_ms)
        .bind(d.last_response_code)
        .bind(d.created_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn due_deliveries(&self, now_ms: i64, limit: i64) -> Result<Vec<Delivery>> {
        sqlx::query("SELECT * FROM deliveries WHERE status = 'pending' AND next_attempt_ms <= $1 ORDER BY next_attempt_ms, id LIMIT $2")
            .bind(now_ms)
            .bind(limit)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(delivery)
            .collect()
    }

    async fn take_delivery(&self, id: &DeliveryId, seen_next_ms: i64, hold_until_ms: i64) -> Result<bool> {
        let r = sqlx::query("UPDATE deliveries SET next_attempt_ms = $1 WHERE id = $2 AND next_attempt_ms = $3 AND status = 'pending'")
            .bind(hold_until_ms)
            .bind(id)
            .bind(seen_next_ms)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn record_attempt(&self, d: &Delivery, a: &Attempt) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        sqlx::query(
            "INSERT INTO attempts (delivery_id, number, at_ms, response_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (delivery_id, number) DO NOTHING",
        )
        .bind(&a.delivery_id)
        .bind(a.number)
        .bind(a.at_ms)
        .bind(a.response_code)
        .bind(&a.error)
        .bind(a.duration_ms)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        sqlx::query("UPDATE deliveries SET status = $1, attempts = $2, next_attempt_ms = $3, last_response_code = $4 WHERE id = $5")
            .bind(d.status.as_str())
            .bind(d.attempts)
            .bind(d.next_attempt_ms)
            .bind(d.last_response_code)
            .bind(&d.id)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        Ok(())
    }

    async fn list_deliveries(&self, endpoint_id: &EndpointId, page: &PageRequest) -> Result<Vec<Delivery>> {
        let before = page.before();
        sqlx::query("SELECT * FROM deliveries WHERE endpoint_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
            .bind(endpoint_id)
            .bind(before)
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(delivery)
            .collect()
    }

    async fn attempts_of(&self, delivery_ids: &[DeliveryId]) -> Result<Vec<Attempt>> {
        if delivery_ids.is_empty() {
            return Ok(vec![]);
        }
        // One query for a page of deliveries (at most 100 ids).
        let sql = format!(
            "SELECT * FROM attempts WHERE delivery_id IN ({}) ORDER BY delivery_id, number",
            checkfu_store::marks(1, delivery_ids.len())
        );
        // Only numbered placeholders are formatted in; the ids are bound.
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in delivery_ids {
            query = query.bind(id);
        }
        query.fetch_all(&self.db.pool).await.map_err(db_err)?.iter().map(attempt).collect()
    }
}
