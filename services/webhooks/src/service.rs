//! Outbound webhooks: endpoints, turning platform events into deliveries,
//! and delivering them. Deliveries are thin — ids and types, never content —
//! so a receiver fetches the object it was told about with its own
//! credentials. At least once: a delivery is retried on the fixed schedule
//! with the same `id` until it is acknowledged with a 2xx or 7 attempts fail.

use crate::clock::Clock;
use crate::interest::Interest;
use crate::model::*;
use crate::store::WebhooksStore;
use checkfu_bus::Record;
use checkfu_core::id::{DeliveryId, EndpointId, EnvironmentId, new_id};
use checkfu_core::notice::{Notice, deliverable};
use checkfu_core::page::PageRequest;
use checkfu_core::time::rfc3339;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How long a receiver has to answer one attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// An attempt in flight holds its delivery this long before another worker
/// may take it (covers a worker dying mid-attempt).
const HOLD_MS: i64 = 60_000;
const MAX_URL: usize = 2048;

#[derive(Clone)]
pub struct WebhooksService {
    store: Arc<dyn WebhooksStore>,
    clock: Arc<dyn Clock>,
    allow_private: bool,
    /// Who wants which events, kept between ingests (`interest.rs`).
    interest: Arc<Interest>,
}

/// What an endpoint update asks for.
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub disabled: Option<bool>,
    pub expected_version: Option<i64>,
}

/// What a delivery attempt came to.
struct Outcome {
    code: i64,
    error: String,
}

impl WebhooksService {
    pub fn new(store: Arc<dyn WebhooksStore>, clock: Arc<dyn Clock>, allow_private: bool) -> Self {
        WebhooksService { store, clock, allow_private, interest: Arc::new(Interest::off()) }
    }

    /// Keeps who wants which events between ingests, current as `interest`
    /// learns of endpoint writes.
    pub fn with_interest(mut self, interest: Interest) -> Self {
        self.interest = Arc::new(interest);
        self
    }

    /// A target URL, checked (http or https, no credentials, and unless
    /// private targets are allowed resolving only to public addresses),
    /// with its host and the one address to call it at.
    async fn target(&self, url: &str) -> Result<(reqwest::Url, String, std::net::SocketAddr)> {
        if url.len() > MAX_URL {
            return Err(Error::invalid_field("url", "the URL is longer than 2048 bytes"));
        }
        let u = reqwest::Url::parse(url).map_err(|e| Error::invalid_field("url", format!("not a URL: {e}")))?;
        let (host, port) = checkfu_core::net::http_target(&u)?;
        let addr = checkfu_core::net::resolve_target(&host, port, self.allow_private).await?;
        Ok((u, host, addr))
    }

    pub async fn create_endpoint(
        &self,
        environment_id: &str,
        url: &str,
        event_types: Vec<String>,
        created_by: &str,
    ) -> Result<(Endpoint, String)> {
        let environment_id = (!environment_id.is_empty()).then(|| EnvironmentId::parse("environment_id", environment_id)).transpose()?;
        check_event_types(&event_types)?;
        let (u, _, _) = self.target(url).await.map_err(|e| Error::invalid_field("url", e.message))?;
        let now = self.clock.now_ms();
        let secret = checkfu_core::signature::new_secret();
        let e = Endpoint {
            id: EndpointId::mint(),
            environment_id,
            url: u.to_string(),
            event_types,
            secret: secret.clone(),
            disabled: false,
            version: 1,
            created_by: created_by.to_string(),
            created_ms: now,
            updated_ms: now,
        };
        self.store.insert_endpoint(&e).await?;
        self.interest.changed().await?;
        Ok((e, secret))
    }

    pub async fn endpoint(&self, id: &str) -> Result<Endpoint> {
        let id = EndpointId::parse("id", id)?;
        self.store.get_endpoint(&id).await?.ok_or_else(|| Error::not_found("webhook_endpoint", &id))
    }

    pub async fn list_endpoints(
        &self,
        environment_ids: &[String],
        include_installation: bool,
        page: &PageRequest,
    ) -> Result<Vec<Endpoint>> {
        self.store.list_endpoints(environment_ids, include_installation, page).await
    }

    pub async fn update_endpoint(&self, id: &str, c: EndpointChange) -> Result<Endpoint> {
        let cur = self.endpoint(id).await?;
        if c.expected_version.is_some_and(|v| v != cur.version) {
            return Err(
                Error::conflict("the endpoint changed since it was read (version mismatch)").with_details(json!({"version": cur.version}))
            );
        }
        let mut next = cur.clone();
        if let Some(url) = &c.url {
            let (u, _, _) = self.target(url).await.map_err(|e| Error::invalid_field("url", e.message))?;
            next.url = u.to_string();
        }
        if let Some(t) = c.event_types {
            check_event_types(&t)?;
            next.event_types = t;
        }
        if let Some(d) = c.disabled {
            next.disabled = d;
        }
        self.save(cur, next).await
    }

    async fn save(&self, cur: Endpoint, mut next: Endpoint) -> Result<Endpoint> {
        next.version = cur.version + 1;
        next.updated_ms = self.clock.now_ms();
        if !self.store.update_endpoint(&next, cur.version).await? {
            return Err(Error::conflict("the endpoint changed concurrently; retry"));
        }
        self.interest.changed().await?;
        Ok(next)
    }

    /// A new signing secret, shown once; the old one stops signing at once.
    pub async fn rotate_secret(&self, id: &str) -> Result<(Endpoint, String)> {
        let cur = self.endpoint(id).await?;
        let secret = checkfu_core::signature::new_secret();
        let next = Endpoint { secret: secret.clone(), ..cur.clone() };
        Ok((self.save(cur, next).await?, secret))
    }

    pub async fn delete_endpoint(&self, id: &str) -> Result<Endpoint> {
        let e = self.endpoint(id).await?;
        self.store.delete_endpoint(&e.id).await?;
        self.interest.changed().await?;
        Ok(e)
    }

    pub async fn deliveries(&self, endpoint_id: &str, page: &PageRequest) -> Result<Vec<(Delivery, Vec<Attempt>)>> {
        let endpoint_id = self.endpoint(endpoint_id).await?.id;
        let ds = self.store.list_deliveries(&endpoint_id, page).await?;
        let attempts = self.store.attempts_of(&ds.iter().map(|d| d.id.clone()).collect::<Vec<_>>()).await?;
        Ok(ds
            .into_iter()
            .map(|d| {
                let mine = attempts.iter().filter(|a| a.delivery_id == d.id).cloned().collect();
                (d, mine)
            })
            .collect())
    }

    /// Turns one platform event into deliveries for the endpoints that want
    /// it. Idempotent: a record seen twice adds nothing.
    pub async fn ingest(&self, r: &Record) -> Result<usize> {
        // The record's type spares reading the events no endpoint can
        // want — most of a Session's (messages, tool calls, spans), whose
        // payloads are the large ones.
        if r.header("type").is_some_and(|t| !deliverable(t)) {
            return Ok(0);
        }
        let p: Value = serde_json::from_str(&r.payload).map_err(|e| Error::invalid(format!("unreadable event: {e}")))?;
        let Some(notice) = Notice::of(&p) else { return Ok(0) };
        let (ty, env) = (notice.event_type.as_str(), notice.environment_id.as_str());
        let now = self.clock.now_ms();
        let mut n = 0;
        for e in self.interest.endpoints_for(self.store.as_ref(), env).await?.iter().filter(|e| e.wants(ty, env)) {
            let event_id = new_id("wevt");
            let body = notice.envelope(&event_id).to_string();
            let d = Delivery {
                id: DeliveryId::mint(),
                endpoint_id: e.id.clone(),
                source_event_id: r.id.clone(),
                event_id,
                event_type: ty.to_string(),
                body,
                status: DeliveryStatus::Pending,
                attempts: 0,
                next_attempt_ms: now,
                last_response_code: 0,
                created_ms: now,
            };
            if self.store.insert_delivery(&d).await? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Makes one attempt at every delivery due now. Returns how many.
    pub async fn deliver_due(&self) -> Result<usize> {
        let now = self.clock.now_ms();
        let due = self.store.due_deliveries(now, 100).await?;
        let mut n = 0;
        for d in due {
            if !self.store.take_delivery(&d.id, d.next_attempt_ms, now + HOLD_MS).await? {
                continue;
            }
            let Some(e) = self.store.get_endpoint(&d.endpoint_id).await? else {
                // The endpoint was deleted: nothing left to deliver to.
                let failed = Delivery { status: DeliveryStatus::Failed, ..d.clone() };
                let a = Attempt {
                    delivery_id: d.id.clone(),
                    number: d.attempts + 1,
                    at_ms: now,
                    response_code: 0,
                    error: "the endpoint was deleted".into(),
                    duration_ms: 0,
                };
                self.store.record_attempt(&failed, &a).await?;
                continue;
            };
            let started = std::time::Instant::now();
            let out = self.attempt(&e, &d, now).await;
            let number = d.attempts + 1;
            let ok = (200..300).contains(&out.code);
            let next = Delivery {
                attempts: number,
                last_response_code: out.code,
                status: if ok {
                    DeliveryStatus::Delivered
                } else if number >= MAX_ATTEMPTS {
                    DeliveryStatus::Failed
                } else {
                    DeliveryStatus::Pending
                },
                next_attempt_ms: if ok || number >= MAX_ATTEMPTS { now } else { now + RETRY_WAITS_MS[(number - 1) as usize] },
                ..d.clone()
            };
            let a = Attempt {
                delivery_id: d.id.clone(),
                number,
                at_ms: now,
                response_code: out.code,
                error: out.error,
                duration_ms: started.elapsed().as_millis() as i64,
            };
            self.store.record_attempt(&next, &a).await?;
            metrics::counter!("checkfu_webhook_attempts_total", "outcome" => if ok { "delivered" } else { "failed" }).increment(1);
            n += 1;
        }
        Ok(n)
    }

    /// One signed POST, to the address checked just before it.
    async fn attempt(&self, e: &Endpoint, d: &Delivery, now_ms: i64) -> Outcome {
        let fail = |error: String| Outcome { code: 0, error };
        let (u, host, addr) = match self.target(&e.url).await {
            Ok(t) => t,
            Err(x) => return fail(x.message),
        };
        let client = match reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(ATTEMPT_TIMEOUT)
            .resolve(&host, addr)
            .build()
        {
            Ok(c) => c,
            Err(x) => return fail(x.to_string()),
        };
        let signature = checkfu_core::signature::sign(&e.secret, now_ms / 1000, d.body.as_bytes());
        let sent = client
            .post(u)
            .header("content-type", "application/json")
            .header("user-agent", "checkfu-webhooks/1")
            .header("checkfu-signature", signature)
            .body(d.body.clone())
            .send()
            .await;
        match sent {
            Ok(r) => Outcome { code: i64::from(r.status().as_u16()), error: String::new() },
            Err(x) => fail(format!("no response: {x}")),
        }
    }

    /// When the next attempt of a pending delivery is due, for views.
    pub fn next_attempt_at(d: &Delivery) -> String {
        if d.status == DeliveryStatus::Pending { rfc3339(d.next_attempt_ms) } else { String::new() }
    }
}
