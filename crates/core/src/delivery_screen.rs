//! A delivery screen (api.md §18.8): the model judgment every
//! `agent.message` of a Session that has one must pass before it is
//! stored. An Automation's Agent target (or a graph's `step_agent`) names
//! it; the scheduler freezes it into each child Session; the sessions
//! service holds the messages for it. Both read it through this one type,
//! so a screen the scheduler accepted is one the sessions service accepts.

use crate::id::RoutingProfileId;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// A screen's instructions, in bytes (a Check's limit).
pub const MAX_INSTRUCTIONS_BYTES: usize = 16 * 1024;

/// The efforts a `tier` may name: the model gateway's.
pub const TIERS: &[&str] = &["minimal", "low", "medium", "high", "max"];

crate::string_enum!(
    /// What a screen that could not answer does with the message:
    /// `fail_closed` withholds it, `fail_open` releases it.
    OnFailure { FailClosed = "fail_closed", FailOpen = "fail_open" }
);

// `string_enum!` declares the variants, so `#[default]` cannot mark one.
#[allow(clippy::derivable_impls)]
impl Default for OnFailure {
    fn default() -> Self {
        OnFailure::FailClosed
    }
}

/// The screen as the API writes it (`input.delivery_screen`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryScreen {
    pub model_routing_profile_id: String,
    /// An effort for the screen's call; none keeps the route's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    pub instructions: String,
    #[serde(default)]
    pub on_failure: OnFailure,
}

/// A screen's verdict on one message, as `message.screened` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Blocked,
    /// The screen could not answer (the model failed, or broke the reply's
    /// shape).
    Error,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Blocked => "blocked",
            Verdict::Error => "error",
        }
    }

    /// Reads a model's reply, which must be exactly `{"verdict":"allow"}`
    /// or `{"verdict":"block"}`: anything else is an error, never a guess.
    pub fn of_reply(reply_json: &str) -> Verdict {
        let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(reply_json) else { return Verdict::Error };
        match (o.len(), o.get("verdict").and_then(serde_json::Value::as_str)) {
            (1, Some("allow")) => Verdict::Allowed,
            (1, Some("block")) => Verdict::Blocked,
            _ => Verdict::Error,
        }
    }
}

impl DeliveryScreen {
    /// Checks the screen's fields; `field` prefixes the names errors give
    /// (`target.input.delivery_screen`, `delivery_screen`, …).
    pub fn check(&self, field: &str) -> Result<()> {
        RoutingProfileId::check(&format!("{field}.model_routing_profile_id"), &self.model_routing_profile_id)?;
        if let Some(t) = &self.tier
            && !TIERS.contains(&t.as_str())
        {
            return Err(Error::invalid_field(&format!("{field}.tier"), format!("tier is an effort: {}", TIERS.join(", "))));
        }
        if self.instructions.trim().is_empty() || self.instructions.len() > MAX_INSTRUCTIONS_BYTES {
            return Err(Error::invalid_field(
                &format!("{field}.instructions"),
                "a screen's instructions are 1 byte to 16 KiB: they are what it judges by",
            ));
        }
        Ok(())
    }

    /// Whether a message with this verdict is stored and delivered:
    /// allowed ones are, blocked ones never, and a screen's failure only
    /// under `fail_open`.
    pub fn releases(&self, v: Verdict) -> bool {
        match v {
            Verdict::Allowed => true,
            Verdict::Blocked => false,
            Verdict::Error => self.on_failure == OnFailure::FailOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn screen(v: serde_json::Value) -> Result<DeliveryScreen> {
        let s: DeliveryScreen = serde_json::from_value(v).map_err(|e| Error::invalid(e.to_string()))?;
        s.check("delivery_screen").map(|_| s)
    }

    #[test]
    fn a_screen_is_checked_field_by_field() {
        let ok = screen(json!({"model_routing_profile_id": "mrp_01jx0000000000000000000001", "instructions": "block: X1"}))
            .expect("a profile and instructions suffice");
        assert_eq!(ok.on_failure, OnFailure::FailClosed, "closed unless asked");
        let bad = |v| screen(v).expect_err("refused");
        assert!(bad(json!({"model_routing_profile_id": "dep_1", "instructions": "x"})).message.contains("model_routing_profile_id"));
        let tier = bad(json!({"model_routing_profile_id": "mrp_01jx0000000000000000000001", "instructions": "x", "tier": "huge"}));
        assert!(tier.message.contains("tier"), "{tier:?}");
        assert!(bad(json!({"model_routing_profile_id": "mrp_01jx0000000000000000000001", "instructions": " "})).message.contains("16 KiB"));
        bad(json!({"model_routing_profile_id": "mrp_01jx0000000000000000000001", "instructions": "x", "on_failure": "maybe"}));
        bad(json!({"model_routing_profile_id": "mrp_01jx0000000000000000000001", "instructions": "x", "extra": 1}));
    }

    #[test]
    fn only_an_exact_reply_is_a_verdict_and_failure_releases_only_when_open() {
        assert_eq!(Verdict::of_reply(r#"{"verdict":"allow"}"#), Verdict::Allowed);
        assert_eq!(Verdict::of_reply(r#"{"verdict":"block"}"#), Verdict::Blocked);
        for broken in ["", "allow", r#"{"verdict":"ok"}"#, r#"{"verdict":"allow","why":"x"}"#, r#"["allow"]"#] {
            assert_eq!(Verdict::of_reply(broken), Verdict::Error, "{broken}");
        }
        let mut s = DeliveryScreen {
            model_routing_profile_id: "mrp_1".into(),
            tier: None,
            instructions: "x".into(),
            on_failure: OnFailure::FailClosed,
        };
        assert!(s.releases(Verdict::Allowed) && !s.releases(Verdict::Blocked) && !s.releases(Verdict::Error));
        s.on_failure = OnFailure::FailOpen;
        assert!(s.releases(Verdict::Error) && !s.releases(Verdict::Blocked));
    }
}
