//! Prefixed ids: `<prefix>_<ULID in lowercase>`. ULIDs sort by creation time,
//! so "newest first" is simply descending id order and a page cursor is an id.

use crate::error::{Error, Result};
use std::sync::Mutex;

static GENERATOR: Mutex<Option<ulid::Generator>> = Mutex::new(None);

/// A fresh id with the given prefix. Ids minted by one process are strictly
/// increasing, so resources created in the same millisecond keep their order.
pub fn new_id(prefix: &str) -> String {
    let ulid = {
        let mut guard = GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
        let generator = guard.get_or_insert_with(ulid::Generator::new);
        generator.generate().unwrap_or_else(|_| ulid::Ulid::generate())
    };
    format!("{prefix}_{}", ulid.to_string().to_lowercase())
}

/// Checks that `id` is well formed for `prefix`; the error names the field.
pub fn check(field: &str, prefix: &str, id: &str) -> Result<()> {
    if is_valid(prefix, id) {
        Ok(())
    } else {
        Err(Error::invalid_field(field, format!("{field} must be an id of the form {prefix}_<ulid>, got {id:?}")))
    }
}

pub fn is_valid(prefix: &str, id: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|u| u.len() == 26 && u.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()))
}

/// The prefix of an id (`"agt"` for `agt_01...`), if it has one.
pub fn prefix_of(id: &str) -> Option<&str> {
    id.split_once('_').map(|(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_lowercase_and_increasing() {
        let a = new_id("agt");
        let b = new_id("agt");
        assert!(is_valid("agt", &a), "{a}");
        assert!(a < b);
        assert_eq!(a, a.to_lowercase());
        assert!(!is_valid("sess", &a));
        assert!(!is_valid("agt", "agt_short"));
        assert!(check("agent_id", "agt", "sess_x").is_err());
    }
}
