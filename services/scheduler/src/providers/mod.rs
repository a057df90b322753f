//! Provider adapters (api.md §18.9): what each provider offers (the
//! catalog), how a hook is registered, checked and removed at it — always
//! through the WebhookSource's Connection via the capability gateway, which
//! holds the provider's token — and how its deliveries are verified and
//! read. `github` always; `fake` only on an installation started with test
//! providers, never in production composition.

mod fake;
mod github;

use checkfu_proto::capability::v1 as cap;
use checkfu_proto::capability::v1::capability_gateway_service_client::CapabilityGatewayServiceClient;
use checkfu_proto::transport::Transport;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A delivery's headers, names lowercase.
pub type Headers = HashMap<String, String>;

/// What a delivery says about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// The provider's delivery id: the dedupe identity.
    pub id: String,
    pub event_type: String,
    pub action: Option<String>,
    /// A provider's liveness ping: answered 200, never a firing.
    pub ping: bool,
}

/// A provider call that brought no usable answer: a health `code` and why;
/// `indeterminate` when it may have arrived anyway.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

impl Failure {
    pub fn new(code: &str, message: impl Into<String>) -> Failure {
        Failure { code: code.into(), message: message.into() }
    }

    /// A provider's HTTP refusal: 401/403 `provider_forbidden`, 404
    /// `hook_missing` (when a hook was asked for), else `provider_error`.
    fn of_status(status: u32, hook: bool) -> Failure {
        match status {
            401 | 403 => Failure::new("provider_forbidden", format!("the provider refused the Connection's credential ({status})")),
            404 if hook => Failure::new("hook_missing", "the provider has no such hook any more"),
            _ => Failure::new("provider_error", format!("the provider answered {status}")),
        }
    }
}

/// The capability gateway, for one Connection in one Environment.
pub struct Api {
    pub capability: CapabilityGatewayServiceClient<Transport>,
    pub environment_id: String,
    pub connection_id: String,
}

impl Api {
    /// One call; an HTTP answer (any status) with its JSON body, or why
    /// there was none.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u32, Value), Failure> {
        let req = cap::ProviderApiRequest {
            environment_id: self.environment_id.clone(),
            connection_id: self.connection_id.clone(),
            method: method.into(),
            path: path.into(),
            body_json: body.map(|b| b.to_string()).unwrap_or_default(),
        };
        let a = match self.capability.clone().call_provider_api(req).await {
            Ok(a) => a.into_inner(),
            Err(s) => {
                return Err(Failure::new("provider_unreachable", format!("the capability gateway could not be asked: {}", s.message())));
            }
        };
        match a.outcome.as_str() {
            "answered" => Ok((a.status, serde_json::from_str(&a.body_json).unwrap_or(Value::Null))),
            _ => Err(Failure::new(&a.code.replace('.', "_"), a.message)),
        }
    }
}

/// One provider's adapter.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    fn name(&self) -> &'static str;
    /// ⊆ `automatic`, `polling`, `manual`.
    fn modes(&self) -> &'static [&'static str];
    fn events(&self) -> &'static [&'static str];
    fn resource_kinds(&self) -> &'static [&'static str];
    /// Checks a resource as written; why it is refused.
    fn check_resource(&self, resource: &Value) -> Result<(), String>;
    /// Registers a hook sending `events` on `resource` to `callback`,
    /// signed with `secret`; the provider's hook id.
    async fn register(&self, api: &Api, resource: &Value, events: &[String], callback: &str, secret: &str) -> Result<String, Failure>;
    /// Whether the hook is still there (`Err` when the provider could not
    /// say).
    async fn hook_exists(&self, api: &Api, resource: &Value, hook_id: &str) -> Result<bool, Failure>;
    /// Removes the hook; one already gone counts as removed.
    async fn unregister(&self, api: &Api, resource: &Value, hook_id: &str) -> Result<(), Failure>;
    /// Whether the delivery is signed with `secret`.
    fn verify(&self, headers: &Headers, body: &[u8], secret: &str) -> bool;
    /// The delivery's id, type and action, from its headers and body; why
    /// they are unreadable.
    fn delivery(&self, headers: &Headers, body: &Value) -> Result<Delivery, String>;
}

/// The providers this installation offers.
#[derive(Clone)]
pub struct Providers(Vec<Arc<dyn Provider>>);

impl Providers {
    /// `github`; and `fake` when test providers are enabled.
    pub fn new(test_providers: bool) -> Providers {
        let mut list: Vec<Arc<dyn Provider>> = vec![Arc::new(github::GitHub)];
        if test_providers {
            list.push(Arc::new(fake::Fake));
        }
        Providers(list)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.0.iter().find(|p| p.name() == name)
    }

    pub fn all(&self) -> &[Arc<dyn Provider>] {
        &self.0
    }
}

/// The header's value, if the delivery has it non-empty.
fn header<'a>(h: &'a Headers, name: &str) -> Option<&'a str> {
    h.get(name).map(String::as_str).filter(|v| !v.trim().is_empty())
}

/// A name a provider's resource part may have: 1–100 of letters, digits,
/// `-`, `_` and `.`, not `.` or `..`.
fn resource_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 100 && s != "." && s != ".." && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_is_offered_only_with_test_providers() {
        let names = |p: Providers| p.all().iter().map(|p| p.name()).collect::<Vec<_>>();
        assert_eq!(names(Providers::new(false)), ["github"]);
        assert_eq!(names(Providers::new(true)), ["github", "fake"]);
    }

    #[test]
    fn statuses_become_health_codes() {
        assert_eq!(Failure::of_status(404, true).code, "hook_missing");
        assert_eq!(Failure::of_status(404, false).code, "provider_error", "a missing repository is not a missing hook");
        assert_eq!(Failure::of_status(403, true).code, "provider_forbidden");
        assert_eq!(Failure::of_status(500, true).code, "provider_error");
        assert!(resource_name("checkfu.io") && !resource_name("..") && !resource_name("a/b") && !resource_name(""));
    }
}
