//! Optional features an installation offers (api.md §16.8): each is
//! available, or unavailable for a named reason, and while unavailable its
//! endpoints answer 503 `unavailable` with `details:{capability, reason}`
//! and nothing falls back. Every process of an installation reads the same
//! `features_disabled` list.

use crate::{Error, Result};
use std::collections::BTreeSet;

/// Every feature `GET /v1/capabilities` reports, in its order.
pub const ALL: &[&str] = &[
    "connections",
    "credentials",
    "tool_sources",
    "sandbox_egress",
    "skills",
    "files",
    "http_connections",
    "memory",
    "cma_projection",
    "managed_tools",
    "provider_triggers",
];

/// Why a feature is unavailable.
pub const FEATURE_DISABLED: &str = "feature_disabled";
pub const DEPENDENCY_MISSING: &str = "dependency_missing";
pub const NOT_BUILT: &str = "not_built";

/// The features an operator switched off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Disabled(BTreeSet<String>);

impl Disabled {
    /// Parses the configured comma-separated names; an unknown one is
    /// refused, so a typo does not leave a feature on.
    pub fn parse(list: &str) -> Result<Disabled> {
        let mut set = BTreeSet::new();
        for n in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !ALL.contains(&n) {
                return Err(Error::invalid_field("features_disabled", format!("{n:?} is not a feature; features are {}", ALL.join(", "))));
            }
            set.insert(n.to_string());
        }
        Ok(Disabled(set))
    }

    pub fn contains(&self, feature: &str) -> bool {
        self.0.contains(feature)
    }

    /// 503 `unavailable` when `feature` is switched off.
    pub fn require(&self, feature: &str) -> Result<()> {
        if self.contains(feature) { Err(unavailable(feature, FEATURE_DISABLED)) } else { Ok(()) }
    }
}

/// The error a request needing an unavailable feature gets.
pub fn unavailable(feature: &str, reason: &str) -> Error {
    Error::unavailable(format!("{feature} is not available on this installation ({reason})"))
        .with_details(serde_json::json!({"capability": feature, "reason": reason}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_comma_lists_split() {
        let d = Disabled::parse("files, skills").expect("ok");
        assert!(d.contains("files") && d.contains("skills") && !d.contains("connections"));
        let e = d.require("files").expect_err("off");
        assert_eq!(e.details["reason"], "feature_disabled");
        assert_eq!(e.details["capability"], "files");
        assert!(Disabled::parse("filez").is_err());
    }
}
