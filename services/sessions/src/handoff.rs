//! Hand-off: a Run admitted while a runner waits in `claim` is claimed for
//! that runner in the very commit that admits it, and goes straight to the
//! waiting claim, which prepares its work item.
//!
//! Without it a turn pays, between the input's commit and the runner
//! starting, a wake-up, a query for claimable Runs and a second commit for
//! the claim. The claim a hand-off makes is the one `claim` would make (a
//! fresh lease, the next generation); only who writes it changes. If the
//! waiting claim is gone (the runner stopped) — before the Run reaches it,
//! or while it prepares the item — the Run is put back in the queue at once.
//!
//! The commit only hands over the Run and its Session: what a work item
//! holds (tools, sandbox, mounts, a capability) is the claim's side, so the
//! commit path does not depend on it.

use crate::model::{Run, Session};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;

/// What a hand-off gives a waiting claim: the Run claimed for it, with its
/// Session as the admitting commit left it.
pub(crate) type Handed = (Session, Run);

/// A claim waiting for work.
#[derive(Debug)]
pub(crate) struct Waiting {
    ticket: u64,
    pub runner_id: String,
    /// The Runs it may take (`runner::placement`; `""` managed).
    placement: String,
    tx: oneshot::Sender<Handed>,
}

impl Waiting {
    /// Gives the claim its Run; false when the claim is gone.
    pub fn give(self, session: Session, run: Run) -> bool {
        self.tx.send((session, run)).is_ok()
    }
}

/// The claims waiting on this replica, oldest first. A runner keeps at
/// most one claim open at a time, so this holds one entry per waiting
/// runner.
#[derive(Debug, Default)]
pub(crate) struct Parked {
    next: AtomicU64,
    queue: Mutex<VecDeque<Waiting>>,
}

impl Parked {
    /// Queues a claim; its work arrives on the receiver. Claims whose
    /// callers left without withdrawing (a cancelled RPC drops its receiver)
    /// are cleared here, so the queue holds only live ones.
    pub fn park(&self, runner_id: &str, placement: &str) -> (u64, oneshot::Receiver<Handed>) {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut q = self.lock();
        q.retain(|w| !w.tx.is_closed());
        q.push_back(Waiting { ticket, runner_id: runner_id.to_string(), placement: placement.to_string(), tx });
        (ticket, rx)
    }

    /// Withdraws a claim; false when a hand-off already took it (its work,
    /// or the closing of its channel, is then on the way).
    pub fn unpark(&self, ticket: u64) -> bool {
        let mut q = self.lock();
        let before = q.len();
        q.retain(|w| w.ticket != ticket);
        q.len() != before
    }

    /// The oldest claim still waiting for Runs of `placement`.
    pub fn take(&self, placement: &str) -> Option<Waiting> {
        let mut q = self.lock();
        q.retain(|w| !w.tx.is_closed());
        let at = q.iter().position(|w| w.placement == placement)?;
        q.remove(at)
    }

    /// How many claims wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Waiting>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionsService;
    use crate::model::RunStatus;
    use crate::store::conformance::{SID, message, service};
    use checkfu_core::testing::tid;
    use std::time::Duration;

    async fn until_parked(svc: &SessionsService) {
        for _ in 0..500 {
            if svc.log.parked.len() > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the claim never parked");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_run_admitted_while_a_claim_waits_is_claimed_in_the_admitting_commit() {
        let (svc, store, _dir) = service().await;
        let claimer = svc.clone();
        let claim = tokio::spawn(async move { claimer.runs.claim("rnr_a", Duration::from_secs(5)).await });
        until_parked(&svc).await;
        let (accepted, _) = svc.append_user_event(SID, message()).await.expect("append");
        // Already claimed when the input is answered: no second commit.
        let run = store.active_run(&tid(SID)).await.expect("read").expect("a run");
        assert_eq!((run.status, run.runner_id.as_str(), run.generation), (RunStatus::Running, "rnr_a", 1));
        let work = claim.await.expect("task").expect("claim").expect("work handed over");
        assert_eq!(work.run.id, run.id);
        assert_eq!(work.lease.lease_id, run.lease_id);
        assert_eq!(work.tail.last().map(|e| e.seq), Some(accepted.seq + 2), "the tail ends with the admitting commit's events");
        // The claim is not a commit of its own: the Session moved once.
        let s = store.get_session(&tid(SID)).await.expect("read").expect("exists");
        assert_eq!(s.version, 2, "created, then the message with its Run claimed");
        assert_eq!(svc.log.parked.len(), 0);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_run_handed_to_a_claim_that_left_goes_back_in_the_queue() {
        let (svc, store, _dir) = service().await;
        let (_ticket, gone) = svc.log.parked.park("rnr_gone", "");
        let taken = svc.log.parked.take("").expect("taken");
        svc.append_user_event(SID, message()).await.expect("append");
        let (run, session, _) =
            svc.log.transact(&tid(SID), |d| Ok(d.claim_run("rnr_gone", 15_000).expect("a run"))).await.expect("claimed by hand");
        drop(gone);
        svc.log.deliver(taken, session, run);
        let mut requeued = None;
        for _ in 0..200 {
            let r = store.active_run(&tid(SID)).await.expect("read").expect("a run");
            if r.status == RunStatus::Queued {
                requeued = Some(r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r = requeued.expect("the run was queued again");
        assert_eq!(r.runner_id, "");
        let work = svc.runs.claim("rnr_b", Duration::from_secs(1)).await.expect("claim").expect("claimable again");
        assert_eq!((work.run.id, work.run.runner_id.as_str()), (r.id, "rnr_b"));
    }

    /// A claim dropped while its handed Run's item was prepared (its
    /// runner left mid-claim) leaves an armed guard: the Run is queued again
    /// at once, not after its lease.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_handed_run_whose_claim_left_while_it_was_prepared_goes_back_in_the_queue() {
        let (svc, store, _dir) = service().await;
        svc.append_user_event(SID, message()).await.expect("append");
        let (run, _, _) =
            svc.log.transact(&tid(SID), |d| Ok(d.claim_run("rnr_gone", 15_000).expect("a run"))).await.expect("claimed by hand");
        drop(crate::log::Requeue::armed(svc.log.clone(), crate::model::Lease::of(&run)));
        let mut requeued = false;
        for _ in 0..200 {
            if store.active_run(&tid(SID)).await.expect("read").is_some_and(|r| r.status == RunStatus::Queued) {
                requeued = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(requeued, "the run was queued again");
        // A disarmed guard (the item reached its claim) leaves the Run held.
        let work = svc.runs.claim("rnr_b", Duration::from_secs(1)).await.expect("claim").expect("claimable again");
        crate::log::Requeue::armed(svc.log.clone(), work.lease.clone()).disarm();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let held = store.active_run(&tid(SID)).await.expect("read").expect("a run");
        assert_eq!((held.status, held.runner_id.as_str()), (RunStatus::Running, "rnr_b"));
    }

    #[test]
    fn claims_are_taken_oldest_first_and_withdrawn_ones_are_skipped() {
        let p = Parked::default();
        let (a, _ra) = p.park("rnr_a", "");
        let (_b, rb) = p.park("rnr_b", "");
        let (_c, _rc) = p.park("rnr_c", "");
        assert!(p.unpark(a), "a waiting claim withdraws");
        assert!(!p.unpark(a), "twice is a no-op");
        drop(rb);
        let (_d, rd) = p.park("rnr_d", "");
        assert_eq!(p.len(), 2, "parking clears a claim whose caller left");
        drop(rd);
        let (_e, _re) = p.park("rnr_e", "env_1/gpu");
        assert!(p.take("env_1/cpu").is_none(), "a claim takes only its own pool's Runs");
        let first = p.take("").expect("one waits");
        assert_eq!(first.runner_id, "rnr_c");
        assert!(p.take("").is_none(), "taking skips a claim whose caller left");
        assert_eq!(p.take("env_1/gpu").expect("the pool's claim").runner_id, "rnr_e");
    }
}
