//! EvaluatorQualifications (api.md §18.1): an installation admin's record
//! that a (provider, model) was reviewed as fit to judge for one purpose —
//! a Check's `decision` or a delivery's `delivery_screen` — until it
//! expires or is revoked. A judgment fails closed, so nothing is qualified
//! by default (the scripted model included): the gateway calls a candidate
//! for a judgment only under a qualification that is active and current.

use crate::model::Provider;
use checkfu_core::id::EvaluatorQualificationId;
use checkfu_core::time::{now_ms, parse_rfc3339};
use checkfu_core::{Error, Result, string_enum};

string_enum!(
    /// What a qualified evaluator may judge.
    Purpose { Decision = "decision", DeliveryScreen = "delivery_screen" }
);

/// The longest a review holds: a qualification expires at most this long
/// after its review.
pub const MAX_VALIDITY_MS: i64 = 366 * 24 * 3_600_000;
/// The most evidence a qualification keeps (a link, a review's summary).
pub const MAX_EVIDENCE_CHARS: usize = 4_000;
/// A review dated this far ahead of the gateway's clock is still accepted
/// (clocks drift); further is a mistake.
const CLOCK_SKEW_MS: i64 = 5 * 60_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Qualification {
    pub id: EvaluatorQualificationId,
    pub provider: Provider,
    pub model: String,
    pub purpose: Purpose,
    pub evidence: String,
    pub reviewed_ms: i64,
    pub expires_ms: i64,
    pub revoked_ms: i64,
    pub created_by: String,
    pub created_ms: i64,
}

impl Qualification {
    pub fn status(&self) -> &'static str {
        if self.revoked_ms > 0 { "revoked" } else { "active" }
    }

    /// Whether a judgment may be asked under it at `now`.
    pub fn current(&self, now: i64) -> bool {
        self.revoked_ms == 0 && self.reviewed_ms <= now && now < self.expires_ms
    }
}

/// What an admin asked to record.
#[derive(Debug, Clone, Default)]
pub struct NewQualification {
    pub provider: String,
    pub model: String,
    pub purpose: String,
    pub evidence: String,
    pub reviewed_at: String,
    pub expires_at: String,
    pub actor_id: String,
}

fn timestamp(field: &str, s: &str) -> Result<i64> {
    parse_rfc3339(s, 9).ok_or_else(|| Error::invalid_field(field, format!("{field} must be an RFC 3339 timestamp")))
}

impl NewQualification {
    /// The qualification it records, every field checked: a known
    /// provider, a model named as a routing candidate names it, a review
    /// not in the future, and an expiry still ahead and at most 366 days
    /// after the review.
    pub fn check(&self) -> Result<Qualification> {
        let now = now_ms();
        let provider = Provider::parse("provider", &self.provider)?;
        let purpose = Purpose::parse("purpose", &self.purpose)?;
        if self.model.trim().is_empty() || self.model.len() > 200 {
            return Err(Error::invalid_field("model", "model must be 1 to 200 characters"));
        }
        let evidence_chars = self.evidence.chars().count();
        if self.evidence.trim().is_empty() || evidence_chars > MAX_EVIDENCE_CHARS {
            return Err(Error::invalid_field(
                "evidence",
                format!("evidence (what the review found, or where it is) must be 1 to {MAX_EVIDENCE_CHARS} characters"),
            ));
        }
        let reviewed_ms = timestamp("reviewed_at", &self.reviewed_at)?;
        let expires_ms = timestamp("expires_at", &self.expires_at)?;
        if reviewed_ms > now + CLOCK_SKEW_MS {
            return Err(Error::invalid_field("reviewed_at", "reviewed_at is in the future: record a review once it happened"));
        }
        if expires_ms <= now {
            return Err(Error::invalid_field("expires_at", "expires_at must be in the future"));
        }
        if expires_ms > reviewed_ms.saturating_add(MAX_VALIDITY_MS) {
            return Err(Error::invalid_field("expires_at", "expires_at is at most 366 days after reviewed_at"));
        }
        Ok(Qualification {
            id: EvaluatorQualificationId::mint(),
            provider,
            model: self.model.clone(),
            purpose,
            evidence: self.evidence.clone(),
            reviewed_ms,
            expires_ms,
            revoked_ms: 0,
            created_by: self.actor_id.clone(),
            created_ms: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_core::time::rfc3339;

    fn new(reviewed: i64, expires: i64) -> NewQualification {
        NewQualification {
            provider: "scripted".into(),
            model: "scripted-1".into(),
            purpose: "decision".into(),
            evidence: "reviewed against the decision suite".into(),
            reviewed_at: rfc3339(reviewed),
            expires_at: rfc3339(expires),
            actor_id: "prin_x".into(),
        }
    }

    #[test]
    fn a_review_holds_from_its_date_until_its_expiry_for_at_most_366_days() {
        let now = now_ms();
        let day = 24 * 3_600_000;
        let q = new(now - day, now + 30 * day).check().expect("valid");
        assert!(q.current(now) && !q.current(now - 2 * day) && !q.current(now + 31 * day));
        assert_eq!(q.status(), "active");
        let revoked = Qualification { revoked_ms: now, ..q };
        assert!(!revoked.current(now));
        assert_eq!(revoked.status(), "revoked");

        let field = |n: NewQualification| n.check().expect_err("refused").details["field"].clone();
        assert_eq!(field(new(now - day, now - 1)), "expires_at", "already expired");
        assert_eq!(field(new(now - day, now - day + MAX_VALIDITY_MS + 1)), "expires_at", "over 366 days");
        assert_eq!(field(new(now + day, now + 2 * day)), "reviewed_at", "a review in the future");
        assert_eq!(field(NewQualification { purpose: "grading".into(), ..new(now, now + day) }), "purpose");
        assert_eq!(field(NewQualification { provider: "nope".into(), ..new(now, now + day) }), "provider");
        assert_eq!(field(NewQualification { evidence: " ".into(), ..new(now, now + day) }), "evidence");
        assert_eq!(field(NewQualification { reviewed_at: "yesterday".into(), ..new(now, now + day) }), "reviewed_at");
    }
}
