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

/// What every typed id shares, so a store can read any of them back.
pub trait TypedId: Sized {
    const PREFIX: &'static str;

    /// An id read back from the store that wrote it as this type; not
    /// re-checked, since only a typed id was ever written there.
    fn stored(s: String) -> Self;
}

/// Declares one id type per resource: a `String` that is known to carry the
/// resource's prefix, so an agent id cannot be passed where a session id is
/// wanted and a malformed id never gets past the edge that parsed it.
///
/// - `mint()` makes a fresh id; `parse(field, s)` checks one from a caller
///   (the error names the field); `TypedId::stored(s)` wraps one read back
///   from the service's own store, which only ever wrote typed ids.
/// - Serde reads and writes the bare string; reading checks the prefix.
/// - SQL binds and reads it as the bare string.
/// - It dereferences to `str`, so it is passed wherever a `&str` is taken
///   (SQL binds, wire fields) without a conversion at every call.
macro_rules! typed_ids {
    ($($(#[$m:meta])* $name:ident = $prefix:literal;)+) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh id.
            pub fn mint() -> Self {
                $name(new_id($prefix))
            }

            /// Checks an id a caller sent, without keeping it; the error
            /// names `field`.
            pub fn check(field: &str, s: &str) -> Result<()> {
                self::check(field, $prefix, s)
            }

            /// Checks an id a caller sent; the error names `field`.
            pub fn parse(field: &str, s: &str) -> Result<Self> {
                check(field, $prefix, s)?;
                Ok($name(s.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TypedId for $name {
            const PREFIX: &'static str = $prefix;
            fn stored(s: String) -> Self {
                $name(s)
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        // Stored and bound as the bare string; read back unchecked, as
        // `TypedId::stored` is.
        impl<DB: sqlx::Database> sqlx::Type<DB> for $name
        where
            String: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <String as sqlx::Type<DB>>::type_info()
            }
            fn compatible(ty: &DB::TypeInfo) -> bool {
                <String as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $name
        where
            String: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
            ) -> std::result::Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                self.0.encode_by_ref(buf)
            }
        }

        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $name
        where
            String: sqlx::Decode<'r, DB>,
        {
            fn decode(value: <DB as sqlx::Database>::ValueRef<'r>) -> std::result::Result<Self, sqlx::error::BoxDynError> {
                <String as sqlx::Decode<'r, DB>>::decode(value).map($name)
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                if is_valid($prefix, &s) {
                    Ok($name(s))
                } else {
                    Err(serde::de::Error::custom(format!("expected an id of the form {}_<ulid>, got {s:?}", $prefix)))
                }
            }
        }
    )+};
}

typed_ids! {
    /// An Environment: the scope most resources live in.
    EnvironmentId = "env";
    /// A principal: a user or a service account.
    PrincipalId = "prin";
    /// An API key (the id, never the secret).
    KeyId = "key";
    /// A group of principals.
    GroupId = "grp";
    /// A PermissionAssignment.
    AssignmentId = "pa";
    /// An ActionPolicy.
    PolicyId = "apol";
    /// An ActionApproval: one answer to one gated tool call.
    ApprovalId = "aapr";
    /// A StandingApproval: a remembered answer.
    StandingApprovalId = "sapr";
    /// An audit record.
    AuditId = "aud";
    /// An Agent.
    AgentId = "agt";
    /// A sandbox profile.
    SandboxProfileId = "sbp";
    /// A Deployment.
    DeploymentId = "dep";
    /// A model routing profile.
    RoutingProfileId = "mrp";
    /// A tool source (MCP server or connection tools).
    ToolSourceId = "tsrc";
    /// A Connection: an endpoint and the credential the platform holds for it.
    ConnectionId = "conn";
    /// A ConnectionVault: a named bundle of `use_connection` grants.
    VaultId = "cvlt";
    /// A Skill: versioned instructions and files mounted read-only.
    SkillId = "skl";
    /// A Session.
    SessionId = "sess";
    /// A Run: one turn of work on a Session.
    RunId = "run";
    /// An event in a Session's log.
    EventId = "evt";
    /// A Budget.
    BudgetId = "bud";
    /// A webhook endpoint.
    EndpointId = "whep";
    /// One webhook delivery.
    DeliveryId = "wdel";
    /// A self-hosted Runner (managed runners name themselves with the same
    /// prefix, but are never stored).
    RunnerId = "rnr";
    /// A RunnerPairing: the single-use code a Runner redeems.
    PairingId = "rpair";
    /// A file captured from a Session's outputs.
    FileId = "file";
    /// An Automation: a job started by a schedule, a webhook or a request.
    AutomationId = "auto";
    /// One execution of an Automation.
    FiringId = "afire";
    /// A webhook event an Automation's admission filter stopped.
    FilteredDeliveryId = "afdl";
    /// An AutomationGraph: a document that compiles to an Automation.
    GraphId = "agph";
    /// One apply of an AutomationGraph (its journal entry).
    ApplicationId = "agap";
    /// A MemoryStore: a versioned tree of text documents.
    MemoryStoreId = "mstr";
    /// A MemoryProposal: changes to a store awaiting review.
    ProposalId = "mprop";
    /// A Dream: a curation pass over a store and Sessions.
    DreamId = "drm";
    /// An Outcome: a revise-until-done loop inside a Session.
    OutcomeId = "outc";
    /// A SessionThread: one agent's context inside a Session.
    SessionThreadId = "sthr";
    /// A work item: an external_tools Session's claim on a worker (api.md §17.13).
    WorkId = "wrk";
    /// A console session: a browser's sign-in, bound to one API key.
    ConsoleSessionId = "csn";
    /// An EvaluatorQualification: a (provider, model) reviewed as fit to
    /// judge for one purpose, until it expires or is revoked.
    EvaluatorQualificationId = "evq";
    /// A CheckEvaluation: one model judgment of an Automation's Check.
    CheckEvaluationId = "ceval";
    /// A ConnectionCall: one `tools/call` an Automation's step_connection
    /// sent.
    ConnectionCallId = "ccall";
    /// A SkillProposal: a SKILL.md an Automation learnt, for a person to
    /// adopt or reject.
    SkillProposalId = "skprop";
    /// A WebhookSource: an Automation's events from a provider's resource.
    WebhookSourceId = "whsrc";
    /// A ProviderWebhookRegistration: a WebhookSource's hook at its
    /// provider (or its callback, registered by hand).
    ProviderRegistrationId = "pwreg";
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

    #[test]
    fn typed_ids_carry_their_prefix_through_every_door() {
        let a = AgentId::mint();
        assert!(a.starts_with("agt_"), "{a}");
        assert_eq!(AgentId::parse("agent_id", &a).expect("own id parses"), a);
        let err = AgentId::parse("agent_id", SessionId::mint().as_str()).expect_err("a session id is not an agent id");
        assert!(err.to_string().contains("agent_id"), "{err}");
        let json = serde_json::to_string(&a).expect("serialize");
        assert_eq!(json, format!("\"{a}\""));
        assert_eq!(serde_json::from_str::<AgentId>(&json).expect("round trip"), a);
        assert!(serde_json::from_str::<AgentId>("\"sess_01h\"").is_err());
        let s: String = a.clone().into();
        assert_eq!(a, s);
    }
}
