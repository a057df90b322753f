//! An Automation's triggers and target as the public JSON gives them
//! (api.md §12.2–12.3), read into the typed `Trigger`s and `AgentTarget`,
//! and rendered back: by the gateway for a body and an answer, and by the
//! scheduler for a graph document, its stored rows and a 0.1.0 peer's
//! text — one reading and one rendering for all of them.
//!
//! Only the shape is checked here: kinds, fields, types, and a predicate's
//! syntax (a JSON Pointer, a non-null value). The scheduler checks the
//! rules: a cron pattern that fires, an IANA zone, an RFC 3339 time, a
//! dedupe pointer, a deployment id, limits.

use crate::scheduler::v1::{
    AgentTarget, ChildBudget, Predicate, ScheduleOnceTrigger, ScheduleTrigger, SessionTarget, StepsTarget, SubscriptionTrigger, Target,
    TargetInput, Trigger, WebhookTrigger, target, trigger,
};
use crate::sessions::v1::DeliveryScreen;
use checkfu_core::Error;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The most triggers one Automation has.
pub const MAX_TRIGGERS: usize = 3;
/// The most predicates one condition holds.
pub const MAX_PREDICATES: usize = 32;

/// Why a condition was refused: `(index, reason code, detail)`.
pub type Refusal = (usize, &'static str, String);

/// Whether `p` is an RFC 6901 pointer: empty, or `/`-separated tokens whose
/// `~` escapes are `~0` or `~1`.
pub fn is_pointer(p: &str) -> bool {
    if p.is_empty() {
        return true;
    }
    if !p.starts_with('/') {
        return false;
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

/// The rules every predicate holds to, written or typed, checked in this
/// order; a refusal is `(code, detail)`.
fn predicate_rules(kind: Option<&str>, pointer: Option<&str>, value: Option<&Value>) -> Result<(), (&'static str, String)> {
    if !matches!(kind, Some("equals" | "contains")) {
        return Err(("invalid_predicate", "a predicate's kind is equals or contains".into()));
    }
    if !pointer.is_some_and(is_pointer) {
        return Err(("invalid_predicate", "a predicate's pointer is a JSON Pointer (RFC 6901)".into()));
    }
    match value {
        None | Some(Value::Null) => Err(("invalid_predicate_value", "a predicate's value is not null".into())),
        Some(v) if kind == Some("contains") && !v.is_string() => {
            Err(("invalid_predicate_value", "a contains predicate's value is a string".into()))
        }
        Some(_) => Ok(()),
    }
}

impl Predicate {
    /// `{kind:"equals"|"contains", pointer, value}`; a refusal is `(code,
    /// detail)`.
    pub fn from_json(v: &Value) -> Result<Predicate, (&'static str, String)> {
        let Some(o) = v.as_object() else { return Err(("invalid_predicate", "a predicate is an object".into())) };
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "kind" | "pointer" | "value")) {
            return Err(("invalid_predicate", format!("a predicate has no field {k:?}")));
        }
        let (kind, pointer, value) = (o.get("kind").and_then(Value::as_str), o.get("pointer").and_then(Value::as_str), o.get("value"));
        predicate_rules(kind, pointer, value)?;
        Ok(Predicate {
            kind: kind.unwrap_or_default().into(),
            pointer: pointer.unwrap_or_default().into(),
            value_json: v["value"].to_string(),
        })
    }

    /// Whether a typed predicate (from a caller on the mesh) holds to the
    /// rules a written one does.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        predicate_rules(Some(&self.kind), Some(&self.pointer), serde_json::from_str::<Value>(&self.value_json).ok().as_ref())
    }

    /// The value it compares with (null only if the sender broke the
    /// shape this module checks).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.value_json).unwrap_or(Value::Null)
    }

    pub fn to_json(&self) -> Value {
        json!({"kind": self.kind, "pointer": self.pointer, "value": self.value()})
    }

    /// A condition as written: `{kind:"predicates", predicates}`.
    pub fn condition_json(predicates: &[Predicate]) -> Value {
        json!({"kind": "predicates", "predicates": predicates.iter().map(Predicate::to_json).collect::<Vec<_>>()})
    }
}

/// `{kind:"predicates", predicates:[...]}` (1 to 32), refused with the
/// first bad entry's index and reason.
pub fn condition_from_json(v: &Value) -> Result<Vec<Predicate>, Refusal> {
    let Some(o) = v.as_object() else { return Err((0, "invalid_predicate", "a condition is an object".into())) };
    if o.get("kind").and_then(Value::as_str) != Some("predicates") || o.keys().any(|k| k != "kind" && k != "predicates") {
        return Err((0, "invalid_predicate", "a condition is {kind:\"predicates\", predicates:[...]}".into()));
    }
    let Some(list) = o.get("predicates").and_then(Value::as_array) else {
        return Err((0, "invalid_predicate", "predicates is a list".into()));
    };
    check_count(list.len())?;
    list.iter().enumerate().map(|(i, p)| Predicate::from_json(p).map_err(|(code, why)| (i, code, why))).collect()
}

fn check_count(n: usize) -> Result<(), Refusal> {
    if n == 0 || n > MAX_PREDICATES {
        return Err((0, "invalid_predicate", format!("a condition holds 1 to {MAX_PREDICATES} predicates")));
    }
    Ok(())
}

/// Whether a typed condition (from a caller on the mesh) holds to the
/// rules a written one does: 1 to 32 predicates, each checked.
pub fn check_condition(predicates: &[Predicate]) -> Result<(), Refusal> {
    check_count(predicates.len())?;
    for (i, p) in predicates.iter().enumerate() {
        p.check().map_err(|(code, why)| (i, code, why))?;
    }
    Ok(())
}

/// A refused condition as an API error (400 naming the predicate, with
/// `reason` and `code`) for `field`.
pub fn condition_error(field: &str, (i, code, why): Refusal, reason: &str) -> Error {
    let mut e = Error::invalid_field(&format!("{field}.predicates[{i}]"), why).with_reason(reason);
    if let Value::Object(m) = &mut e.details {
        m.insert("code".into(), json!(code));
    }
    e
}

/// A refused trigger: 400 naming `triggers[i].field`, reason
/// `invalid_trigger` (shared with the scheduler's rules).
pub fn invalid_trigger(i: usize, field: &str, why: impl Into<String>) -> Error {
    Error::invalid_field(&format!("triggers[{i}].{field}"), why).with_reason("invalid_trigger")
}

fn only(i: usize, kind: &str, o: &Map<String, Value>, allowed: &[&str]) -> Result<(), Error> {
    match o.keys().find(|k| k.as_str() != "kind" && k.as_str() != "next_at" && !allowed.contains(&k.as_str())) {
        Some(k) => Err(invalid_trigger(i, k, format!("a {kind} trigger has no field {k:?}"))),
        None => Ok(()),
    }
}

fn text(i: usize, o: &Map<String, Value>, field: &str) -> Result<String, Error> {
    o.get(field).and_then(Value::as_str).map(str::to_string).ok_or_else(|| invalid_trigger(i, field, format!("{field} is a string")))
}

/// A trigger's `admission_filter` as written (absent or null: none).
fn filter(i: usize, o: &Map<String, Value>) -> Result<Vec<Predicate>, Error> {
    match o.get("admission_filter") {
        None | Some(Value::Null) => Ok(vec![]),
        Some(f) => condition_from_json(f).map_err(|r| condition_error(&format!("triggers[{i}].admission_filter"), r, "invalid_trigger")),
    }
}

impl Trigger {
    /// Entry `i` of a `triggers` list. `next_at` is read back, never
    /// written, so it is ignored.
    pub fn from_json(i: usize, v: &Value) -> Result<Trigger, Error> {
        let Some(o) = v.as_object() else { return Err(invalid_trigger(i, "kind", "a trigger is an object")) };
        let kind = match o.get("kind").and_then(Value::as_str).unwrap_or_default() {
            "schedule" => {
                only(i, "schedule", o, &["cron", "timezone"])?;
                trigger::Kind::Schedule(ScheduleTrigger { cron: text(i, o, "cron")?, timezone: text(i, o, "timezone")? })
            }
            "schedule_once" => {
                only(i, "schedule_once", o, &["at"])?;
                trigger::Kind::ScheduleOnce(ScheduleOnceTrigger { at: text(i, o, "at")? })
            }
            "webhook" => {
                only(i, "webhook", o, &["dedupe_key", "admission_filter"])?;
                let dedupe_key = text(i, o, "dedupe_key")?;
                trigger::Kind::Webhook(WebhookTrigger { dedupe_key, admission_filter: filter(i, o)? })
            }
            "subscription" => {
                only(i, "subscription", o, &["event_types", "resource_id", "admission_filter"])?;
                let types = o.get("event_types").and_then(Value::as_array).filter(|l| l.iter().all(Value::is_string));
                let Some(types) = types else { return Err(invalid_trigger(i, "event_types", "event_types is a list of event types")) };
                let resource_id = match o.get("resource_id") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(r)) => Some(r.clone()),
                    Some(_) => return Err(invalid_trigger(i, "resource_id", "resource_id is a string")),
                };
                trigger::Kind::Subscription(SubscriptionTrigger {
                    event_types: types.iter().filter_map(Value::as_str).map(String::from).collect(),
                    resource_id,
                    admission_filter: filter(i, o)?,
                })
            }
            _ => return Err(invalid_trigger(i, "kind", "a trigger's kind is schedule, schedule_once, webhook or subscription")),
        };
        Ok(Trigger { kind: Some(kind), next_at: None })
    }

    /// `triggers` as written: a list (null for none) of at most two.
    pub fn list_from_json(triggers: &Value) -> Result<Vec<Trigger>, Error> {
        let list = match triggers {
            Value::Null => return Ok(vec![]),
            Value::Array(l) => l,
            _ => return Err(Error::invalid_field("triggers", "triggers is a list").with_reason("invalid_trigger")),
        };
        if list.len() > MAX_TRIGGERS {
            return Err(Error::invalid_field("triggers", format!("at most {MAX_TRIGGERS} triggers")).with_reason("invalid_trigger"));
        }
        list.iter().enumerate().map(|(i, t)| Trigger::from_json(i, t)).collect()
    }

    /// The trigger as the API shows it, with `next_at` when set.
    pub fn to_json(&self) -> Value {
        let mut v = match &self.kind {
            Some(trigger::Kind::Schedule(s)) => json!({"kind": "schedule", "cron": s.cron, "timezone": s.timezone}),
            Some(trigger::Kind::ScheduleOnce(o)) => json!({"kind": "schedule_once", "at": o.at}),
            Some(trigger::Kind::Webhook(w)) => {
                let mut v = json!({"kind": "webhook", "dedupe_key": w.dedupe_key});
                if !w.admission_filter.is_empty() {
                    v["admission_filter"] = Predicate::condition_json(&w.admission_filter);
                }
                v
            }
            Some(trigger::Kind::Subscription(s)) => {
                let mut v = json!({"kind": "subscription", "event_types": s.event_types});
                if let Some(r) = &s.resource_id {
                    v["resource_id"] = json!(r);
                }
                if !s.admission_filter.is_empty() {
                    v["admission_filter"] = Predicate::condition_json(&s.admission_filter);
                }
                v
            }
            None => json!({}),
        };
        if let Some(next) = &self.next_at {
            v["next_at"] = if next.is_empty() { Value::Null } else { json!(next) };
        }
        v
    }

    /// A list as the API shows it.
    pub fn list_to_json(triggers: &[Trigger]) -> Value {
        Value::Array(triggers.iter().map(Trigger::to_json).collect())
    }
}

/// An Agent target's fields as written, so a bad one is refused in serde's
/// words (`target: unknown field ...`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentShape {
    agent_deployment_id: String,
    #[serde(default)]
    deployment_revision: Option<i64>,
    prompt: String,
    #[serde(default)]
    budget: Option<BudgetShape>,
    #[serde(default)]
    session_target: Option<Value>,
    #[serde(default)]
    input: Option<InputShape>,
}

/// What each child starts with besides the prompt (api.md §18.8).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InputShape {
    #[serde(default)]
    delivery_screen: Option<checkfu_core::delivery_screen::DeliveryScreen>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetShape {
    limit: i64,
    #[serde(default = "model_spend")]
    metric: String,
}

fn model_spend() -> String {
    "model_spend".into()
}

/// A refused target: 400 on `target`, reason `invalid_target` (shared
/// with the scheduler's rules).
pub fn invalid_target(why: impl Into<String>) -> Error {
    Error::invalid_field("target", why).with_reason("invalid_target")
}

impl AgentTarget {
    /// A target as written: `{kind:"agent", ...}`; a steps target is
    /// written by applying a graph only.
    pub fn from_json(v: &Value) -> Result<AgentTarget, Error> {
        let Some(obj) = v.as_object() else { return Err(invalid_target("target is an object")) };
        match obj.get("kind").and_then(Value::as_str) {
            Some("agent") => {}
            Some("steps") => {
                return Err(Error::invalid_field("target", "a steps target is written by applying an AutomationGraph")
                    .with_reason("steps_require_graph"));
            }
            _ => return Err(invalid_target("target.kind is agent")),
        }
        let mut rest = obj.clone();
        rest.remove("kind");
        let t = AgentShape::deserialize(&Value::Object(rest)).map_err(|e| invalid_target(format!("target: {e}")))?;
        // `{mode}` (and the Session a continue_selected one names); other
        // keys were never read, and are not kept.
        let session_target = match t.session_target.as_ref().unwrap_or(&json!({"mode": "start_new"})) {
            Value::Object(s) => match s.get("mode").and_then(Value::as_str) {
                Some(mode @ ("start_new" | "continue_selected")) => {
                    SessionTarget { mode: mode.into(), session: s.get("session").and_then(Value::as_str).map(str::to_string) }
                }
                _ => return Err(invalid_target("target.session_target.mode is start_new or continue_selected")),
            },
            _ => return Err(invalid_target("target.session_target.mode is start_new or continue_selected")),
        };
        Ok(AgentTarget {
            agent_deployment_id: t.agent_deployment_id,
            deployment_revision: t.deployment_revision,
            prompt: t.prompt,
            budget: t.budget.map(|b| ChildBudget { limit: b.limit, metric: b.metric }),
            session_target: Some(session_target),
            input: t.input.map(|i| TargetInput { delivery_screen: i.delivery_screen.as_ref().map(DeliveryScreen::of) }),
        })
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({"kind": "agent", "agent_deployment_id": self.agent_deployment_id,
            "deployment_revision": self.deployment_revision, "prompt": self.prompt});
        if let Some(b) = &self.budget {
            v["budget"] = json!({"limit": b.limit, "metric": b.metric});
        }
        let s = self.session_target.clone().unwrap_or_else(|| SessionTarget { mode: "start_new".into(), session: None });
        v["session_target"] = json!({"mode": s.mode});
        if let Some(id) = &s.session {
            v["session_target"]["session"] = json!(id);
        }
        if let Some(i) = &self.input {
            v["input"] = json!({"delivery_screen": i.delivery_screen.as_ref().map(DeliveryScreen::view)});
        }
        v
    }
}

impl StepsTarget {
    pub fn to_json(&self) -> Value {
        let docs = |l: &[String]| l.iter().map(|s| serde_json::from_str(s).unwrap_or(Value::Null)).collect::<Vec<Value>>();
        json!({"kind": "steps", "program_sha256": self.program_sha256, "steps": docs(&self.steps_json), "edges": docs(&self.edges_json)})
    }
}

impl Target {
    /// The target as the API shows it; null when unset.
    pub fn to_json(&self) -> Value {
        match &self.kind {
            Some(target::Kind::Agent(a)) => a.to_json(),
            Some(target::Kind::Steps(s)) => s.to_json(),
            None => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_read_and_render_as_written() {
        let w = json!([{"kind": "webhook", "dedupe_key": "/id",
            "admission_filter": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/kind", "value": "issue"}]}},
            {"kind": "schedule", "cron": "*/5 * * * *", "timezone": "UTC", "next_at": "2030-01-01T00:00:00Z"}]);
        let t = Trigger::list_from_json(&w).expect("triggers");
        assert_eq!(
            t[0].kind,
            Some(trigger::Kind::Webhook(WebhookTrigger {
                dedupe_key: "/id".into(),
                admission_filter: vec![Predicate { kind: "equals".into(), pointer: "/kind".into(), value_json: "\"issue\"".into() }],
            }))
        );
        assert_eq!(t[1].next_at, None, "next_at is read back, never written");
        let mut shown = w.clone();
        shown[1].as_object_mut().expect("object").remove("next_at");
        assert_eq!(Trigger::list_to_json(&t), shown);
        let pending = Trigger { next_at: Some(String::new()), ..t[1].clone() };
        assert_eq!(pending.to_json()["next_at"], Value::Null, "none pending shows null");
        assert_eq!(Trigger::list_from_json(&Value::Null).expect("none"), vec![]);
    }

    #[test]
    fn a_bad_trigger_names_its_field_and_reason() {
        let refused = |v: Value| {
            let e = Trigger::list_from_json(&v).expect_err("refused");
            (e.details["field"].as_str().unwrap_or_default().to_string(), e.details["reason"].as_str().unwrap_or_default().to_string())
        };
        let f = |field: &str, reason: &str| (field.to_string(), reason.to_string());
        assert_eq!(refused(json!({})), f("triggers", "invalid_trigger"));
        assert_eq!(refused(json!([{"kind": "webhook", "dedupe_key": "/a"}, {}, {}, {}])), f("triggers", "invalid_trigger"));
        assert_eq!(refused(json!([3])), f("triggers[0].kind", "invalid_trigger"));
        assert_eq!(
            refused(json!([{"kind": "schedule_once", "at": "2030-01-01T00:00:00Z", "cron": "x"}])),
            f("triggers[0].cron", "invalid_trigger")
        );
        assert_eq!(refused(json!([{"kind": "schedule", "cron": 5, "timezone": "UTC"}])), f("triggers[0].cron", "invalid_trigger"));
        assert_eq!(refused(json!([{"kind": "subscription"}])), f("triggers[0].event_types", "invalid_trigger"));
        assert_eq!(refused(json!([{"kind": "subscription", "event_types": [1]}])), f("triggers[0].event_types", "invalid_trigger"));
        assert_eq!(
            refused(json!([{"kind": "subscription", "event_types": ["a.b"], "resource_id": 3}])),
            f("triggers[0].resource_id", "invalid_trigger")
        );
        let s = json!([{"kind": "subscription", "event_types": ["memory_store.*"], "resource_id": "memstore_1",
            "admission_filter": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/type", "value": "memory_store.created"}]}}]);
        assert_eq!(Trigger::list_to_json(&Trigger::list_from_json(&s).expect("subscription")), s, "read and rendered as written");
        assert_eq!(refused(json!([{"kind": "x"}])), f("triggers[0].kind", "invalid_trigger"));
        let bad_filter = json!([{"kind": "webhook", "dedupe_key": "/id",
            "admission_filter": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/a", "value": null}]}}]);
        let e = Trigger::list_from_json(&bad_filter).expect_err("null value");
        assert_eq!(e.details["field"], "triggers[0].admission_filter.predicates[0]");
        assert_eq!((e.details["reason"].clone(), e.details["code"].clone()), (json!("invalid_trigger"), json!("invalid_predicate_value")));
    }

    #[test]
    fn conditions_are_checked() {
        let null = json!({"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/x", "value": null}]});
        assert_eq!(condition_from_json(&null).expect_err("null").1, "invalid_predicate_value");
        let bad_ptr = json!({"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "x", "value": 1}]});
        assert_eq!(condition_from_json(&bad_ptr).expect_err("pointer").1, "invalid_predicate");
        let contains = json!({"kind": "predicates", "predicates": [{"kind": "contains", "pointer": "/x", "value": 1}]});
        assert_eq!(condition_from_json(&contains).expect_err("contains a number").1, "invalid_predicate_value");
        let no_kind_no_value = json!({"kind": "predicates", "predicates": [{"pointer": "/x"}]});
        assert_eq!(condition_from_json(&no_kind_no_value).expect_err("kind first").2, "a predicate's kind is equals or contains");
        // A typed caller is held to the same rules.
        let p = |kind: &str, pointer: &str, value_json: &str| Predicate {
            kind: kind.into(),
            pointer: pointer.into(),
            value_json: value_json.into(),
        };
        assert_eq!(check_condition(&[p("equals", "/x", "1")]), Ok(()));
        assert_eq!(check_condition(&[p("equals", "/x", "1"), p("matches", "/x", "1")]).expect_err("kind").0, 1);
        assert_eq!(check_condition(&[p("equals", "x", "1")]).expect_err("pointer").1, "invalid_predicate");
        assert_eq!(check_condition(&[p("equals", "/x", "null")]).expect_err("null").1, "invalid_predicate_value");
        assert_eq!(check_condition(&[p("contains", "/x", "3")]).expect_err("contains a number").1, "invalid_predicate_value");
        assert_eq!(check_condition(&vec![p("equals", "/x", "1"); MAX_PREDICATES + 1]).expect_err("too many").1, "invalid_predicate");
        assert_eq!(condition_from_json(&json!({"kind": "predicates", "predicates": []})).expect_err("empty").1, "invalid_predicate");
        assert!(is_pointer("/a~1b/~0") && !is_pointer("/a~2") && !is_pointer("a"));
    }

    #[test]
    fn agent_targets_read_and_render_as_written() {
        let v = json!({"kind": "agent", "agent_deployment_id": "dep_1", "deployment_revision": null, "prompt": "go",
            "budget": {"limit": 5}, "session_target": {"mode": "continue_selected", "session": "sess_1"}});
        let t = AgentTarget::from_json(&v).expect("target");
        assert_eq!(t.budget, Some(ChildBudget { limit: 5, metric: "model_spend".into() }), "the metric defaults");
        let mut shown = v.clone();
        shown["budget"]["metric"] = json!("model_spend");
        assert_eq!(t.to_json(), shown);
        let plain = AgentTarget::from_json(&json!({"kind": "agent", "agent_deployment_id": "dep_1", "prompt": "go"})).expect("plain");
        assert_eq!(plain.to_json()["session_target"], json!({"mode": "start_new"}), "start_new by default");
        let reason = |v: Value| AgentTarget::from_json(&v).expect_err("refused").details["reason"].clone();
        assert_eq!(reason(json!({"kind": "steps"})), "steps_require_graph");
        assert_eq!(reason(json!({"kind": "x"})), "invalid_target");
        assert_eq!(reason(json!({"kind": "agent", "agent_deployment_id": "dep_1", "prompt": "go", "extra": 1})), "invalid_target");
        assert_eq!(
            reason(json!({"kind": "agent", "agent_deployment_id": "dep_1", "prompt": "go", "session_target": {}})),
            "invalid_target"
        );
        let e = AgentTarget::from_json(&json!({"kind": "agent", "prompt": "go"})).expect_err("no deployment");
        assert_eq!(e.message, "target: missing field `agent_deployment_id`");
    }
}
