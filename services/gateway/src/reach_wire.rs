//! Request bodies and response shapes of Reach (api.md §16): Connections,
//! their credentials' read form, and capability status. A credential is
//! taken as raw JSON and checked by the capability gateway, which never
//! quotes a value back; nothing here can hold a secret on the way out.

use crate::views::{doc, opt};
use checkfu_proto::capability::v1 as cap;
use checkfu_proto::governance::v1 as gov;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use utoipa::ToSchema;

#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionEndpoint {
    /// Absolute `https` (or `http` where private targets are allowed), at
    /// most 2,048 bytes, no userinfo. Fixed after creation.
    pub url: String,
}

#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionOwner {
    /// `environment` or `principal`.
    pub kind: String,
    /// The owning Principal: only the caller's own id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConnection {
    pub environment_id: String,
    /// 1–200 characters, unique among the Environment's live Connections.
    pub name: String,
    /// `mcp` (an MCP server's streamable-HTTP endpoint) or `http`.
    pub kind: String,
    pub endpoint: ConnectionEndpoint,
    /// Default `{kind:"environment"}` (needs `manage`); `{kind:"principal",
    /// id:<caller>}` makes a personal Connection (needs `read`).
    #[serde(default)]
    pub owner: Option<ConnectionOwner>,
    /// Written once, never readable.
    #[serde(default)]
    #[schema(value_type = Option<CredentialInput>)]
    pub credential: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateConnection {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// `true` stops every use until `false`.
    #[serde(default)]
    pub disabled: Option<bool>,
    #[serde(default)]
    pub expected_version: Option<i64>,
}

/// A credential, as sent (api.md §16.2). This type documents the body;
/// the capability gateway reads it field by field, so that no error ever
/// quotes a value back.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum CredentialInput {
    /// Sent as `Authorization: Bearer <token>`.
    StaticBearer { token: String },
    /// Sent as `<header>: <value>` (not `host`, `content-*`, `mcp-*`,
    /// `proxy-*` or a hop-by-hop header).
    ApiKey { header: String, value: String },
    /// The capability gateway refreshes the access token when none is valid
    /// for 60 s more, and once after an upstream 401; a returned refresh
    /// token replaces this one.
    #[serde(rename = "oauth2_refresh")]
    OAuth2Refresh {
        token_endpoint: String,
        client_id: String,
        #[serde(default)]
        client_secret: Option<String>,
        /// `client_secret_basic` (default with a secret), `client_secret_post`
        /// or `none` (default without).
        #[serde(default)]
        token_endpoint_auth: Option<String>,
        refresh_token: String,
        #[serde(default)]
        scope: Option<String>,
    },
}

/// The read form of a credential: never the secret.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConnectionCredential {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth: Option<String>,
    /// `ok`, `refresh_failed` or `unreadable` (its key is gone).
    pub state: String,
    pub created_at: String,
    pub rotated_at: Option<String>,
    /// Moves at most once a minute.
    pub last_used_at: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Connection {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub kind: String,
    pub endpoint: ConnectionEndpoint,
    pub owner: ConnectionOwner,
    /// `null` when none is held.
    pub credential: Option<ConnectionCredential>,
    /// `active`, `disabled` or `revoked`.
    pub status: String,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub revoked_at: Option<String>,
    pub version: i64,
}

pub fn connection(c: &cap::Connection) -> Connection {
    Connection {
        id: c.id.clone(),
        environment_id: c.environment_id.clone(),
        name: c.name.clone(),
        description: c.description.clone(),
        metadata: doc(&c.metadata_json),
        kind: c.kind.clone(),
        endpoint: ConnectionEndpoint { url: c.url.clone() },
        owner: ConnectionOwner { kind: c.owner_kind.clone(), id: opt(&c.owner_id) },
        credential: c.credential.as_ref().map(|k| ConnectionCredential {
            kind: k.r#type.clone(),
            header: opt(&k.header),
            token_endpoint: opt(&k.token_endpoint),
            client_id: opt(&k.client_id),
            scope: opt(&k.scope),
            token_endpoint_auth: opt(&k.token_endpoint_auth),
            state: k.state.clone(),
            created_at: k.created_at.clone(),
            rotated_at: opt(&k.rotated_at),
            last_used_at: opt(&k.last_used_at),
        }),
        status: c.status.clone(),
        created_by: c.created_by.clone(),
        created_at: c.created_at.clone(),
        updated_at: c.updated_at.clone(),
        revoked_at: opt(&c.revoked_at),
        version: c.version,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Capability {
    /// `connections`, `credentials`, `tool_sources`, `sandbox_egress`,
    /// `skills`, `files`, `http_connections`, `memory`, `cma_projection`,
    /// `managed_tools`.
    pub name: String,
    pub available: bool,
    /// `null` when available; else `feature_disabled`, `rollout_fenced`,
    /// `dependency_missing` or `not_built`.
    pub reason: Option<String>,
    pub preview: bool,
    #[schema(value_type = Object)]
    pub limits: Value,
}

pub fn capability(c: &cap::Capability) -> Capability {
    Capability { name: c.name.clone(), available: c.available, reason: opt(&c.reason), preview: c.preview, limits: limits(c) }
}

/// The limits as a JSON object: from the typed map, or from a 0.1.0
/// capability gateway's text.
#[allow(deprecated)] // limits_json: a 0.1.0 service's text
fn limits(c: &cap::Capability) -> Value {
    use cap::feature_limit::Value as L;
    if c.limits.is_empty() && !c.limits_json.is_empty() {
        return doc(&c.limits_json);
    }
    let one = |l: &cap::FeatureLimit| match &l.value {
        Some(L::Number(n)) => json!(n),
        Some(L::Text(t)) => json!(t),
        Some(L::Texts(t)) => json!(t.values),
        Some(L::Range(r)) => json!({"min": r.min, "max": r.max}),
        None => Value::Null,
    };
    Value::Object(c.limits.iter().map(|(k, l)| (k.clone(), one(l))).collect())
}

#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VaultGrantee {
    /// `principal`, `group` or `agent_definition`.
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConnectionVault {
    pub environment_id: String,
    pub name: String,
    /// Connections of the same Environment; at most 100.
    pub connection_ids: Vec<String>,
    /// At most 100; agents of the same Environment.
    pub grantees: Vec<VaultGrantee>,
    /// Caller-defined labels: at most 16 pairs, keys 1–64 and values ≤ 512
    /// characters (400 `invalid_metadata`).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateConnectionVault {
    #[serde(default)]
    pub name: Option<String>,
    /// Replaces the list.
    #[serde(default)]
    pub connection_ids: Option<Vec<String>>,
    /// Replaces the list.
    #[serde(default)]
    pub grantees: Option<Vec<VaultGrantee>>,
    /// Replaces the labels whole.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub expected_version: Option<i64>,
}

/// A named access bundle: it stores no credential and grants nothing by
/// itself; saving it compiles one `use_connection` PermissionAssignment per
/// (grantee, Connection), each with `via` naming the vault.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConnectionVault {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub connection_ids: Vec<String>,
    pub grantees: Vec<VaultGrantee>,
    pub metadata: BTreeMap<String, String>,
    /// `active`, or `archived`: no rows, no edits.
    pub status: String,
    pub archived_at: Option<String>,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

pub fn vault(v: &gov::ConnectionVault) -> ConnectionVault {
    ConnectionVault {
        id: v.id.clone(),
        environment_id: v.environment_id.clone(),
        name: v.name.clone(),
        connection_ids: v.connection_ids.clone(),
        grantees: v.grantees.iter().map(|g| VaultGrantee { kind: g.kind.clone(), id: g.id.clone() }).collect(),
        metadata: v.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        status: if v.archived_at.is_empty() { "active" } else { "archived" }.into(),
        archived_at: (!v.archived_at.is_empty()).then(|| v.archived_at.clone()),
        created_by: v.created_by.clone(),
        created_at: v.created_at.clone(),
        updated_at: v.updated_at.clone(),
        version: v.version,
    }
}

#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DefaultConfig {
    /// `true` offers every discovered tool not disabled; `false` only tools
    /// enabled explicitly. Fixed at creation.
    pub enabled: bool,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToolSource {
    pub environment_id: String,
    pub name: String,
    /// An active `mcp` Connection of the Environment the caller holds
    /// `use_connection` on.
    pub connection_id: String,
    pub default_config: DefaultConfig,
    /// `streamable_http` (the default and only one).
    #[serde(default)]
    pub transport: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// 1–600; default 120.
    #[serde(default)]
    pub call_timeout_seconds: Option<i64>,
    /// Default 21,600; 0 = manual syncs only.
    #[serde(default)]
    pub sync_interval_seconds: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateToolSource {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub call_timeout_seconds: Option<i64>,
    #[serde(default)]
    pub sync_interval_seconds: Option<i64>,
    #[serde(default)]
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetTool {
    /// `true`, `false`, or `null` (follow `default_config.enabled`).
    pub enabled: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ToolSourceTool {
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// MCP hints; they never allow a call.
    #[schema(value_type = Object)]
    pub annotations: Value,
    pub enabled: Option<bool>,
    /// In the last good list, named by the tool-name rule, and enabled.
    pub offered: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SyncErrorView {
    /// `authentication_failed`, `unreachable`, `timeout`, `protocol_error`,
    /// `credential.refresh_failed`, `credential.unreadable`.
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ToolSource {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub description: String,
    pub connection_id: String,
    pub transport: String,
    pub default_config: DefaultConfig,
    pub call_timeout_seconds: i64,
    pub sync_interval_seconds: i64,
    pub tools: Vec<ToolSourceTool>,
    /// `ok` or `failed`; null before the first sync ended.
    pub sync_status: Option<String>,
    pub sync_error: Option<SyncErrorView>,
    pub synced_at: Option<String>,
    /// `active` or `archived`.
    pub status: String,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

pub fn tool_source(t: &cap::ToolSource) -> ToolSource {
    ToolSource {
        id: t.id.clone(),
        environment_id: t.environment_id.clone(),
        name: t.name.clone(),
        description: t.description.clone(),
        connection_id: t.connection_id.clone(),
        transport: t.transport.clone(),
        default_config: DefaultConfig { enabled: t.default_enabled },
        call_timeout_seconds: t.call_timeout_seconds,
        sync_interval_seconds: t.sync_interval_seconds,
        tools: t
            .tools
            .iter()
            .map(|x| ToolSourceTool {
                name: x.name.clone(),
                description: x.description.clone(),
                input_schema: doc(&x.input_schema_json),
                annotations: doc(&x.annotations_json),
                enabled: x.enabled,
                offered: x.offered,
            })
            .collect(),
        sync_status: opt(&t.sync_status),
        sync_error: (!t.sync_error_type.is_empty())
            .then(|| SyncErrorView { kind: t.sync_error_type.clone(), message: t.sync_error_message.clone() }),
        synced_at: opt(&t.synced_at),
        status: t.status.clone(),
        created_by: t.created_by.clone(),
        created_at: t.created_at.clone(),
        updated_at: t.updated_at.clone(),
        version: t.version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn limits_render_the_same_typed_or_from_a_0_1_0_services_text() {
        use cap::feature_limit::Value as L;
        let text =
            json!({"max_bytes": 8, "sdk": "anthropic 2.14", "transports": ["streamable_http"], "expires_in_seconds": {"min": 1, "max": 2}});
        let typed = [
            ("max_bytes", L::Number(8)),
            ("sdk", L::Text("anthropic 2.14".into())),
            ("transports", L::Texts(cap::FeatureLimitTexts { values: vec!["streamable_http".into()] })),
            ("expires_in_seconds", L::Range(cap::FeatureLimitRange { min: 1, max: 2 })),
        ];
        let c = cap::Capability {
            limits: typed.into_iter().map(|(k, v)| (k.to_string(), cap::FeatureLimit { value: Some(v) })).collect(),
            ..Default::default()
        };
        assert_eq!(capability(&c).limits, text);
        let old = cap::Capability { limits_json: text.to_string(), ..Default::default() };
        assert_eq!(capability(&old).limits, text);
        assert_eq!(capability(&cap::Capability { limits_json: "{}".into(), ..Default::default() }).limits, json!({}));
    }
}
