//! `fake`: a provider for tests and local development, offered only on an
//! installation started with test providers. It has no remote API: an
//! `automatic` registration makes a hook id here and a check always finds
//! it. Deliveries carry `X-Fake-Delivery`, `X-Fake-Event` (`ping` for a
//! ping) and `X-Fake-Signature`, the hex HMAC-SHA256 of the body.

use super::{Api, Delivery, Failure, Headers, Provider, header, resource_name};
use serde_json::Value;

pub struct Fake;

#[async_trait::async_trait]
impl Provider for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn modes(&self) -> &'static [&'static str] {
        &["automatic", "manual"]
    }
    fn events(&self) -> &'static [&'static str] {
        &["created", "updated", "deleted"]
    }
    fn resource_kinds(&self) -> &'static [&'static str] {
        &["stream"]
    }

    fn check_resource(&self, r: &Value) -> Result<(), String> {
        match (r["kind"].as_str(), r["name"].as_str(), r.as_object().map(|o| o.len())) {
            (Some("stream"), Some(n), Some(2)) if resource_name(n) => Ok(()),
            _ => Err("a fake resource is {kind:\"stream\", name}".into()),
        }
    }

    async fn register(&self, _: &Api, _: &Value, _: &[String], _: &str, _: &str) -> Result<String, Failure> {
        Ok(checkfu_core::id::new_id("fakehook"))
    }

    async fn hook_exists(&self, _: &Api, _: &Value, _: &str) -> Result<bool, Failure> {
        Ok(true)
    }

    async fn unregister(&self, _: &Api, _: &Value, _: &str) -> Result<(), Failure> {
        Ok(())
    }

    fn verify(&self, headers: &Headers, body: &[u8], secret: &str) -> bool {
        header(headers, "x-fake-signature").is_some_and(|sig| checkfu_core::signature::verify_body_mac(secret, body, sig))
    }

    fn delivery(&self, headers: &Headers, _: &Value) -> Result<Delivery, String> {
        let id = header(headers, "x-fake-delivery").ok_or("X-Fake-Delivery is missing")?;
        let event = header(headers, "x-fake-event").ok_or("X-Fake-Event is missing")?;
        if id.len() > 200 || event.len() > 100 {
            return Err("X-Fake-Delivery or X-Fake-Event is too long".into());
        }
        Ok(Delivery { id: id.into(), event_type: event.into(), action: None, ping: event == "ping" })
    }
}
