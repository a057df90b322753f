//! The process's open-file limit. Every SSE subscriber, mesh peer and
//! pooled connection holds a descriptor, and the usual default soft limit
//! (1,024) would make a gateway refuse its thousandth stream while the hard
//! limit allows far more: servers raise the soft limit to the hard one at
//! start, as most long-lived network daemons do.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Raises the soft limit on open files toward `want` (the hard limit when
/// `None`), never above the hard limit and never lowering it. Returns the
/// soft limit in force afterwards (`None`: unlimited).
pub fn raise_soft_limit(want: Option<u64>) -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    let target = match (want, limit.maximum) {
        (Some(w), Some(max)) => Some(w.min(max)),
        (Some(w), None) => Some(w),
        (None, max) => max,
    };
    let raise = match (limit.current, target) {
        (Some(now), Some(t)) => t > now,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if raise {
        // Refused only if the hard limit moved under us: the limit stays
        // as it was, which the caller reads back below.
        let _ = setrlimit(Resource::Nofile, Rlimit { current: target, maximum: limit.maximum });
    }
    getrlimit(Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_rises_to_what_is_asked_and_never_falls() {
        let before = getrlimit(Resource::Nofile);
        let hard = before.maximum;
        // Asking for less than the current soft limit leaves it alone.
        assert_eq!(raise_soft_limit(Some(16)), before.current);
        let after = raise_soft_limit(None);
        assert_eq!(after, hard, "raised to the hard limit");
        assert_eq!(getrlimit(Resource::Nofile).maximum, hard, "the hard limit is untouched");
    }
}
