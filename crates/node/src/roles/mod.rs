//! The role table: every role a node can play, in the order a node starts
//! them, each in its own file saying what it serves, which stores it
//! migrates, what it waits on and what runs in the background.
//!
//! `Node::start`, `checkfu migrate`, readiness and the Helm chart's role
//! list all follow from [`TABLE`]. Adding a role is one new file here, one
//! line in [`TABLE`] (and its name in `checkfu_core::Role`).

mod assembly;
pub(crate) mod capability_gateway;
mod gateway;
mod governance;
mod memory;
mod model_gateway;
mod runner;
mod scheduler;
mod sessions;
mod webhooks;

pub use assembly::{Assembly, Started};

use checkfu_core::Role;
use checkfu_store::{Location, Migrations};

/// A store a role owns: its schema (PostgreSQL) or file (SQLite) name, and
/// its migrations.
pub type Store = (&'static str, &'static Migrations);

/// The installation key (`secrets_key`), which seals stored secrets and
/// signs capability tokens; embedded, the one kept in the data directory.
/// Every process of an installation must have the same one.
pub(crate) fn installation_key(opts: &crate::options::NodeOptions, role: Role) -> anyhow::Result<checkfu_store::sealed::Sealer> {
    match (&opts.sealer, &opts.storage) {
        (Some(s), _) => Ok(s.clone()),
        (None, Location::SqliteDir(dir)) => checkfu_store::sealed::Sealer::load_or_create(&dir.join("secrets.key"))
            .map_err(|e| anyhow::anyhow!("the secrets key: {}", e.message)),
        (None, _) => anyhow::bail!(
            "the {role} role needs the installation key (it seals secrets and signs capability tokens): set CHECKFU_SECRETS_KEY (32+ characters), the same in every process"
        ),
    }
}

/// Keeps `name` holding a token while the node runs: caches keep nothing
/// under an epoch without one, and only the role that moves it mints one —
/// at start, and again whenever the store lost it (Redis restarted).
pub(crate) async fn keep_epoch(
    epochs: std::sync::Arc<dyn checkfu_ephemeral::Epochs>,
    name: &'static str,
    unannounced: &'static str,
    stop: tokio_util::sync::CancellationToken,
) {
    let outage = checkfu_ephemeral::outage::FailureLog::new(unannounced);
    loop {
        match epochs.ensure(name).await {
            Ok(()) => outage.recovered(),
            Err(e) => {
                outage.failed(&e);
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        }
    }
}

/// How often a role's outbox relay looks for events a wake-up missed.
const RELAY_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// What one role brings to a node.
#[async_trait::async_trait]
pub trait Play: Sync {
    fn role(&self) -> Role;

    /// The stores this role opens, each migrated at start and by
    /// `checkfu migrate`.
    fn stores(&self) -> &'static [Store] {
        &[]
    }

    /// Roles this one calls whose health, when another process plays them,
    /// is part of this node's readiness. Only roles at the edge (the
    /// gateway, the runner) wait: a mesh role that did would leave its
    /// Service whenever a dependency restarts, and the outage would spread.
    fn waits_on(&self) -> &'static [Role] {
        &[]
    }

    /// Opens the role's stores and adds what it serves to the node.
    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()>;
}

/// Every role, in start order: a role starts after those it calls in
/// process.
pub const TABLE: &[&dyn Play] = &[
    &governance::Governance,
    &model_gateway::ModelGateway,
    &sessions::Sessions,
    &capability_gateway::CapabilityGateway,
    &scheduler::Scheduler,
    &webhooks::Webhooks,
    &memory::Memory,
    &gateway::Gateway,
    &runner::Runner,
];

/// Applies every role's migrations at `location` (`checkfu migrate`, the
/// chart's pre-install hook), telling `done` each store migrated.
pub async fn migrate(location: &Location, mut done: impl FnMut(&str)) -> anyhow::Result<()> {
    use anyhow::Context;
    for (name, migrations) in TABLE.iter().flat_map(|p| p.stores()) {
        checkfu_store::Db::open(location, name, migrations).await.with_context(|| format!("migrating {name}"))?;
        done(name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_plays_every_role_once() {
        let roles: Vec<Role> = TABLE.iter().map(|p| p.role()).collect();
        let mut sorted = roles.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), roles.len(), "a role is listed twice: {roles:?}");
        assert_eq!(sorted, Role::ALL.to_vec(), "every Role has an entry");
    }

    #[test]
    fn a_role_starts_after_the_roles_it_waits_on() {
        for (i, p) in TABLE.iter().enumerate() {
            for dep in p.waits_on() {
                let at = TABLE.iter().position(|q| q.role() == *dep).expect("listed");
                assert!(at < i, "{} waits on {dep}, which starts after it", p.role());
            }
        }
    }

    #[test]
    fn store_names_are_unique() {
        let mut names: Vec<&str> = TABLE.iter().flat_map(|p| p.stores()).map(|(n, _)| *n).collect();
        let all = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all);
    }
}
