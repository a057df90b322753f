//! Triggers (api.md §12.3): what starts an Automation besides a manual
//! fire. Their shape is read by `checkfu_proto::automation_spec` (from a
//! request, a graph document or a stored row); here their rules are checked
//! once, so the rest of the service holds typed triggers.
//!
//! Cron patterns are read by `croner` (5 fields, or 6 with leading seconds)
//! and evaluated in the trigger's IANA zone with `jiff`. Daylight-saving
//! transitions follow Vixie cron, as croner does: a fixed time that falls in
//! a spring-forward gap runs once, at the first instant after the gap; a
//! fixed time repeated by a fall-back runs once, at its earlier instant; an
//! interval pattern (`*/15 * * * *`) runs on every real instant it names.

use crate::predicates::{Predicate, is_pointer};
use checkfu_core::{Error, Result};
use checkfu_proto::automation_spec::{check_condition, condition_error, invalid_trigger};
use checkfu_proto::scheduler::v1 as pb;
use checkfu_proto::scheduler::v1::trigger::Kind;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde_json::Value;

/// A recurring schedule: a parsed cron pattern in a time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub cron: String,
    pub timezone: String,
    parsed: Cron,
    zone: jiff::tz::TimeZone,
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.cron == other.cron && self.timezone == other.timezone
    }
}

impl Schedule {
    pub fn new(cron: &str, timezone: &str) -> std::result::Result<Schedule, String> {
        let fields = cron.split_whitespace().count();
        if fields != 5 && fields != 6 {
            return Err("cron has 5 fields, or 6 with leading seconds".into());
        }
        let parsed = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(cron)
            .map_err(|e| format!("cron {cron:?} is not a valid pattern: {e}"))?;
        let zone = jiff::tz::TimeZone::get(timezone).map_err(|_| format!("{timezone:?} is not an IANA time zone"))?;
        let s = Schedule { cron: cron.to_string(), timezone: timezone.to_string(), parsed, zone };
        if s.next_after(checkfu_core::time::now_ms()).is_none() {
            return Err(format!("cron {cron:?} never fires"));
        }
        Ok(s)
    }

    /// The first occurrence strictly after `ms` (whole seconds), if any.
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let at = jiff::Timestamp::from_millisecond(ms).ok()?.to_zoned(self.zone.clone());
        let next = self.parsed.find_next_occurrence(&at, false).ok()?;
        Some(next.timestamp().as_millisecond())
    }
}

/// A webhook trigger: where the dedupe identity is, and which events to
/// admit.
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    /// A JSON Pointer into the body.
    pub dedupe_key: String,
    /// All must hold; empty admits everything.
    pub filter: Vec<Predicate>,
}

/// A subscription to the platform's own events (api.md §18.10).
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    /// Webhook event types (api.md §8) or `<family>.*`.
    pub event_types: Vec<String>,
    /// Only events about this resource (`data.resource_id`) or Session
    /// (`data.session_id`).
    pub resource_id: Option<String>,
    /// All must hold on the event's envelope; empty admits every one.
    pub filter: Vec<Predicate>,
}

/// The most types a subscription lists.
pub const MAX_EVENT_TYPES: usize = 20;

impl Subscription {
    fn new(i: usize, s: &pb::SubscriptionTrigger) -> Result<Subscription> {
        if s.event_types.is_empty() || s.event_types.len() > MAX_EVENT_TYPES {
            return Err(invalid_trigger(i, "event_types", "event_types lists 1 to 20 event types"));
        }
        if let Some(bad) = s.event_types.iter().find(|t| !subscribable(t)) {
            return Err(invalid_trigger(
                i,
                "event_types",
                format!("{bad:?} is no webhook event type (api.md §8) nor a family of them such as memory_store.*"),
            ));
        }
        if s.resource_id.as_ref().is_some_and(|r| r.is_empty() || r.len() > 200) {
            return Err(invalid_trigger(i, "resource_id", "resource_id is an id"));
        }
        if !s.admission_filter.is_empty() {
            check_condition(&s.admission_filter)
                .map_err(|r| condition_error(&format!("triggers[{i}].admission_filter"), r, "invalid_trigger"))?;
        }
        Ok(Subscription {
            event_types: s.event_types.clone(),
            resource_id: s.resource_id.clone(),
            filter: s.admission_filter.iter().map(Predicate::from_spec).collect(),
        })
    }

    /// Whether an event of this type and `data` is one it asked for
    /// (its admission filter aside).
    pub fn wants(&self, event_type: &str, data: &Value) -> bool {
        let about = |k: &str| data.get(k).and_then(Value::as_str);
        self.event_types.iter().any(|p| checkfu_core::glob::glob(p, event_type))
            && self.resource_id.as_deref().is_none_or(|r| about("resource_id") == Some(r) || about("session_id") == Some(r))
    }
}

/// A webhook event type, or `<family>.*` for a family that has one.
fn subscribable(t: &str) -> bool {
    use checkfu_core::events::SUBSCRIBABLE;
    match t.strip_suffix(".*") {
        Some(family) => SUBSCRIBABLE.iter().any(|s| s.split_once('.').is_some_and(|(f, _)| f == family)),
        None => SUBSCRIBABLE.contains(&t),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    Schedule(Box<Schedule>),
    /// A one-time occurrence at this instant (ms).
    Once(i64),
    Webhook(Webhook),
    Subscription(Subscription),
}

impl Trigger {
    /// Entry `i` of a list as written (or stored).
    pub fn parse(i: usize, v: &Value) -> Result<Trigger> {
        Trigger::from_spec(i, &pb::Trigger::from_json(i, v)?)
    }

    /// Entry `i`, its shape already read: checks its rules.
    pub fn from_spec(i: usize, t: &pb::Trigger) -> Result<Trigger> {
        match &t.kind {
            Some(Kind::Schedule(s)) => {
                Schedule::new(&s.cron, &s.timezone).map(|s| Trigger::Schedule(Box::new(s))).map_err(|why| invalid_trigger(i, "cron", why))
            }
            Some(Kind::ScheduleOnce(o)) => checkfu_core::time::parse_rfc3339(&o.at, 3)
                .map(Trigger::Once)
                .ok_or_else(|| invalid_trigger(i, "at", "at is RFC 3339 with an explicit offset and at most 3 fraction digits")),
            Some(Kind::Webhook(w)) => {
                let k = &w.dedupe_key;
                if k.is_empty() || !is_pointer(k) || k.len() > 1024 {
                    return Err(invalid_trigger(i, "dedupe_key", "dedupe_key is a JSON Pointer into the body, such as /id"));
                }
                // A typed caller's filter is held to the rules a written one is.
                if !w.admission_filter.is_empty() {
                    check_condition(&w.admission_filter)
                        .map_err(|r| condition_error(&format!("triggers[{i}].admission_filter"), r, "invalid_trigger"))?;
                }
                Ok(Trigger::Webhook(Webhook {
                    dedupe_key: k.clone(),
                    filter: w.admission_filter.iter().map(Predicate::from_spec).collect(),
                }))
            }
            Some(Kind::Subscription(s)) => Subscription::new(i, s).map(Trigger::Subscription),
            None => Err(invalid_trigger(i, "kind", "a trigger's kind is schedule, schedule_once, webhook or subscription")),
        }
    }

    /// The typed form, with `next_at` when this is the trigger the pending
    /// occurrence belongs to (`None` for the stored form).
    pub fn to_spec(&self, next_at: Option<Option<i64>>) -> pb::Trigger {
        let kind = match self {
            Trigger::Schedule(s) => Kind::Schedule(pb::ScheduleTrigger { cron: s.cron.clone(), timezone: s.timezone.clone() }),
            Trigger::Once(at) => Kind::ScheduleOnce(pb::ScheduleOnceTrigger { at: checkfu_core::time::rfc3339(*at) }),
            Trigger::Webhook(w) => Kind::Webhook(pb::WebhookTrigger {
                dedupe_key: w.dedupe_key.clone(),
                admission_filter: w.filter.iter().map(Predicate::to_spec).collect(),
            }),
            Trigger::Subscription(s) => Kind::Subscription(pb::SubscriptionTrigger {
                event_types: s.event_types.clone(),
                resource_id: s.resource_id.clone(),
                admission_filter: s.filter.iter().map(Predicate::to_spec).collect(),
            }),
        };
        pb::Trigger { kind: Some(kind), next_at: next_at.map(|n| n.map(checkfu_core::time::rfc3339).unwrap_or_default()) }
    }

    pub fn is_timed(&self) -> bool {
        matches!(self, Trigger::Schedule(_) | Trigger::Once(_))
    }
}

/// Parses `triggers` as written (a list; null for none).
pub fn parse_triggers(triggers: &Value) -> Result<Vec<Trigger>> {
    from_specs(&pb::Trigger::list_from_json(triggers)?)
}

/// Checks a list whose shape was read: 0–3 entries, at most one
/// schedule-kind, one webhook and one subscription.
pub fn from_specs(specs: &[pb::Trigger]) -> Result<Vec<Trigger>> {
    if specs.len() > checkfu_proto::automation_spec::MAX_TRIGGERS {
        return Err(Error::invalid_field("triggers", "at most 3 triggers").with_reason("invalid_trigger"));
    }
    let parsed = specs.iter().enumerate().map(|(i, t)| Trigger::from_spec(i, t)).collect::<Result<Vec<_>>>()?;
    if parsed.iter().filter(|t| t.is_timed()).count() > 1 {
        return Err(
            Error::invalid_field("triggers", "at most one schedule or schedule_once trigger").with_reason("multiple_schedule_triggers")
        );
    }
    if parsed.iter().filter(|t| matches!(t, Trigger::Webhook(_))).count() > 1 {
        return Err(Error::invalid_field("triggers", "at most one webhook trigger").with_reason("multiple_webhook_triggers"));
    }
    if parsed.iter().filter(|t| matches!(t, Trigger::Subscription(_))).count() > 1 {
        return Err(Error::invalid_field("triggers", "at most one subscription trigger").with_reason("invalid_trigger"));
    }
    Ok(parsed)
}

/// The stored (and compared) form of a list.
pub fn to_json(triggers: &[Trigger]) -> Value {
    pb::Trigger::list_to_json(&to_specs(triggers, None))
}

/// The typed list, each with `next_at` when given.
pub fn to_specs(triggers: &[Trigger], next_ms: Option<Option<i64>>) -> Vec<pb::Trigger> {
    triggers.iter().map(|t| t.to_spec(next_ms.map(|n| if t.is_timed() { n } else { None }))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ms(s: &str) -> i64 {
        checkfu_core::time::parse_rfc3339(s, 3).expect("time")
    }

    #[test]
    fn schedules_follow_their_zone_across_daylight_saving() {
        // Europe/Berlin springs forward at 02:00 on 2026-03-29 (to 03:00)
        // and falls back at 03:00 on 2026-10-25 (to 02:00).
        let daily = Schedule::new("30 2 * * *", "Europe/Berlin").expect("schedule");
        assert_eq!(daily.next_after(ms("2026-03-28T12:00:00Z")), Some(ms("2026-03-29T01:00:00Z")), "the gap: the first instant after it");
        assert_eq!(daily.next_after(ms("2026-03-29T01:00:00Z")), Some(ms("2026-03-30T00:30:00Z")));
        assert_eq!(daily.next_after(ms("2026-10-24T12:00:00Z")), Some(ms("2026-10-25T00:30:00Z")), "the fold: the earlier instant");
        assert_eq!(daily.next_after(ms("2026-10-25T00:30:00Z")), Some(ms("2026-10-26T01:30:00Z")), "once per fold");
        let every = Schedule::new("*/2 * * * * *", "UTC").expect("seconds");
        assert_eq!(every.next_after(ms("2026-01-01T00:00:00.500Z")), Some(ms("2026-01-01T00:00:02Z")));
        assert_eq!(every.next_after(ms("2026-01-01T00:00:02Z")), Some(ms("2026-01-01T00:00:04Z")));
    }

    #[test]
    fn triggers_are_checked() {
        let t = parse_triggers(&json!([{"kind": "schedule_once", "at": "2030-01-01T19:00:00+02:00"}])).expect("once");
        assert_eq!(t[0].to_spec(Some(None)).to_json()["at"], "2030-01-01T17:00:00.000Z");
        assert_eq!(t[0].to_spec(Some(None)).to_json()["next_at"], Value::Null);
        let reason = |v: Value| parse_triggers(&v).expect_err("refused").details["reason"].clone();
        assert_eq!(reason(json!([{"kind": "schedule_once", "at": "2030-01-01T19:00:00"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "schedule_once", "at": "2030-01-01T19:00:00.1234Z"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "schedule_once", "at": "2030-01-01T19:00:00Z", "cron": "* * * * *"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "schedule", "cron": "* * * *", "timezone": "UTC"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "schedule", "cron": "0 0 0 * * * 2030", "timezone": "UTC"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "schedule", "cron": "* * * * *", "timezone": "Mars/Olympus"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "schedule", "cron": "0 0 30 2 *", "timezone": "UTC"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "webhook", "dedupe_key": "id"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "subscription"}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "subscription", "event_types": ["nope.*"]}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "subscription", "event_types": ["memory_store.nope"]}])), "invalid_trigger");
        assert_eq!(reason(json!([{"kind": "subscription", "event_types": []}])), "invalid_trigger");
        let many: Vec<String> = (0..21).map(|_| "run.created".to_string()).collect();
        assert_eq!(reason(json!([{"kind": "subscription", "event_types": many}])), "invalid_trigger");
        let one = json!({"kind": "subscription", "event_types": ["memory_store.*", "session.status_idle"], "resource_id": "sess_1"});
        assert_eq!(reason(json!([one, one])), "invalid_trigger", "one per Automation");
        let Trigger::Subscription(s) = &parse_triggers(&json!([one])).expect("subscription")[0] else { panic!("a subscription") };
        assert!(s.wants("memory_store.created", &json!({"resource_id": "sess_1"})));
        assert!(s.wants("session.status_idle", &json!({"session_id": "sess_1"})));
        assert!(!s.wants("session.status_idle", &json!({"session_id": "sess_2"})), "another Session");
        assert!(!s.wants("run.created", &json!({"session_id": "sess_1"})), "another type");
        assert_eq!(reason(json!([{"kind": "x"}])), "invalid_trigger");
        assert_eq!(
            reason(
                json!([{"kind": "schedule", "cron": "* * * * *", "timezone": "UTC"}, {"kind": "schedule_once", "at": "2030-01-01T00:00:00Z"}])
            ),
            "multiple_schedule_triggers"
        );
        assert_eq!(
            reason(json!([{"kind": "webhook", "dedupe_key": "/a"}, {"kind": "webhook", "dedupe_key": "/b"}])),
            "multiple_webhook_triggers"
        );
        let w = json!([{"kind": "webhook", "dedupe_key": "/id",
            "admission_filter": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/kind", "value": "issue"}]}}]);
        assert_eq!(to_json(&parse_triggers(&w).expect("webhook")), w, "the stored form reads back as written");
    }
}
