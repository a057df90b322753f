//! WebhookSources, their registrations and the provider catalog on the
//! mesh (api.md §18.9). A signing secret travels only in the answer that
//! made it; the sealed one never leaves the scheduler.

use crate::provider_calls::Offered;
use crate::webhook_source::{Registration, SourceRow};
use checkfu_proto::scheduler::v1 as pb;

pub fn registration(r: &Registration, signing_secret: Option<String>) -> pb::ProviderRegistration {
    pb::ProviderRegistration {
        id: r.id.clone(),
        webhook_source_id: r.webhook_source_id.clone(),
        environment_id: r.environment_id.clone(),
        provider: r.provider.clone(),
        mode: r.mode.clone(),
        status: r.status.clone(),
        provider_hook_id: r.provider_hook_id.clone(),
        callback_url: r.callback_url.clone(),
        health: Some(pb::ProviderHealth {
            checked_ms: r.health.checked_ms,
            code: r.health.code.clone(),
            message: r.health.message.clone(),
        }),
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        signing_secret,
    }
}

pub fn source(x: &SourceRow, signing_secret: Option<String>) -> pb::WebhookSource {
    let s = &x.source;
    pb::WebhookSource {
        id: s.id.clone(),
        automation_id: s.automation_id.clone(),
        environment_id: s.environment_id.clone(),
        provider: s.provider.clone(),
        connection_id: s.connection_id.clone(),
        resource_json: s.resource.to_string(),
        events: s.events.clone(),
        registration_id: s.registration_id.clone(),
        created_by: s.created_by.clone(),
        created_ms: s.created_ms,
        registration: Some(registration(&x.registration, signing_secret)),
    }
}

pub fn trigger(o: Offered) -> pb::ProviderTrigger {
    let list = |v: Vec<&str>| v.into_iter().map(String::from).collect();
    pb::ProviderTrigger {
        provider: o.provider.into(),
        modes: list(o.modes),
        events: list(o.events),
        resource_kinds: list(o.resource_kinds),
        available: true,
    }
}
