//! `checkfu`'s API client commands: every resource a person manages, over
//! the public `/v1` API and nothing else (docs/cli.md).
//!
//! One convention everywhere: a resource is named by its id or its exact
//! name ([`resolve`]); `--json` prints the API's JSON; every create takes
//! `--idempotency-key`; `--environment` may be left out when one is
//! visible; secrets come from a file or standard input, never an argument.
//! Exit codes: 0 done, 1 refused by the API (its error type on stderr) or
//! failed, 2 a usage error ([`exit_code`]).

pub mod agents;
pub mod approvals;
pub mod audit;
pub mod automations;
pub mod budgets;
pub mod client;
pub mod deployments;
pub mod explain;
pub mod follow;
pub mod grants;
pub mod graphs;
pub mod identity;
pub mod memory;
pub mod output;
pub mod policies;
pub mod profiles;
pub mod reach;
pub mod resolve;
pub mod runners;
pub mod sessions;
pub mod skill_proposals;
pub mod uploads;
pub mod webhook_sources;
pub mod webhooks;

pub use client::{ClientArgs, exit_code};

use clap::Subcommand;

/// The API client commands, flattened into the binary's command line.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Environments: list, show, create, disable and enable.
    Environments {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: identity::EnvironmentsAction,
    },
    /// Agents: create, edit the draft from a file, publish, versions, diff.
    Agents {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: agents::AgentsAction,
    },
    /// AgentDeployments: pin an agent version, a model route and a sandbox.
    Deployments {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: deployments::DeploymentsAction,
    },
    /// SandboxProfiles and model routing profiles.
    Profiles {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: profiles::ProfilesAction,
    },
    /// Principals: the people and services that act.
    Principals {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: identity::PrincipalsAction,
    },
    /// Groups of Principals.
    Groups {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: identity::GroupsAction,
    },
    /// API keys: create (the secret shown once), list, revoke.
    Keys {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: identity::KeysAction,
    },
    /// PermissionAssignments: who may do what on what.
    Grants {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: grants::GrantsAction,
    },
    /// ActionPolicies, and a dry run of how a call would be decided.
    Policies {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: policies::PoliciesAction,
    },
    /// Budgets: caps on a Session's model spend or tokens.
    Budgets {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: budgets::BudgetsAction,
    },
    /// Outbound webhook endpoints and their deliveries.
    Webhooks {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: webhooks::WebhooksAction,
    },
    /// Self-hosted Runners: pairing codes, list, revoke (`checkfu runner`
    /// runs one).
    Runners {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: runners::RunnersAction,
    },
    /// The audit log.
    Audit {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: audit::AuditAction,
    },
    /// Sessions: create, list, send, follow, threads, interrupt, archive.
    #[command(visible_alias = "sessions")]
    Session {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: sessions::SessionAction,
    },
    /// ActionApprovals to answer, and StandingApprovals.
    Approvals {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: approvals::ApprovalsAction,
    },
    /// Automations: create, list, fire, pause, resume, delete, firings.
    #[command(visible_alias = "automations")]
    Automation {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: automations::AutomationAction,
    },
    /// Provider events' sources and their registrations at the provider.
    WebhookSources {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: webhook_sources::WebhookSourcesAction,
    },
    /// The providers this installation offers triggers from.
    ProviderTriggers {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// AutomationGraphs: create, revise, plan, apply, and test a node's prompt.
    #[command(visible_alias = "graphs")]
    Graph {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: graphs::GraphAction,
    },
    /// MemoryStores: list, read and write documents, history, and review
    /// proposals.
    Memory {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: memory::MemoryAction,
    },
    /// Uploaded Files: upload (with progress), list, delete.
    Files {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: uploads::FilesAction,
    },
    /// Skills: push a bundle directory (a new skill or its next version),
    /// list, archive.
    Skills {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: uploads::SkillsAction,
    },
    /// Connections and their credentials (a credential is read from a file
    /// or standard input, never the command line).
    Connections {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: reach::ConnectionsAction,
    },
    /// ConnectionVaults: Connections granted together.
    Vaults {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: reach::VaultsAction,
    },
    /// MCP ToolSources: list, show, sync, enable or disable a tool.
    ToolSources {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: reach::ToolSourcesAction,
    },
}

/// Runs one API client command, printing to standard output.
pub async fn run(command: Command) -> anyhow::Result<()> {
    let out = &mut std::io::stdout();
    match command {
        Command::Environments { client, action } => identity::environments(client, action, out).await,
        Command::Agents { client, action } => agents::agents(client, action, out).await,
        Command::Deployments { client, action } => deployments::deployments(client, action, out).await,
        Command::Profiles { client, action } => profiles::profiles(client, action, out).await,
        Command::Principals { client, action } => identity::principals(client, action, out).await,
        Command::Groups { client, action } => identity::groups(client, action, out).await,
        Command::Keys { client, action } => identity::keys(client, action, out).await,
        Command::Grants { client, action } => grants::grants(client, action, out).await,
        Command::Policies { client, action } => policies::policies(client, action, out).await,
        Command::Budgets { client, action } => budgets::budgets(client, action, out).await,
        Command::Webhooks { client, action } => webhooks::webhooks(client, action, out).await,
        Command::Runners { client, action } => runners::runners(client, action, out).await,
        Command::Audit { client, action } => audit::audit(client, action, out).await,
        Command::Session { client, action } => sessions::session(client, action, out).await,
        Command::Approvals { client, action } => approvals::approvals(client, action, out).await,
        Command::Automation { client, action } => automations::automation(client, action, out).await,
        Command::Graph { client, action } => graphs::graph(client, action, out).await,
        Command::WebhookSources { client, action } => webhook_sources::webhook_sources(client, action, out).await,
        Command::ProviderTriggers { client } => webhook_sources::provider_triggers(client, out).await,
        Command::Memory { client, action } => memory::memory(client, action, out).await,
        Command::Files { client, action } => uploads::files(client, action, out).await,
        Command::Skills { client, action } => uploads::skills(client, action, out).await,
        Command::Connections { client, action } => reach::connections(client, action, out).await,
        Command::Vaults { client, action } => reach::vaults(client, action, out).await,
        Command::ToolSources { client, action } => reach::tool_sources(client, action, out).await,
    }
}
