//! Group commit for the embedded (SQLite) event log.
//!
//! SQLite has one writer and the event log fsyncs every commit (an event is
//! durable before its 201), so one transaction per append would cap the
//! whole installation at one fsync per event. Instead, changes queue for a
//! single writer task, which applies every change waiting in one
//! transaction — a change whose compare-and-set lost writes nothing, and
//! one that fails sends the group back to commit change by change — and
//! commits them together: one fsync for the group. Nobody is answered before that commit.
//!
//! PostgreSQL needs none of this: concurrent transactions there share WAL
//! flushes on their own.

use super::Change;
use super::sql::{Order, apply};
use crate::model::{Event, Session};
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, AnyConnection, Connection};
use checkfu_store::{Db, db_err};
use tokio::sync::{mpsc, oneshot};

type Outcome = Result<Option<(Session, Vec<Event>)>>;

/// The most changes one commit carries; more wait for the next.
const MAX_GROUP: usize = 256;

/// A queue into the writer task.
#[derive(Clone, Debug)]
pub struct GroupCommit {
    queue: mpsc::Sender<(Change, oneshot::Sender<Outcome>)>,
}

impl GroupCommit {
    /// Starts the writer on `db`; it stops when the last handle is dropped.
    pub fn start(db: Db) -> GroupCommit {
        let (queue, rx) = mpsc::channel(4 * MAX_GROUP);
        tokio::spawn(write(db, rx));
        GroupCommit { queue }
    }

    /// Commits `change` with whatever else is waiting; `None` when its
    /// compare-and-set lost.
    pub async fn commit(&self, change: Change) -> Outcome {
        let (tx, rx) = oneshot::channel();
        self.queue.send((change, tx)).await.map_err(|_| Error::unavailable("the event log's writer stopped"))?;
        rx.await.map_err(|_| Error::unavailable("the event log's writer stopped"))?
    }
}

async fn write(db: Db, mut rx: mpsc::Receiver<(Change, oneshot::Sender<Outcome>)>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while rx.recv_many(&mut group, MAX_GROUP).await > 0 {
        let outcomes = commit_group(&db, &group).await;
        for ((_, reply), outcome) in group.drain(..).zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }
}

/// Applies each change under its own savepoint, then commits them all:
/// flushed to disk when any change asks for it, else written (and flushed
/// by the next flushed commit, or SQLite's checkpoint).
async fn commit_group(db: &Db, group: &[(Change, oneshot::Sender<Outcome>)]) -> Vec<Outcome> {
    let failed = |e: &Error| group.iter().map(|_| Err(e.clone())).collect();
    // One connection for the whole group, so the durability set here is
    // the one its commit runs under.
    let mut conn = match db.pool.acquire().await {
        Ok(c) => c,
        Err(e) => return failed(&db_err(e)),
    };
    let flush = group.iter().any(|(c, _)| c.flush);
    if !flush && let Err(e) = sqlx::query("PRAGMA synchronous=NORMAL").execute(&mut *conn).await {
        return failed(&db_err(e));
    }
    let outcomes = match apply_all(&mut conn, group).await {
        Ok(outcomes) => outcomes,
        Err(e) => failed(&e),
    };
    if !flush && let Err(e) = sqlx::query("PRAGMA synchronous=FULL").execute(&mut *conn).await {
        // The connection would go on committing unflushed: drop it.
        tracing::error!(error = %e, "could not restore synchronous=FULL; closing the event log's connection");
        conn.detach();
    }
    outcomes
}

/// The whole group in one transaction. A change that loses its
/// compare-and-set writes nothing (its checks come first), so no savepoints
/// are needed; a change that fails outright rolls the group back, and the
/// group is then committed change by change, each answered on its own.
async fn apply_all(conn: &mut AnyConnection, group: &[(Change, oneshot::Sender<Outcome>)]) -> Result<Vec<Outcome>> {
    let mut tx = conn.begin().await.map_err(db_err)?;
    let mut outcomes = Vec::with_capacity(group.len());
    for (change, _) in group {
        match apply(&mut tx, change, Order::GuardFirst).await {
            Ok(done) => outcomes.push(Ok(done)),
            Err(_) => {
                tx.rollback().await.map_err(db_err)?;
                return Ok(one_by_one(conn, group).await);
            }
        }
    }
    tx.commit().await.map_err(db_err)?;
    Ok(outcomes)
}

async fn one_by_one(conn: &mut AnyConnection, group: &[(Change, oneshot::Sender<Outcome>)]) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(group.len());
    for (change, _) in group {
        let outcome = async {
            let mut tx = conn.begin().await.map_err(db_err)?;
            let done = apply(&mut tx, change, Order::GuardFirst).await?;
            tx.commit().await.map_err(db_err)?;
            Ok(done)
        }
        .await;
        outcomes.push(outcome);
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{ev, session};
    use crate::store::{SessionsStore, SqlSessionsStore};
    use checkfu_store::{Durability, Location};

    #[tokio::test(flavor = "multi_thread")]
    async fn one_group_answers_each_change_on_its_own() {
        let dir = tempfile::tempdir().expect("dir");
        let location = Location::SqliteDir(dir.path().into());
        let db = Db::open_with(&location, "sessions", &crate::MIGRATIONS, Durability::Flushed).await.expect("db");
        let store = SqlSessionsStore::new(db.clone());
        let taken = ev("agent.message");
        store.insert_session(&session("sess_0"), &[ev("session.created"), taken.clone()], &[]).await.expect("insert");
        for id in ["sess_1", "sess_2", "sess_3"] {
            store.insert_session(&session(id), &[ev("session.created")], &[]).await.expect("insert");
        }
        let change = |id: &str, event, flush| {
            let (tx, _rx) = oneshot::channel();
            let cur = session(id);
            (Change { expected_version: cur.version, session: cur, events: vec![event], runs: vec![], claim_guard: None, flush }, tx)
        };
        let group = vec![
            change("sess_1", ev("agent.message"), false),
            change("sess_2", taken, true),
            change("sess_3", ev("agent.message"), false),
            // Decided from the version the first change of the group moved.
            change("sess_1", ev("agent.message"), false),
        ];
        let outcomes = commit_group(&db, &group).await;
        assert!(matches!(outcomes[0], Ok(Some(_))), "{:?}", outcomes[0]);
        assert!(outcomes[1].is_err(), "a taken event id fails its own change");
        assert!(matches!(outcomes[2], Ok(Some(_))), "{:?}", outcomes[2]);
        assert!(matches!(outcomes[3], Ok(None)), "a lost compare-and-set: {:?}", outcomes[3]);
        let logged = |id: &'static str| {
            let store = store.clone();
            async move { store.list_events(id, 0, 10, &[]).await.expect("list").len() }
        };
        assert_eq!((logged("sess_1").await, logged("sess_2").await, logged("sess_3").await), (2, 1, 2));
        // A group that needed no flush leaves the connection flushing again.
        let unflushed = vec![change("sess_3", ev("agent.message"), false)];
        commit_group(&db, &unflushed).await;
        use checkfu_store::sqlx::Row;
        let mode: i64 = sqlx::query("PRAGMA synchronous").fetch_one(&db.pool).await.expect("pragma").try_get(0).expect("mode");
        assert_eq!(mode, 2, "FULL");
    }
}
