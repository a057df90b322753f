//! The log component: Sessions' rows and their gapless event log. It reads
//! a Session (from the snapshots of recently changed ones when a change is
//! being decided), commits a change — a `Draft` its caller decides — with
//! its events in one compare-and-set (`commit.rs`), publishes what it
//! committed to the live hub and the outbox relay, and serves the log's
//! pages and live streams. A commit that admits a Run hands it to a claim
//! waiting here; what a change means — admission, settling, grading — is
//! its caller's.

mod commit;
pub mod continuation;
pub use commit::Gradings;
pub(crate) use commit::{Requeue, lease_lost};

use crate::handoff::Parked;
use crate::live::{Hub, Item};
use crate::model::*;
use crate::store::{Change, SessionsStore, View};
use checkfu_core::cache::Bounded;
use checkfu_core::id::{RunId, SessionId};
use checkfu_core::{Error, Result};
use std::sync::Arc;
use tokio::sync::{Notify, mpsc};

/// A Session as last committed here: its primary's active Run and its
/// child threads' active Runs.
type Snapshot = (Session, Option<Run>, Vec<Run>);

/// How long a claimed Run's lease lasts without a heartbeat.
pub const DEFAULT_LEASE_MS: i64 = 15_000;

/// Session snapshots kept in memory; beyond this the cache starts over.
const SNAPSHOT_CACHE: usize = 10_000;

#[derive(Clone)]
pub struct Log {
    store: Arc<dyn SessionsStore>,
    /// Live events and previews, shared with the other replicas when fanned
    /// out.
    pub(crate) hub: Arc<Hub>,
    /// The last committed state of recently changed Sessions. A change is
    /// decided from it and committed with a compare-and-set on `version`,
    /// so a stale entry only costs a retry from a fresh read.
    snapshots: Arc<Bounded<SessionId, Snapshot>>,
    /// Woken after each commit, so the outbox relay publishes at once.
    outbox_wake: Option<Arc<Notify>>,
    /// Claims waiting on this replica, for hand-offs.
    pub(crate) parked: Arc<Parked>,
    /// Woken whenever a Run becomes claimable.
    pub(crate) work: Arc<Notify>,
    /// How long a claimed Run's lease lasts without a heartbeat.
    pub(crate) lease_ms: i64,
    /// Gradings commits started, for the outcomes' grader.
    pub gradings: Arc<Gradings>,
}

impl Log {
    pub fn new(store: Arc<dyn SessionsStore>) -> Log {
        Log {
            store,
            hub: Arc::new(Hub::default()),
            snapshots: Arc::new(Bounded::new(SNAPSHOT_CACHE)),
            outbox_wake: None,
            parked: Arc::default(),
            work: Arc::new(Notify::new()),
            lease_ms: DEFAULT_LEASE_MS,
            gradings: Arc::default(),
        }
    }

    /// Shares live events and previews with the other replicas through
    /// `fanout`.
    pub async fn with_fanout(mut self, fanout: Arc<dyn checkfu_ephemeral::Fanout>) -> Result<Log> {
        self.hub = Hub::shared(fanout).await?;
        Ok(self)
    }

    pub fn with_outbox_wake(mut self, wake: Arc<Notify>) -> Log {
        self.outbox_wake = Some(wake);
        self
    }

    pub async fn session(&self, id: &str) -> Result<Session> {
        let id = SessionId::parse("id", id)?;
        self.store.get_session(&id).await?.ok_or_else(|| Error::not_found("session", &id))
    }

    /// The Session with its primary's and children's active Runs, to decide
    /// a change from: the snapshot last committed here when `cached` and
    /// there is one, else read from the store.
    pub(crate) async fn state(&self, session_id: &SessionId, cached: bool) -> Result<Snapshot> {
        if let Some(snapshot) = cached.then(|| self.snapshots.get(session_id)).flatten() {
            return Ok(snapshot);
        }
        let session = self.session(session_id).await?;
        let children = if session.threads.is_empty() { vec![] } else { self.store.child_runs(session_id).await? };
        let run = self.store.active_run(session_id).await?;
        Ok((session, run, children))
    }

    /// Commits `change` if the Session is still at its expected version,
    /// remembering `active` (its Runs after the change) and publishing the
    /// events; `None` when another writer got there first.
    pub(crate) async fn commit(&self, change: Change, active: (Option<Run>, Vec<Run>)) -> Result<Option<(Session, Vec<Event>)>> {
        let session_id = change.session.id.clone();
        match self.store.commit(change).await? {
            Some((session, events)) => {
                self.remember(session.clone(), active.0, active.1);
                self.publish(&session.id, &events);
                Ok(Some((session, events)))
            }
            None => {
                self.snapshots.remove(&session_id);
                Ok(None)
            }
        }
    }

    /// A Session the store just created, with its first events and the
    /// Runs it wrote.
    pub(crate) fn created(&self, session: &Session, run: Option<Run>, events: &[Event], written: &[Run]) {
        self.remember(session.clone(), run, vec![]);
        self.publish(&session.id, events);
        self.after_commit(&session.id, events, commit::queues(written));
    }

    /// Wakes the outbox relay and sends committed events live.
    fn publish(&self, session_id: &str, events: &[Event]) {
        if let Some(w) = &self.outbox_wake {
            w.notify_one();
        }
        for e in events {
            self.hub.publish(session_id, Item::Event(e.clone()));
        }
    }

    /// The active Run of a recently changed Session, as last committed here.
    pub(crate) fn cached_active_run(&self, session_id: &str) -> Option<Run> {
        self.snapshots.get(session_id).and_then(|(_, run, _)| run)
    }

    /// A recently changed Session's active Run `run_id` (of any thread), as
    /// last committed here.
    pub(crate) fn cached_run(&self, session_id: &str, run_id: &RunId) -> Option<Run> {
        let (_, run, children) = self.snapshots.get(session_id)?;
        run.into_iter().chain(children).find(|r| &r.id == run_id)
    }

    /// A recently changed Session and its primary's active Run, as last
    /// committed here.
    pub(crate) fn cached_state(&self, session_id: &str) -> Option<(Session, Option<Run>)> {
        self.snapshots.get(session_id).map(|(s, run, _)| (s, run))
    }

    fn remember(&self, session: Session, run: Option<Run>, child_runs: Vec<Run>) {
        self.snapshots.insert(session.id.clone(), (session, run, child_runs));
    }

    /// A page of one view of the log: `view` is `""` (the primary view),
    /// `"all"` or a thread's id (api.md §15.2).
    pub async fn list_events(
        &self,
        session_id: &str,
        view: &str,
        after_seq: i64,
        limit: u32,
        types: &[String],
    ) -> Result<(Vec<Event>, bool)> {
        let s = self.session(session_id).await?;
        let view = match view {
            "" => View::Primary,
            "all" => View::All,
            t if t == crate::model::primary_of(&s.id) => View::Primary,
            t if s.threads.iter().any(|c| c.id == t) => View::Child(t.to_string()),
            t => return Err(Error::not_found("session_thread", t)),
        };
        let session_id = s.id;
        if !(0..=1000).contains(&limit) {
            return Err(Error::invalid_field("limit", "limit must be between 1 and 1000"));
        }
        if after_seq < 0 {
            return Err(Error::invalid_field("after_seq", "after_seq must not be negative"));
        }
        let limit = if limit == 0 { 100 } else { i64::from(limit) };
        let mut rows = self.store.list_events(&session_id, &view, after_seq, limit + 1, types).await?;
        let more = rows.len() as i64 > limit;
        rows.truncate(limit as usize);
        Ok((rows, more))
    }

    /// Streams persisted events after `after_seq`, then live ones, with no gap
    /// and no duplicate; previews of `delta_types` are interleaved.
    pub async fn subscribe(&self, session_id: &str, after_seq: i64, delta_types: Vec<String>, out: mpsc::Sender<Item>) -> Result<()> {
        let feed = self.open_feed(session_id).await?;
        self.follow(feed, Some(after_seq), delta_types, out).await
    }

    /// Subscribes to a Session's live items on this replica. Previews are
    /// never replayed, so a stream's caller is answered only once this is
    /// done: a turn started after the answer shows all its previews.
    pub async fn open_feed(&self, session_id: &str) -> Result<Feed> {
        // The position is read before subscribing: every event committed
        // after the subscription is past it, so a live-only follower sends
        // each one. (Read after, it could already count an event the hub has
        // yet to deliver, and that event would be dropped as old.)
        let session = self.session(session_id).await?;
        let rx = self.hub.subscribe(&session.id);
        Ok(Feed { session_id: session.id, opened_at: session.last_seq, rx })
    }

    /// Sends `feed`'s items to `out`: persisted events after `after_seq`
    /// first (`None`: only events committed after the feed opened), then
    /// live ones, with no gap and no duplicate; previews of `delta_types`
    /// interleaved.
    pub async fn follow(&self, feed: Feed, after_seq: Option<i64>, delta_types: Vec<String>, out: mpsc::Sender<Item>) -> Result<()> {
        let Feed { session_id, opened_at, mut rx } = feed;
        let session_id = &session_id;
        // Subscribed first, then the log is replayed: nothing falls between.
        let mut cursor = match after_seq {
            Some(after) => self.replay(session_id, after.max(0), &out).await?,
            None => opened_at,
        };
        loop {
            let item = tokio::select! {
                r = rx.recv() => r,
                () = out.closed() => return Ok(()),
            };
            match item {
                Ok(Item::Event(e)) => {
                    if e.seq <= cursor {
                        continue;
                    }
                    if e.seq > cursor + 1 {
                        cursor = self.replay(session_id, cursor, &out).await?;
                        if e.seq <= cursor {
                            continue;
                        }
                    }
                    cursor = e.seq;
                    if out.send(Item::Event(e)).await.is_err() {
                        return Ok(());
                    }
                }
                Ok(Item::Delta(d)) => {
                    if delta_types.contains(&d.event_type) && out.send(Item::Delta(d)).await.is_err() {
                        return Ok(());
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    cursor = self.replay(session_id, cursor, &out).await?;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
            }
        }
    }

    async fn replay(&self, session_id: &SessionId, mut cursor: i64, out: &mpsc::Sender<Item>) -> Result<i64> {
        loop {
            let batch = self.store.list_events(session_id, &View::All, cursor, 500, &[]).await?;
            let n = batch.len();
            for e in batch {
                cursor = e.seq;
                if out.send(Item::Event(e)).await.is_err() {
                    return Ok(cursor);
                }
            }
            if n < 500 {
                return Ok(cursor);
            }
        }
    }
}

/// A Session's live items on this replica, from the moment it was opened
/// ([`Log::open_feed`]).
pub struct Feed {
    session_id: SessionId,
    /// The Session's last seq just before the subscription.
    opened_at: i64,
    rx: tokio::sync::broadcast::Receiver<Item>,
}
