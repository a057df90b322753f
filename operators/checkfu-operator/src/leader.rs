//! Leader election over a `coordination.k8s.io` Lease, so two operator
//! replicas never both act: a replica reconciles only while it holds the
//! Lease, renews it well within its duration, and stops acting the moment a
//! renewal fails to hold it (the process then exits and starts over as a
//! candidate). Every write carries the Lease's `resourceVersion`, so two
//! candidates racing for an expired Lease cannot both win.

use crate::error::{Error, is_conflict};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use std::time::Duration;

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

impl Elector {
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: &str, duration: Duration) -> Elector {
        Elector { api: Api::namespaced(client, namespace), name: name.into(), identity: identity.into(), duration }
    }

    /// How often a holder renews: a third of the duration.
    pub fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    fn spec(&self, now: Timestamp, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
            acquire_time: Some(acquired.unwrap_or(MicroTime(now))),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Takes or renews the Lease; whether this replica holds it now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, Error> {
        let now = Timestamp::now();
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(self.spec(now, None, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(e.into()),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let expired = match (spec.renew_time, spec.lease_duration_seconds) {
            (Some(MicroTime(renewed)), Some(secs)) => renewed + SignedDuration::from_secs(i64::from(secs)) < now,
            _ => true,
        };
        let next = if holder == self.identity {
            self.spec(now, spec.acquire_time, spec.lease_transitions.unwrap_or(0))
        } else if holder.is_empty() || expired {
            self.spec(now, None, spec.lease_transitions.unwrap_or(0) + 1)
        } else {
            return Ok(false);
        };
        lease.spec = Some(next);
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the Lease up (on shutdown), so a standby takes over at once
    /// rather than when it expires.
    pub async fn release(&self) -> Result<(), Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else { return Ok(()) };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        lease.spec = Some(spec);
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits until this replica holds the Lease (or `shutdown`).
    pub async fn acquire(&self, shutdown: &tokio_util::sync::CancellationToken) -> bool {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return true,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "taking the leader lease failed"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = tokio::time::sleep(self.renew_every()) => {}
            }
        }
    }

    /// Renews the Lease until a renewal fails to hold it (returns) or
    /// `shutdown` (releases it, returns).
    pub async fn hold(&self, shutdown: &tokio_util::sync::CancellationToken) {
        let mut last = std::time::Instant::now();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => {
                    let _ = self.release().await;
                    return;
                }
                _ = tokio::time::sleep(self.renew_every()) => {}
            }
            match self.try_acquire_or_renew().await {
                Ok(true) => last = std::time::Instant::now(),
                Ok(false) => return,
                // A failed call is not a lost lease, until the lease would
                // have expired.
                Err(e) if last.elapsed() < self.duration.saturating_sub(self.renew_every()) => {
                    tracing::warn!(error = %e, "renewing the leader lease failed; retrying");
                }
                Err(_) => return,
            }
        }
    }
}
