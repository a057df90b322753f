//! Caller-defined `metadata` labels, with the limits CMA clients already
//! expect (api.md §5, §17.5): one rule for every resource that carries them.

use crate::{Error, Result};
use std::collections::BTreeMap;

/// Pairs one resource may carry.
pub const MAX_PAIRS: usize = 16;

/// Checks caller-defined `metadata`: at most 16 pairs, keys 1 to 64 and
/// values at most 512 characters (400 `invalid_metadata`).
pub fn check(field: &str, m: &BTreeMap<String, String>) -> Result<()> {
    let bad = if m.len() > MAX_PAIRS {
        Some(format!("at most {MAX_PAIRS} metadata pairs"))
    } else {
        m.iter().find_map(|(k, v)| {
            if k.is_empty() || k.chars().count() > 64 {
                Some(format!("metadata key {k:?} must be 1 to 64 characters"))
            } else if v.chars().count() > 512 {
                Some(format!("the value of metadata key {k:?} is longer than 512 characters"))
            } else {
                None
            }
        })
    };
    match bad {
        Some(m) => Err(Error::invalid_field(field, m).with_reason("invalid_metadata")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_cmas() {
        let one = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(check("metadata", &one("team", "core")).is_ok());
        assert!(check("metadata", &one("", "x")).is_err());
        assert!(check("metadata", &one(&"k".repeat(65), "x")).is_err());
        assert!(check("metadata", &one("k", &"v".repeat(513))).is_err());
        let many: BTreeMap<String, String> = (0..17).map(|i| (format!("k{i}"), "v".into())).collect();
        let e = check("metadata", &many).expect_err("too many");
        assert_eq!(e.details["reason"], "invalid_metadata");
    }
}
