//! The constraints the server enforces, written into the OpenAPI document.
//!
//! The handlers' annotations give the document its shape; this adds what a
//! request must also satisfy to be accepted — id patterns per resource,
//! the catalogues an enum field takes, ranges and lengths — so that a
//! request the document calls valid is one the server accepts (checked by
//! schemathesis in CI). Rules are keyed by what the server keys them by:
//! a path's collection for `{id}`, a parameter's or field's name elsewhere.

use checkfu_core::events::SUBSCRIBABLE;
use checkfu_core::id::{AgentId, EnvironmentId, GroupId, PrincipalId, TypedId};
use serde_json::{Value, json};

/// `<prefix>_<ULID in lowercase>` (`checkfu_core::id::is_valid`).
fn id(prefix: &str) -> Value {
    json!({"type": "string", "pattern": format!("^{prefix}_[0-9a-z]{{26}}$")})
}

/// Any prefixed id (a resource of any kind).
fn any_id() -> Value {
    json!({"type": "string", "pattern": "^[a-z]{2,5}_[0-9a-z]{26}$"})
}

fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

/// The prefix of `{id}` under each collection.
const COLLECTIONS: &[(&str, &str)] = &[
    ("principals", "prin"),
    ("api-keys", "key"),
    ("groups", "grp"),
    ("environments", "env"),
    ("permission-assignments", "pa"),
    ("action-policies", "apol"),
    ("action-approvals", "aapr"),
    ("standing-approvals", "sapr"),
    ("budgets", "bud"),
    ("webhook-endpoints", "whep"),
    ("agents", "agt"),
    ("sandbox-profiles", "sbp"),
    ("model-routing-profiles", "mrp"),
    ("evaluator-qualifications", "evq"),
    ("agent-deployments", "dep"),
    ("sessions", "sess"),
    ("runs", "run"),
    ("runners", "rnr"),
    ("connections", "conn"),
    ("connection-vaults", "cvlt"),
    ("tool-sources", "tsrc"),
    ("files", "file"),
    ("skills", "skl"),
    ("automations", "auto"),
    ("automation-firings", "afire"),
    ("automation-graphs", "agph"),
    ("memory-stores", "mstr"),
    ("memory-proposals", "mprop"),
    ("dreams", "drm"),
    ("outcomes", "outc"),
    ("skill-proposals", "skprop"),
    ("webhook-sources", "whsrc"),
    ("provider-webhook-registrations", "pwreg"),
];

/// A memory document's path (`checkfu_memory::model::check_path`).
fn memory_path() -> Value {
    // Stricter than the server (a segment may not start with `.` here), so
    // that `.` and `..` need no lookahead.
    json!({"type": "string", "maxLength": 1024, "pattern": "^(/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$"})
}

/// A lowercase hex SHA-256.
fn sha256() -> Value {
    json!({"type": "string", "pattern": "^[0-9a-f]{64}$"})
}

/// A graph document's outline (what saving checks; planning checks the rest).
fn graph_document() -> Value {
    json!({"type": "object", "additionalProperties": false,
    "required": ["name", "environment_id", "service_principal_id", "nodes", "edges"],
    "properties": {
        "name": name(), "environment_id": id("env"), "service_principal_id": id("prin"),
        // A node's other fields depend on its kind (planning checks them).
        "nodes": {"type": "array", "maxItems": 100, "items": {"type": "object", "required": ["kind", "id"], "additionalProperties": true,
            "properties": {"kind": {"type": "string"}, "id": {"type": "string", "minLength": 1, "maxLength": 128}}}},
        "edges": {"type": "array", "maxItems": 400, "items": {"type": "object", "additionalProperties": false, "required": ["kind", "from"],
            "properties": {"kind": {"type": "string"}, "from": {"type": "string"}, "to": {"type": ["string", "null"]}}}}
    }})
}

/// A Connection's URL: `https`, a public host, at most 2,048 bytes, no
/// userinfo (private hosts only where the installation allows them).
fn https_url() -> Value {
    json!({"type": "string", "format": "uri", "maxLength": 2048,
        "pattern": "^https://[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+(:[1-9][0-9]{0,3})?(/([A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*)?(\\?([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?$"})
}

/// A credential's secret: 1–8,192 bytes (2,048 characters of any width
/// always fit), no control characters.
fn secret() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 2048, "pattern": "^[^\\x00-\\x1f\\x7f]+$"})
}

/// A `page` token (`checkfu_core::page`): `p1` and hex.
fn page_token() -> Value {
    json!({"type": "string", "pattern": "^p1([0-9a-f]{2}){1,64}$"})
}

const PERMISSIONS: &[&str] = &["admin", "manage", "invoke", "act_as", "use_connection", "use_agent", "approve", "read", "write"];

/// Globs over [`SUBSCRIBABLE`] the document offers (others are accepted too).
const SUBSCRIBABLE_GLOBS: &[&str] = &["*", "session.*", "session.status_*", "run.*", "action_approval.*", "agent.*"];

/// A name: 1 to 200 characters, no control characters, not only spaces
/// (`check_name` in governance and the catalog).
fn name() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 200,
        "pattern": "^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$"})
}

const SUBJECTS_POLICY: &[&str] = &["principal", "group", "agent_definition", "agent_installation", "surface_scope", "session"];

/// A routing candidate: the scripted model names no endpoint.
fn candidate() -> Value {
    let model = json!({"type": "string", "minLength": 1, "maxLength": 200, "pattern": "\\S"});
    let effort = one_of(&["minimal", "low", "medium", "high", "max"]);
    json!({"oneOf": [
        {"type": "object", "required": ["provider", "model"], "additionalProperties": false, "properties": {
            "provider": {"type": "string", "enum": ["scripted"]}, "model": model, "effort": effort, "connection_id": id("conn")}},
        {"type": "object", "required": ["provider", "model"], "additionalProperties": false, "properties": {
            "provider": one_of(&["anthropic", "openai"]), "model": model, "effort": effort, "connection_id": id("conn"),
            "endpoint": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}}},
    ]})
}

/// What each resource kind's id looks like (the typed id's prefix, for
/// kinds that have one).
const RESOURCE_PREFIXES: &[(&str, &str)] = &[
    ("environment", EnvironmentId::PREFIX),
    ("agent", AgentId::PREFIX),
    ("connection", "conn"),
    ("memory_store", "mstr"),
    ("principal", PrincipalId::PREFIX),
    ("group", GroupId::PREFIX),
];

/// `{kind, id}` where the id's form follows the kind (`installation` is `*`).
fn by_kind(kinds: &[(&str, &str)]) -> Value {
    let mut variants: Vec<Value> = kinds
        .iter()
        .map(|(k, p)| {
            json!({"type": "object", "required": ["kind", "id"], "additionalProperties": false,
                "properties": {"kind": {"type": "string", "enum": [k]}, "id": id(p)}})
        })
        .collect();
    if kinds == RESOURCE_PREFIXES {
        variants.push(json!({"type": "object", "required": ["kind", "id"], "additionalProperties": false,
            "properties": {"kind": {"type": "string", "enum": ["installation"]}, "id": {"type": "string", "enum": ["*"]}}}));
    }
    json!({"oneOf": variants})
}

const BUILTIN_TOOLS: &[&str] = checkfu_core::tools::BUILTIN;

/// A tool declaration (`sessions::model::ToolDecl`).
fn tool() -> Value {
    json!({"oneOf": [
        {"type": "object", "required": ["type", "name"], "additionalProperties": false,
            "properties": {"type": {"type": "string", "enum": ["builtin"]}, "name": one_of(BUILTIN_TOOLS)}},
        {"type": "object", "required": ["type", "name"], "additionalProperties": false,
            "properties": {"type": {"type": "string", "enum": ["custom"]}, "name": tool_name(),
                "description": {"type": "string", "maxLength": 4096}, "input_schema": {"type": "object"},
                "read_only": {"type": "boolean"}, "destructive": {"type": "boolean"}}},
        {"type": "object", "required": ["type", "tool_source_id", "tools"], "additionalProperties": false,
            "properties": {"type": {"type": "string", "enum": ["tool_source"]}, "tool_source_id": id("tsrc"),
                "tools": {"type": "array", "maxItems": 256, "items": tool_name()}}},
    ]})
}

/// An Automation's trigger (`scheduler::triggers`, api.md §12.3, §18.10).
fn trigger() -> Value {
    let filter = json!({"type": "object", "description": "{kind: \"predicates\", predicates: [{kind, pointer, value}]} (1–32)"});
    json!({"oneOf": [
        {"type": "object", "required": ["kind", "cron", "timezone"], "additionalProperties": false,
            "properties": {"kind": {"type": "string", "enum": ["schedule"]}, "cron": {"type": "string"}, "timezone": {"type": "string"}}},
        {"type": "object", "required": ["kind", "at"], "additionalProperties": false,
            "properties": {"kind": {"type": "string", "enum": ["schedule_once"]}, "at": {"type": "string", "format": "date-time"}}},
        {"type": "object", "required": ["kind", "dedupe_key"], "additionalProperties": false,
            "properties": {"kind": {"type": "string", "enum": ["webhook"]}, "dedupe_key": {"type": "string", "maxLength": 1024},
                "admission_filter": filter}},
        {"type": "object", "required": ["kind", "event_types"], "additionalProperties": false,
            "properties": {"kind": {"type": "string", "enum": ["subscription"]},
                "event_types": {"type": "array", "minItems": 1, "maxItems": 20, "items": {"type": "string"},
                    "description": "Webhook event types (api.md §8) or <family>.*"},
                "resource_id": {"type": "string", "maxLength": 200}, "admission_filter": filter}},
    ]})
}

/// An Automation's Agent target (`scheduler::model::AgentTarget`).
fn agent_target() -> Value {
    json!({"type": "object", "required": ["kind", "agent_deployment_id", "prompt"], "additionalProperties": false, "properties": {
        "kind": {"type": "string", "enum": ["agent"]},
        "agent_deployment_id": id("dep"),
        "deployment_revision": {"type": "integer", "minimum": 1, "maximum": i64::from(i32::MAX)},
        "prompt": {"type": "string", "maxLength": 16384},
        "budget": {"type": "object", "required": ["limit"], "additionalProperties": false,
            "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 1_000_000_000_000i64}, "metric": {"type": "string", "enum": ["model_spend", "model_tokens"]}}},
        "session_target": {"type": "object", "required": ["mode"], "additionalProperties": false, "properties": {
            "mode": {"type": "string", "enum": ["start_new", "continue_selected"]},
            "session": {"description": "The Session a continue_selected target sends its prompt into (api.md §18.4); required then.", "allOf": [id("sess")]}}},
        "input": {"type": "object", "additionalProperties": false, "properties": {"delivery_screen": delivery_screen()}},
    }})
}

/// A delivery screen (`checkfu_core::delivery_screen`, api.md §18.8):
/// instructions are at most 16 KiB of UTF-8, so 4,096 characters always fit.
fn delivery_screen() -> Value {
    json!({"type": "object", "required": ["model_routing_profile_id", "instructions"], "additionalProperties": false,
        "description": "Every agent.message of each child is held for this screen (api.md §18.8); not with a continue_selected session_target.",
        "properties": {
            "model_routing_profile_id": id("mrp"),
            "tier": {"type": "string", "enum": checkfu_core::delivery_screen::TIERS},
            "instructions": {"type": "string", "minLength": 1, "maxLength": 4096, "pattern": "\\S"},
            "on_failure": {"type": "string", "enum": ["fail_closed", "fail_open"]}}})
}

/// A tool name (`sessions::model`): 1-64 of a-z, 0-9, `_`, `-`.
fn tool_name() -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"})
}

/// Caller-defined labels (`sessions::model::check_metadata`).
fn metadata() -> Value {
    json!({"type": "object", "maxProperties": 16, "propertyNames": {"minLength": 1, "maxLength": 64},
        "additionalProperties": {"type": "string", "maxLength": 512}})
}

/// An agent's draft definition (`sessions::model::AgentDefinition`).
fn draft() -> Value {
    let allowed = json!({"type": "object", "additionalProperties": false,
        "properties": {"allowed": {"type": "array", "maxItems": 256, "items": tool_name()}}});
    let allowed_skills = json!({"type": "object", "additionalProperties": false,
        "properties": {"allowed": {"type": "array", "maxItems": 500, "items": id("skl")}}});
    // `{skill_id, version?}`, or the bare id (`sessions::model::SkillRef`).
    let skill = json!({"oneOf": [id("skl"), {"type": "object", "required": ["skill_id"], "additionalProperties": false,
        "properties": {"skill_id": id("skl"), "version": {"type": "integer", "minimum": 1}}}]});
    json!({"type": "object", "additionalProperties": false, "properties": {
        "instructions": {"type": "string", "maxLength": 65536},
        "model": {"type": "object", "additionalProperties": false, "properties": {"routing_profile_id": id("mrp"),
            "label": {"type": "string", "minLength": 1, "maxLength": 256, "description": "The model as its author named it; the route decides what runs."}}},
        "description": {"type": "string", "maxLength": 2048},
        "metadata": metadata(),
        "tools": {"type": "array", "maxItems": 128, "items": tool()},
        "skills": {"type": "array", "maxItems": 500, "items": skill},
        "session_variable": {"type": "object", "additionalProperties": false, "properties": {"tools": allowed, "skills": allowed_skills}},
        "multiagent": {"type": "object"},
    }})
}

/// A sandbox's network (`sessions::model::Network`).
fn network() -> Value {
    let host = "^(\\*\\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,61})?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61})?){0,8}$";
    json!({"type": "object", "additionalProperties": false, "properties": {
        "allowed_hosts": {"type": "array", "maxItems": 200, "items": {"type": "string", "pattern": host, "maxLength": 253},
            "description": "Host names, or `*.suffix` for subdomains. `[\"*\"]` alone allows every public host where the installation allows it (`allow_unrestricted_network`)."},
        "allow_package_managers": {"type": "boolean"},
        "allow_mcp_servers": {"type": "boolean", "description": "Adds no host: needs allowed hosts (or package managers) too."},
    },
    // allow_mcp_servers alone reaches nothing, so it is refused alone.
    "anyOf": [
        {"not": {"required": ["allow_mcp_servers"]}},
        {"properties": {"allow_mcp_servers": {"const": false}}},
        {"required": ["allowed_hosts"], "properties": {"allowed_hosts": {"minItems": 1}}},
        {"required": ["allow_package_managers"], "properties": {"allow_package_managers": {"const": true}}},
    ]})
}

/// A sandbox's resources (`sessions::model::Resources`).
fn resources() -> Value {
    json!({"type": "object", "additionalProperties": false, "properties": {
        "cpu_millis": {"type": "integer", "minimum": 100, "maximum": 64000},
        "memory_mib": {"type": "integer", "minimum": 128, "maximum": 262_144},
        "disk_mib": {"type": "integer", "minimum": 256, "maximum": 1_048_576},
    }})
}

/// `{kind, id}` with the kinds the field takes.
fn reference(kinds: &[&str], id: Value) -> Value {
    json!({"type": "object", "required": ["kind", "id"], "additionalProperties": false,
        "properties": {"kind": one_of(kinds), "id": id}})
}

/// An ActionPolicy's rules (`governance::policy::parse_rules`).
fn rules() -> Value {
    let glob = json!({"type": "string", "minLength": 1, "maxLength": 200});
    let mut subjects = SUBJECTS_POLICY.to_vec();
    subjects.push("*");
    let matcher = |kind: Value| {
        json!({"type": "object", "required": ["kind"], "additionalProperties": false,
            "properties": {"kind": kind, "id_glob": glob}})
    };
    json!({"type": "array", "maxItems": 200, "items": {
        "type": "object", "required": ["subject", "resource", "disposition"], "additionalProperties": false,
        "properties": {
            "id": {"type": "string", "description": "Assigned by the server; accepted and replaced."},
            "subject": matcher(one_of(&subjects)),
            "resource": matcher(json!({"type": "string", "minLength": 1, "maxLength": 64})),
            "permission_glob": glob,
            "disposition": one_of(&["allow", "require_approval", "deny"]),
        }
    }})
}

/// Query parameters by name (and, for some, the path they are on).
fn query_rule(path: &str, name: &str) -> Option<Value> {
    Some(match name {
        "limit" if path.ends_with("/events") => json!({"type": "integer", "minimum": 1, "maximum": 1000}),
        "limit" => json!({"type": "integer", "minimum": 1, "maximum": 100}),
        // An events page is a seq, as a token.
        "page" if path.ends_with("/events") || path.ends_with("/versions") || path.ends_with("/revisions") => {
            json!({"type": "string", "pattern": "^p1(3[0-9]){1,18}$"})
        }
        "page" => page_token(),
        "after_seq" => json!({"type": "integer", "minimum": 0, "maximum": i64::MAX}),
        // A content window (`.../content`): 0 reads from the start, and a
        // length of 0 (or none) is the default 8 MiB.
        "offset" => json!({"type": "integer", "minimum": 0, "maximum": i64::MAX}),
        "length" => json!({"type": "integer", "minimum": 0, "maximum": 8 * 1024 * 1024}),
        "environment_id" => id("env"),
        "automation_id" => id("auto"),
        "agent_deployment_id" => id("dep"),
        "session_id" => id("sess"),
        "thread_id" => id("sthr"),
        "actor_id" | "subject_id" => any_id(),
        "resource_id" => json!({"type": "string", "pattern": "^(\\*|[a-z]{2,5}_[0-9a-z]{26})$"}),
        "permission" => one_of(PERMISSIONS),
        "status" if path.starts_with("/v1/sessions") => one_of(&["idle", "running", "rescheduling", "terminated"]),
        "status" if path.starts_with("/v1/action-approvals") => one_of(&["pending", "approved", "denied", "expired"]),
        "status" if path.starts_with("/v1/connections") => one_of(&["active", "disabled", "revoked"]),
        "status" if path.starts_with("/v1/automations") => one_of(&["active", "paused"]),
        "source" if path.starts_with("/v1/automations") => one_of(&["manual", "schedule", "webhook", "subscription"]),
        "state" if path.starts_with("/v1/automations") => one_of(&["running", "succeeded", "failed", "skipped"]),
        "kind" if path.starts_with("/v1/connections") => one_of(&["mcp", "http"]),
        "status" if path.starts_with("/v1/memory-proposals") => one_of(&["open", "approved", "rejected"]),
        "status" if path.starts_with("/v1/skill-proposals") => one_of(&["open", "adopted", "rejected"]),
        "status" if path.starts_with("/v1/provider-webhook-registrations") => one_of(&["pending", "active", "degraded", "revoked"]),
        "status" if path.starts_with("/v1/dreams") => one_of(&["pending", "running", "completed", "failed", "canceled"]),
        "memory_store_id" => id("mstr"),
        "owner_kind" => one_of(&["environment", "agent_definition", "principal", "session"]),
        "owner_id" => any_id(),
        "path" if path.starts_with("/v1/memory-stores") => memory_path(),
        "path_prefix" => json!({"type": "string", "maxLength": 1024, "pattern": "^(/([A-Za-z0-9_-][A-Za-z0-9._-]*/?)*)?$"}),
        "expected_sha256" => sha256(),
        "at_version" => json!({"type": "integer", "minimum": 0, "maximum": i64::from(i32::MAX)}),
        "event_deltas" => {
            json!({"type": "string", "pattern": "^(agent\\.message|agent\\.thinking)(,(agent\\.message|agent\\.thinking))*$"})
        }
        "types[]" => {
            json!({"type": "array", "maxItems": 100, "items": {"type": "string", "pattern": "^[a-z_]+(\\.[a-z_]+)+$", "maxLength": 64}})
        }
        _ => return None,
    })
}

/// Fields of request bodies by name.
fn body_rule(schema: &str, field: &str) -> Option<Value> {
    Some(match (schema, field) {
        (_, "environment_id") => id("env"),
        (_, "agent_id") => id("agt"),
        (_, "agent_deployment_id") => id("dep"),
        (_, "principal_id") | (_, "authored_by") => id("prin"),
        (_, "model_routing_profile_id") => id("mrp"),
        (_, "sandbox_profile_id") => id("sbp"),
        (_, "connection_id") => id("conn"),
        (_, "agent_version" | "sandbox_profile_revision" | "expected_version") => json!({"type": "integer", "minimum": 1}),
        (_, "name") => name(),
        ("CreatePrincipal", "kind") => one_of(&["human", "service"]),
        ("CreateGraph", "created_by_principal_id") => id("prin"),
        ("CreateDream", "memory_store_id") => id("mstr"),
        ("CreateDream", "session_ids") => json!({"type": "array", "maxItems": 100, "uniqueItems": true, "items": id("sess")}),
        ("CreateDream", "instructions") => json!({"type": "string", "maxLength": 16 * 1024}),
        ("CreateGraph" | "ReviseGraph", "document") => graph_document(),
        ("PlanGraph" | "ApplyGraph" | "NodeTest", "revision") => json!({"type": "integer", "minimum": 1, "maximum": i64::from(i32::MAX)}),
        ("NodeTest", "mode") => one_of(&["prompt_preview"]),
        ("CreateRunnerPairing", "pool") => json!({"type": "string", "pattern": "^[a-z0-9._:-]{1,100}$"}),
        ("CreateRunnerPairing", "ttl_seconds") => json!({"type": "integer", "minimum": 1, "maximum": 900}),
        ("EvaluateAction", "subject") => reference(SUBJECTS_POLICY, any_id()),
        ("CreateAssignment", "subject") => by_kind(&[("principal", "prin"), ("group", "grp"), ("agent_definition", "agt")]),
        ("CreateAssignment", "resource") => by_kind(RESOURCE_PREFIXES),
        ("EvaluateAction", "resource") => {
            reference(&["tool", "connection", "agent"], json!({"type": "string", "minLength": 1, "maxLength": 200}))
        }
        ("EvaluateAction", "tool") => tool(),
        ("CreateEvaluatorQualification", "provider") => one_of(&["anthropic", "openai", "scripted"]),
        ("CreateEvaluatorQualification", "model") => json!({"type": "string", "minLength": 1, "maxLength": 200, "pattern": "\\S"}),
        ("CreateEvaluatorQualification", "purpose") => one_of(&["decision", "delivery_screen"]),
        ("CreateEvaluatorQualification", "evidence") => json!({"type": "string", "minLength": 1, "maxLength": 4000, "pattern": "\\S"}),
        ("CreateEvaluatorQualification", "reviewed_at" | "expires_at") => json!({"type": "string", "format": "date-time"}),
        ("CreateRoutingProfile", "candidates") => json!({"type": "array", "minItems": 1, "maxItems": 8, "items": candidate()}),
        ("CreateSandboxProfile" | "PublishSandboxRevision", "image") => {
            json!({"type": "string", "minLength": 1, "maxLength": 512, "pattern": "\\S"})
        }
        ("CreateSandboxProfile" | "PublishSandboxRevision", "packages") => {
            json!({"maxItems": 256, "items": {"type": "string", "minLength": 1, "maxLength": 200}})
        }
        ("CreateSandboxProfile" | "PublishSandboxRevision", "retention_days") => json!({"type": "integer", "minimum": 1, "maximum": 30}),
        ("CreateSandboxProfile" | "PublishSandboxRevision", "network") => network(),
        ("CreateSandboxProfile" | "PublishSandboxRevision", "description") => json!({"type": "string", "maxLength": 2048}),
        ("CreateSandboxProfile" | "PublishSandboxRevision", "metadata") => metadata(),
        ("CreateSandboxProfile" | "PublishSandboxRevision", "resources") => resources(),
        ("CreateAgent" | "UpdateAgent", "draft") => draft(),
        ("CreateWebhookEndpoint" | "UpdateWebhookEndpoint", "url") => json!({"type": "string", "format": "uri", "maxLength": 2048,
            "pattern": "^https?://[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(:[1-9][0-9]{0,3})?(/[!-~]*)?$"}),
        ("CreateWebhookEndpoint" | "UpdateWebhookEndpoint", "event_types") => {
            json!({"type": "array", "minItems": 1, "maxItems": 50, "items": one_of(&[SUBSCRIBABLE, SUBSCRIBABLE_GLOBS].concat())})
        }
        ("CreateActionPolicy" | "UpdateActionPolicy", "rules") => rules(),
        (_, "metric") => one_of(&["model_spend", "model_tokens"]),
        ("RespondToApproval", "decision") => one_of(&["approve", "deny"]),
        ("StandingRequest", "ttl_seconds") => json!({"type": "integer", "minimum": 1, "maximum": 2_592_000}),
        ("CreateAssignment", "permission") | ("EvaluateAction", "permission") => one_of(PERMISSIONS),
        ("InputEvent", "type") => {
            one_of(&["user.message", "user.interrupt", "user.tool_confirmation", "user.custom_tool_result", "user.define_outcome"])
        }
        ("NewBudget" | "CreateBudget" | "UpdateBudget", "limit") => {
            json!({"type": "integer", "minimum": 1, "maximum": 1_000_000_000_000i64})
        }
        ("BudgetScope", "kind") => one_of(&["session"]),
        ("CreateSession" | "UpdateSelection", "skills") => json!({"maxItems": 500, "items": id("skl")}),
        ("CreateSession", "resources") => json!({"maxItems": 20, "items": {"oneOf": [
            {"type": "object", "required": ["type", "file_id"], "additionalProperties": false,
                "properties": {"type": {"type": "string", "enum": ["file"]}, "file_id": id("file")}},
            {"type": "object", "required": ["type", "memory_store_id", "access"], "additionalProperties": false,
                "properties": {"type": {"type": "string", "enum": ["memory_store"]}, "memory_store_id": id("mstr"),
                    "access": one_of(&["read_only", "read_write"]), "mount_name": {"type": "string", "pattern": "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"}}}]}}),
        ("BundleFile", "encoding") => one_of(&["utf8", "base64"]),
        ("CreateWebhookSource", "automation_id") => id("auto"),
        ("CreateWebhookSource", "provider") => json!({"type": "string", "minLength": 1, "maxLength": 64}),
        ("CreateWebhookSource", "events") => {
            json!({"type": "array", "minItems": 1, "maxItems": 32, "items": {"type": "string", "minLength": 1, "maxLength": 100}})
        }
        ("CreateWebhookSource", "mode") => one_of(&["automatic", "polling", "manual"]),
        ("CreateAutomation" | "UpdateAutomation", "triggers") => json!({"type": "array", "maxItems": 3, "items": trigger()}),
        ("CreateAutomation" | "UpdateAutomation", "trigger") => json!({"oneOf": [{"type": "null"}, trigger()]}),
        ("CreateAutomation" | "UpdateAutomation", "ingest_secret") => json!({"type": "string", "minLength": 32, "maxLength": 256}),
        ("CreateAutomation" | "UpdateAutomation", "target") => agent_target(),
        ("CreateAutomation" | "UpdateAutomation", "metadata") => json!({"type": "object", "maxProperties": 64}),
        ("CreateAutomation", "service_principal_id") => id("prin"),
        ("PauseAutomation", "note") => json!({"type": "string", "maxLength": 1000}),
        ("UploadForm", "expires_in_seconds") => json!({"type": "integer", "minimum": 3_600, "maximum": 31_536_000}),
        ("BundleFile", "path") => json!({"type": "string", "minLength": 1, "maxLength": 512}),
        ("CreateSkill" | "CreateSkillVersion", "files") => json!({"minItems": 1, "maxItems": 512}),
        ("CreateConnection", "kind") => one_of(&["mcp", "http"]),
        ("CreateConnection" | "UpdateConnection", "description") => json!({"type": "string", "maxLength": 2000}),
        ("ConnectionEndpoint", "url") | ("CredentialInput", "token_endpoint") => https_url(),
        ("ConnectionOwner", "kind") => one_of(&["environment", "principal"]),
        ("CreateToolSource", "transport") => one_of(&["streamable_http"]),
        ("CreateToolSource" | "UpdateToolSource", "call_timeout_seconds") => json!({"type": "integer", "minimum": 1, "maximum": 600}),
        ("CreateToolSource" | "UpdateToolSource", "sync_interval_seconds") => {
            json!({"oneOf": [{"type": "integer", "enum": [0]}, {"type": "integer", "minimum": 60, "maximum": 2_592_000}]})
        }
        ("CreateToolSource" | "UpdateToolSource", "description") => json!({"type": "string", "maxLength": 2000}),
        ("CreateConnectionVault" | "UpdateConnectionVault", "connection_ids") => {
            json!({"type": "array", "maxItems": 100, "items": id("conn")})
        }
        ("CreateConnectionVault" | "UpdateConnectionVault", "grantees") => {
            json!({"type": "array", "maxItems": 100, "items": by_kind(&[("principal", "prin"), ("group", "grp"), ("agent_definition", "agt")])})
        }
        ("ConnectionOwner", "id") => id("prin"),
        ("CredentialInput", "token" | "value" | "refresh_token" | "client_secret") => secret(),
        ("CredentialInput", "header") => {
            json!({"type": "string", "pattern": "^(?![Hh][Oo][Ss][Tt]$|[Cc][Oo][Nn][Tt][Ee][Nn][Tt]-|[Mm][Cc][Pp]-|[Pp][Rr][Oo][Xx][Yy]-|[Cc]onnection$|[Tt]ransfer-[Ee]ncoding$|[Tt][Ee]$|[Uu]pgrade$|[Kk]eep-[Aa]live$|[Tt]railer$|[Aa]ccept$)[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"})
        }
        ("CredentialInput", "client_id" | "scope") => {
            json!({"type": "string", "minLength": 1, "maxLength": 1024, "pattern": "^[^\\x00-\\x1f\\x7f]*$"})
        }
        ("CredentialInput", "token_endpoint_auth") => one_of(&["client_secret_basic", "client_secret_post", "none"]),
        ("BudgetScope", "id") => id("sess"),
        ("CreateMemoryStore" | "UpdateMemoryStore", "description") => json!({"type": "string", "maxLength": 1000}),
        ("CreateMemoryStore" | "UpdateMemoryStore", "metadata") => json!({"type": "object", "maxProperties": 64}),
        ("MemoryOwner", "kind") => one_of(&["environment", "agent_definition", "principal", "session"]),
        ("MemoryOwner", "id") => any_id(),
        ("WriteMemoryDocument", "path") => memory_path(),
        ("WriteMemoryDocument", "content") => json!({"type": "string", "maxLength": 65_536}),
        ("WriteMemoryDocument", "expected_sha256") => json!({"oneOf": [{"type": "null"}, sha256()]}),
        ("CreateMemoryProposal", "memory_store_id") => id("mstr"),
        ("CreateMemoryProposal", "changes") => json!({"type": "array", "minItems": 1, "maxItems": 20, "items": {"type": "object",
            "required": ["path", "content", "expected_sha256"], "additionalProperties": false, "properties": {
            "path": memory_path(), "content": {"type": ["string", "null"], "maxLength": 4096},
            "expected_sha256": {"oneOf": [{"type": "null"}, sha256()]}}}}),
        ("CreateMemoryProposal", "rationale") | ("DecideMemoryProposal", "note") => json!({"type": "string", "maxLength": 4096}),
        _ => return None,
    })
}

/// Fields the server requires although the body type makes them optional.
fn required_fields(schema: &str) -> Option<&'static [&'static str]> {
    match schema {
        // Policies apply per Environment: the dry run names one.
        "EvaluateAction" => Some(&["environment_id", "subject", "resource", "permission", "tool"]),
        // No blind writes: `null` or a sha, never left out.
        "WriteMemoryDocument" => Some(&["path", "content", "expected_sha256"]),
        _ => None,
    }
}

/// Adds the server's constraints to `doc` (the generated document, as JSON).
pub fn constrain(doc: &mut Value) {
    let paths: Vec<String> = doc["paths"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default();
    for path in paths {
        let collection = path.trim_start_matches("/v1/").split('/').next().unwrap_or_default().to_string();
        let Some(ops) = doc["paths"][&path].as_object_mut() else { continue };
        for op in ops.values_mut() {
            let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else { continue };
            for p in params {
                let name = p["name"].as_str().unwrap_or_default().to_string();
                let rule = match (p["in"].as_str(), name.as_str()) {
                    (Some("path"), "id") => COLLECTIONS.iter().find(|(c, _)| *c == collection).map(|(_, prefix)| id(prefix)),
                    (Some("path"), "principal_id") => Some(id("prin")),
                    (Some("path"), "n") => Some(json!({"type": "integer", "minimum": 1, "maximum": i64::from(i32::MAX)})),
                    (Some("query"), n) => query_rule(&path, n),
                    (Some("header"), "Last-Event-ID") => Some(json!({"type": "string", "pattern": "^[0-9]{1,18}$"})),
                    (Some("header"), "Idempotency-Key") => {
                        Some(json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]([ -~]*[!-~])?$"}))
                    }
                    _ => None,
                };
                if let Some(r) = rule {
                    p["schema"] = r;
                }
            }
        }
    }
    // Request bodies: every schema a request body reaches.
    let mut request_schemas: Vec<String> = vec![];
    if let Some(paths) = doc["paths"].as_object() {
        for ops in paths.values() {
            for op in ops.as_object().into_iter().flat_map(|o| o.values()) {
                for media in ["application~1json", "multipart~1form-data"] {
                    if let Some(r) = op.pointer(&format!("/requestBody/content/{media}/schema/$ref")).and_then(Value::as_str) {
                        request_schemas.push(r.trim_start_matches("#/components/schemas/").to_string());
                    }
                }
            }
        }
    }
    let mut i = 0;
    while i < request_schemas.len() {
        let name = request_schemas[i].clone();
        i += 1;
        if let Some(required) = required_fields(&name)
            && let Some(s) = doc["components"]["schemas"][&name].as_object_mut()
        {
            s.insert("required".into(), json!(required));
            for f in required {
                if let Some(t) = s.get_mut("properties").and_then(|p| p.get_mut(*f)).and_then(|p| p.get_mut("type"))
                    && let Some(first) = t.as_array().and_then(|a| a.iter().find(|x| *x != "null")).cloned()
                {
                    *t = first;
                }
            }
        }
        let Some(props) = doc["components"]["schemas"][&name]["properties"].as_object_mut() else { continue };
        for (field, schema) in props.iter_mut() {
            for r in refs(schema) {
                if !request_schemas.contains(&r) {
                    request_schemas.push(r);
                }
            }
            if let Some(rule) = body_rule(&name, field) {
                apply(schema, rule);
            }
        }
    }
}

/// The component schemas `schema` refers to (directly or as array items).
fn refs(schema: &Value) -> Vec<String> {
    let mut out = vec![];
    let mut stack = vec![schema];
    while let Some(s) = stack.pop() {
        match s {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                    out.push(r.trim_start_matches("#/components/schemas/").to_string());
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    out
}

/// Puts `rule`'s constraints on a field, keeping it nullable where it was
/// (an optional field is `type: [T, "null"]`). A field that was a `$ref`,
/// or a rule that is a choice (`oneOf`), replaces the field's schema.
fn apply(schema: &mut Value, rule: Value) {
    let nullable = schema["type"].as_array().is_some_and(|t| t.iter().any(|x| x == "null"))
        || schema["oneOf"].as_array().is_some_and(|o| o.iter().any(|x| x["type"] == "null"));
    let replace = schema.get("$ref").is_some() || schema.get("oneOf").is_some() || rule.get("oneOf").is_some();
    if replace {
        *schema = if nullable { json!({"oneOf": [rule, {"type": "null"}]}) } else { rule };
        return;
    }
    let Some(r) = rule.as_object() else { return };
    let Some(s) = schema.as_object_mut() else { return };
    for (k, v) in r {
        s.insert(k.clone(), v.clone());
    }
    if nullable && let Some(t) = r.get("type") {
        s.insert("type".into(), json!([t, "null"]));
        if let Some(e) = s.get_mut("enum").and_then(Value::as_array_mut) {
            e.push(Value::Null);
        }
    }
}

/// A JSON body whose schema requires no field may be left out: the server
/// reads an empty body as `{}` (`extract::JsonBody`). The document says so,
/// so that clients need not send `{}` to publish a version or pause a budget.
pub fn optional_empty_bodies(doc: &mut Value) {
    let schemas = doc["components"]["schemas"].clone();
    for ops in doc["paths"].as_object_mut().into_iter().flat_map(|p| p.values_mut()) {
        for op in ops.as_object_mut().into_iter().flat_map(|o| o.values_mut()) {
            let Some(r) = op.pointer("/requestBody/content/application~1json/schema/$ref").and_then(Value::as_str) else { continue };
            let schema = &schemas[r.trim_start_matches("#/components/schemas/")];
            if schema["required"].as_array().is_none_or(|r| r.is_empty()) {
                op["requestBody"]["required"] = json!(false);
            }
        }
    }
}

/// Tags whose resource is not the tag's name made singular.
const TAG_RESOURCES: &[(&str, &str)] = &[("approvals", "ActionApproval")];

/// Names each tag's resource (`x-resource`, PascalCase): an operation id is
/// `<tag>.<verb><Resource>...`, and a client's per-tag method drops the
/// resource from it (`automationGraphs.createAutomationGraph` →
/// `automationGraphs.create`, `sessions.listSessionEvents` →
/// `sessions.listEvents`). Declared here once so that every client derives
/// the same names.
pub fn name_resources(doc: &mut Value) {
    for tag in doc["tags"].as_array_mut().into_iter().flatten() {
        let name = tag["name"].as_str().unwrap_or_default().to_string();
        let resource = match TAG_RESOURCES.iter().find(|(t, _)| *t == name) {
            Some((_, r)) => r.to_string(),
            None => singular_pascal(&name),
        };
        tag["x-resource"] = json!(resource);
    }
}

/// `memoryStores` → `MemoryStore`, `actionPolicies` → `ActionPolicy`.
fn singular_pascal(tag: &str) -> String {
    let one = match tag.strip_suffix("ies") {
        Some(stem) => format!("{stem}y"),
        None => tag.strip_suffix('s').unwrap_or(tag).to_string(),
    };
    let mut chars = one.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}
