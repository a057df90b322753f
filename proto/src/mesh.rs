//! Who may call what on the internal mesh.
//!
//! Every internal RPC is made by a role, and every server checks that role
//! against one table ([`allowed`]) before the handler runs. The calling role
//! reaches the server as a [`Caller`] request extension, set either by the
//! in-process transport (the role that built the client) or by the internal
//! listener (the roles named by the peer's verified mesh certificate).
//! Extensions never travel over the wire, so a caller cannot name itself:
//! a request without one is refused as unauthenticated.
//!
//! Fields that act for a person (`actor_id`, `responder_id`, `in_session`)
//! are therefore only ever set by the roles this table lets call the RPCs
//! that carry them: the gateway (which authenticated the person's API key)
//! and, for approvals answered inside a Session, the sessions role.

use checkfu_core::Role;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower::Service;

/// The roles that made an internal call (one, in process; those its
/// certificate names, over the mesh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caller(u16);

impl Caller {
    pub fn of(roles: impl IntoIterator<Item = Role>) -> Caller {
        Caller(roles.into_iter().fold(0, |bits, r| bits | (1 << r as u16)))
    }

    pub fn is(self, role: Role) -> bool {
        self.0 & (1 << role as u16) != 0
    }

    /// Whether any of the caller's roles is among `allowed`.
    pub fn any_of(self, allowed: &[Role]) -> bool {
        allowed.iter().any(|r| self.is(*r))
    }

    pub fn roles(self) -> Vec<Role> {
        Role::ALL.into_iter().filter(|r| self.is(*r)).collect()
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// The caller of a request a handler received, if the mesh named one.
pub fn caller<T>(req: &tonic::Request<T>) -> Option<Caller> {
    req.extensions().get::<Caller>().copied()
}

use Role::{CapabilityGateway, Gateway, Memory, Runner, Scheduler, Sessions};

/// The roles allowed to call the gRPC method at `path`
/// (`/checkfu.sessions.v1.SessionsService/CreateSession`). Anything not
/// listed is refused: a new RPC is callable only once it is added here.
pub fn allowed(path: &str) -> &'static [Role] {
    let Some((service, method)) = path.strip_prefix('/').and_then(|p| p.split_once('/')) else {
        return &[];
    };
    match (service, method) {
        // Every authenticated role may ask whether another is serving.
        ("grpc.health.v1.Health", _) => &Role::ALL,

        // Governance: the gateway acts for the person whose key it
        // checked; sessions and the runner ask and record on behalf of a
        // Session, never for a person they did not authenticate.
        ("checkfu.governance.v1.GovernanceService", m) => match m {
            "Bootstrap" => &[],
            // The memory role checks access to its stores itself.
            "Check" => &[Gateway, Sessions, Runner, Scheduler, Memory],
            "EvaluateAction" => &[Gateway, Sessions, Runner, Scheduler],
            // An Automation's readiness reads its Environment and service
            // Principal; a store's owner and a proposal's decider are
            // checked against them.
            "GetEnvironment" | "GetPrincipal" => &[Gateway, Scheduler, Memory],
            // The gateway forwards a self-hosted Runner's request from the
            // public edge, with the Run's capability token (governance
            // requires it then).
            // Sessions asks for a multiagent spawn or message that needs
            // approval (the platform's own tools, api.md §15.3).
            "RequestApproval" => &[Runner, Gateway, Sessions],
            "GetStandingApproval" => &[Gateway, Sessions],
            "GetActionApproval" => &[Gateway, Sessions, Runner, Scheduler],
            "RespondToApproval" => &[Gateway, Sessions],
            "ListUnsettledApprovals" | "WithdrawApproval" => &[Sessions],
            "MarkApprovalSettled" => &[Sessions, Scheduler],
            // An Automation's approval steps.
            "RequestStepApproval" | "ListUnsettledStepApprovals" => &[Scheduler],
            // Services that change governed resources record it here.
            "RecordAudit" => &[CapabilityGateway, Scheduler, Memory, Gateway],
            // A Dream's output store inherits its input store's rows.
            "CopyPermissionAssignments" => &[Memory],
            // A failed credential refresh is reported per vault too.
            "VaultsHolding" => &[CapabilityGateway],
            _ => &[Gateway],
        },
        ("checkfu.sessions.v1.SessionsService", m) => match m {
            // The capability gateway reads a Session's pinned sandbox
            // (its web_fetch allowlist).
            "GetSessionSandbox" => &[Gateway, CapabilityGateway],
            // Whoever serves a runner checks its capability token.
            "VerifyCapability" => &[Gateway],
            // An Automation's firing starts its child Session as the
            // Automation's service Principal, and settles from it; a graph's
            // Agent node naming an Agent is planned to its one deployment.
            "CreateSession" | "GetDeployment" | "ListDeployments" => &[Gateway, Scheduler],
            // A model Dream reads its Sessions' user messages.
            "ListEvents" => &[Gateway, Scheduler, Memory],
            // A store's owner is checked against its Agent or Session, and
            // a store is deleted only when no live Session mounts it.
            "GetSession" | "GetAgent" => &[Gateway, Scheduler, Memory],
            // A step an Outcome reviews settles by that Outcome.
            "ListOutcomes" => &[Gateway, Scheduler],
            // A continue_selected firing appends its input to an idle
            // Session and counts the usage of the Runs it caused (§18.4).
            "AppendUserEvent" | "ListRuns" => &[Gateway, Scheduler],
            // A graph's history selection lists the Sessions after its
            // frontier (§18.7).
            "ListSessions" => &[Gateway, Scheduler],
            _ => &[Gateway],
        },
        // The execution plane's protocol. On the mesh the managed runner
        // role claims managed Runs; self-hosted Runners reach it through the
        // gateway's public edge, and the sessions service then requires
        // their Runner credential on every call (and only they redeem).
        ("checkfu.runner.v1.RunnerService", "Redeem") => &[Gateway],
        ("checkfu.runner.v1.RunnerService", _) => &[Runner, Gateway],
        // Both check the Run's capability token on every call; the gateway
        // forwards a self-hosted Runner's calls from the public edge.
        ("checkfu.modelgateway.v1.ModelGatewayService", "Generate") => &[Runner, Gateway],
        // Platform tasks: a Dream's curation, an Outcome's grading, an
        // Automation's Checks. A Dream checks its routing profile's
        // Environment; a graph's plan finds its Checks' profiles, and its
        // readiness asks whether they have a qualified evaluator.
        ("checkfu.modelgateway.v1.ModelGatewayService", "RunTask") => &[Memory, Sessions, Scheduler],
        ("checkfu.modelgateway.v1.ModelGatewayService", "GetRoutingProfile") => &[Gateway, Memory, Scheduler],
        ("checkfu.modelgateway.v1.ModelGatewayService", "CheckEvaluators") => &[Gateway, Scheduler],
        ("checkfu.modelgateway.v1.ModelGatewayService", _) => &[Gateway],
        // An Automation's step_connection: planned, checked for readiness
        // and called by the scheduler (after governance allowed it); a
        // provider adapter's webhook calls through its Connection (§18.9).
        ("checkfu.capability.v1.CapabilityGatewayService", "ResolveStepTool" | "CallStepTool" | "CallProviderApi") => &[Scheduler],
        ("checkfu.capability.v1.CapabilityGatewayService", _) => &[Runner, Gateway],
        // Connections and their credentials are managed through the public
        // API only: the gateway checked who may act.
        ("checkfu.capability.v1.ConnectionsService", _) => &[Gateway],
        // Publication resolves a version's ToolSource declarations.
        ("checkfu.capability.v1.ToolSourcesService", "ResolveForPublication") => &[Sessions],
        ("checkfu.capability.v1.ToolSourcesService", _) => &[Gateway],
        // Uploads and skill bundles: the gateway checked who may act.
        // A graph's Skill proposal checks the skill it targets, and its
        // adoption (a person's decision) makes the skill's next version.
        ("checkfu.sessions.v1.SkillsService", "GetSkill" | "ListSkills" | "CreateSkill" | "CreateSkillVersion") => &[Gateway, Scheduler],
        ("checkfu.sessions.v1.FilesService", _) | ("checkfu.sessions.v1.SkillsService", _) => &[Gateway],
        ("checkfu.webhooks.v1.WebhooksService", _) => &[Gateway],
        ("checkfu.scheduler.v1.SchedulerService", _) => &[Gateway],
        // A Session's mounts are pinned, materialised and written back by
        // sessions for the Session's Principal.
        ("checkfu.memory.v1.MemoryService", "Mount" | "Materialize" | "Writeback" | "GetContent") => &[Sessions],
        // A graph's Memory steps (§18.7) read and write as the
        // Automation's service Principal, whose permissions the memory
        // service checks; only the scheduler writes `via:"automation"`.
        ("checkfu.memory.v1.MemoryService", "ReadDocument" | "GetStore") => &[Gateway, Scheduler],
        ("checkfu.memory.v1.MemoryService", "AutomationWrite") => &[Scheduler],
        ("checkfu.memory.v1.MemoryService", _) => &[Gateway],
        _ => &[],
    }
}

/// A generated tonic server behind the mesh's authorization: each call is
/// refused unless its [`Caller`] may make it.
#[derive(Debug, Clone)]
pub struct Authorized<S> {
    inner: S,
}

impl<S> Authorized<S> {
    pub fn new(inner: S) -> Self {
        Authorized { inner }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for Authorized<S> {
    const NAME: &'static str = S::NAME;
}

type Req = http::Request<tonic::body::Body>;
type Resp = http::Response<tonic::body::Body>;

impl<S> Service<Req> for Authorized<S>
where
    S: Service<Req, Response = Resp, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Resp;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Resp, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        match decide(req.extensions().get::<Caller>().copied(), req.uri().path()) {
            Ok(()) => Box::pin(self.inner.call(req)),
            Err(status) => {
                tracing::warn!(path = %req.uri().path(), code = ?status.code(), "internal call refused");
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}

/// Whether a call may proceed: refused unauthenticated without a caller,
/// permission denied for a caller the table does not list.
pub fn decide(caller: Option<Caller>, path: &str) -> Result<(), tonic::Status> {
    let Some(caller) = caller.filter(|c| !c.is_empty()) else {
        return Err(tonic::Status::unauthenticated("internal services accept only authenticated mesh roles"));
    };
    if caller.any_of(allowed(path)) {
        Ok(())
    } else {
        let names: Vec<&str> = caller.roles().into_iter().map(Role::name).collect();
        Err(tonic::Status::permission_denied(format!("the {} role may not call {path}", names.join("+"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOV: &str = "/checkfu.governance.v1.GovernanceService";

    #[test]
    fn a_call_without_a_caller_is_unauthenticated() {
        let e = decide(None, &format!("{GOV}/ListPrincipals")).expect_err("refused");
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        let e = decide(Some(Caller::default()), &format!("{GOV}/ListPrincipals")).expect_err("refused");
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn only_the_gateway_acts_for_a_person() {
        for m in [
            "CreateApiKey",
            "ListPrincipals",
            "CreatePermissionAssignment",
            "UpdateEnvironment",
            "Authenticate",
            "OpenConsoleSession",
            "ResolveConsoleSession",
            "CloseConsoleSession",
        ] {
            let path = format!("{GOV}/{m}");
            assert!(decide(Some(Caller::of([Gateway])), &path).is_ok(), "{m}");
            for r in [Sessions, Runner, CapabilityGateway, Role::Webhooks, Role::Governance] {
                let e = decide(Some(Caller::of([r])), &path).expect_err("refused");
                assert_eq!(e.code(), tonic::Code::PermissionDenied, "{r} calling {m}");
            }
        }
    }

    #[test]
    fn in_session_responses_and_withdrawals_come_from_sessions() {
        assert!(decide(Some(Caller::of([Sessions])), &format!("{GOV}/RespondToApproval")).is_ok());
        assert!(decide(Some(Caller::of([Runner])), &format!("{GOV}/RespondToApproval")).is_err());
        assert!(decide(Some(Caller::of([Gateway])), &format!("{GOV}/WithdrawApproval")).is_err());
        assert!(decide(Some(Caller::of([Runner])), &format!("{GOV}/RequestApproval")).is_ok());
        // Sessions asks only for the platform's own multiagent tools.
        assert!(decide(Some(Caller::of([Sessions])), &format!("{GOV}/RequestApproval")).is_ok());
        assert!(decide(Some(Caller::of([Role::Scheduler])), &format!("{GOV}/RequestApproval")).is_err());
    }

    #[test]
    fn the_capability_gateway_asks_which_vaults_hold_a_connection() {
        assert!(decide(Some(Caller::of([CapabilityGateway])), &format!("{GOV}/VaultsHolding")).is_ok());
        assert!(decide(Some(Caller::of([Sessions])), &format!("{GOV}/VaultsHolding")).is_err());
    }

    #[test]
    fn the_runner_protocol_and_generation_belong_to_runners() {
        // The gateway forwards self-hosted Runners' calls from the public
        // edge; the services then check their credential and token.
        assert!(decide(Some(Caller::of([Runner])), "/checkfu.runner.v1.RunnerService/Claim").is_ok());
        assert!(decide(Some(Caller::of([Gateway])), "/checkfu.runner.v1.RunnerService/Claim").is_ok());
        assert!(decide(Some(Caller::of([Sessions])), "/checkfu.runner.v1.RunnerService/Claim").is_err());
        assert!(decide(Some(Caller::of([Runner])), "/checkfu.runner.v1.RunnerService/Redeem").is_err(), "only through the edge");
        assert!(decide(Some(Caller::of([Runner])), "/checkfu.modelgateway.v1.ModelGatewayService/Generate").is_ok());
        assert!(decide(Some(Caller::of([Sessions])), "/checkfu.modelgateway.v1.ModelGatewayService/Generate").is_err());
        assert!(decide(Some(Caller::of([Runner])), "/checkfu.modelgateway.v1.ModelGatewayService/CreateRoutingProfile").is_err());
    }

    #[test]
    fn the_scheduler_runs_checks_but_only_admins_qualify_evaluators_through_the_gateway() {
        const MG: &str = "/checkfu.modelgateway.v1.ModelGatewayService";
        for m in ["RunTask", "CheckEvaluators", "GetRoutingProfile"] {
            assert!(decide(Some(Caller::of([Role::Scheduler])), &format!("{MG}/{m}")).is_ok(), "{m}");
        }
        for m in ["CreateEvaluatorQualification", "RevokeEvaluatorQualification", "ListEvaluatorQualifications"] {
            assert!(decide(Some(Caller::of([Gateway])), &format!("{MG}/{m}")).is_ok(), "{m}");
            for r in [Role::Scheduler, Sessions, Runner, Memory] {
                assert!(decide(Some(Caller::of([r])), &format!("{MG}/{m}")).is_err(), "{r} calling {m}");
            }
        }
        assert!(decide(Some(Caller::of([Runner])), &format!("{MG}/RunTask")).is_err());
    }

    #[test]
    fn only_the_scheduler_calls_a_connection_steps_tool_and_no_one_else_its_runs_tools() {
        const CG: &str = "/checkfu.capability.v1.CapabilityGatewayService";
        for m in ["ResolveStepTool", "CallStepTool", "CallProviderApi"] {
            assert!(decide(Some(Caller::of([Role::Scheduler])), &format!("{CG}/{m}")).is_ok(), "{m}");
            for r in [Gateway, Sessions, Runner, Memory] {
                assert!(decide(Some(Caller::of([r])), &format!("{CG}/{m}")).is_err(), "{r} calling {m}");
            }
        }
        for m in ["CallTool", "WebFetch"] {
            assert!(decide(Some(Caller::of([Role::Scheduler])), &format!("{CG}/{m}")).is_err(), "{m} is a Run's");
        }
    }

    #[test]
    fn unknown_paths_and_bootstrap_are_refused_to_everyone() {
        let all = Caller::of(Role::ALL);
        assert!(decide(Some(all), "/checkfu.nope.v1.X/Y").is_err());
        assert!(decide(Some(all), "not-a-path").is_err());
        assert!(decide(Some(all), &format!("{GOV}/Bootstrap")).is_err());
        assert!(decide(Some(Caller::of([Role::Memory])), "/grpc.health.v1.Health/Check").is_ok());
    }

    #[test]
    fn a_caller_playing_several_roles_has_each_roles_reach() {
        let c = Caller::of([Sessions, Runner]);
        assert_eq!(c.roles(), vec![Sessions, Runner]);
        assert!(decide(Some(c), "/checkfu.runner.v1.RunnerService/Claim").is_ok());
        assert!(decide(Some(c), &format!("{GOV}/WithdrawApproval")).is_ok());
        assert!(decide(Some(c), &format!("{GOV}/CreateApiKey")).is_err());
    }
}
