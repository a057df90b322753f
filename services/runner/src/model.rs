//! The runner's domain types: how governance decided a tool call, and how an
//! approval ended. Parsed once where they arrive (a governance answer, an
//! event in the log); a value this runner does not know counts as a refusal.

use checkfu_core::string_enum;

string_enum!(
    /// What an ActionPolicy decided for a call.
    Disposition { Allow = "allow", RequireApproval = "require_approval", Deny = "deny" }
);

string_enum!(
    /// An ActionApproval's answer.
    Decision { Approve = "approve", Deny = "deny" }
);

string_enum!(
    /// Where a resolved ActionApproval ended.
    ApprovalStatus { Approved = "approved", Denied = "denied", Expired = "expired" }
);

impl Disposition {
    /// Fails closed: anything but a known disposition is a denial.
    pub fn from_wire(s: &str) -> Disposition {
        Disposition::parse("disposition", s).unwrap_or(Disposition::Deny)
    }
}

impl Decision {
    /// Fails closed: anything but `approve` is a denial.
    pub fn from_wire(s: &str) -> Decision {
        Decision::parse("decision", s).unwrap_or(Decision::Deny)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_fail_closed() {
        assert_eq!(Disposition::from_wire("allow"), Disposition::Allow);
        assert_eq!(Disposition::from_wire("ALLOW"), Disposition::Deny);
        assert_eq!(Disposition::from_wire(""), Disposition::Deny);
        assert_eq!(Decision::from_wire("approve"), Decision::Approve);
        assert_eq!(Decision::from_wire("yes"), Decision::Deny);
    }
}
