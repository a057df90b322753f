//! Group commit for the embedded (SQLite) event log.
//!
//! SQLite has one writer and the event log flushes accepted inputs to disk
//! before answering them, so one transaction per append would cap the
//! whole installation at one flush per event. Instead, writes queue for a
//! single writer task, which puts every write waiting into one transaction
//! — a change whose compare-and-set lost writes nothing, and one that fails
//! sends the group back to commit write by write — and commits them
//! together: one flush for the group. Nobody is answered before that
//! commit.
//!
//! PostgreSQL needs none of this: concurrent transactions there share WAL
//! flushes on their own.

use super::Change;
use super::log_writes::{Order, apply, create};
use crate::model::{Event, NewEvent, Run, Session};
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, AnyConnection, Connection};
use checkfu_store::{Db, db_err};
use tokio::sync::{mpsc, oneshot};

/// One write to the log, with the trace of the request that made it (its
/// events carry it to Kafka; the writer task has no trace of its own).
#[derive(Debug)]
enum Write {
    /// A change to a Session; `None` back when its compare-and-set lost.
    Change { change: Change, traceparent: String },
    /// A new Session with its first events and Runs (always flushed: it
    /// answers a client).
    Create { session: Session, events: Vec<NewEvent>, runs: Vec<Run>, traceparent: String },
}

#[derive(Debug)]
enum Done {
    Changed(Option<Box<(Session, Vec<Event>)>>),
    Created(Vec<Event>),
}

type Outcome = Result<Done>;
type Queued = (Write, oneshot::Sender<Outcome>);

/// The most writes one commit carries; more wait for the next.
const MAX_GROUP: usize = 256;

/// A queue into the writer task.
#[derive(Clone, Debug)]
pub struct GroupCommit {
    queue: mpsc::Sender<Queued>,
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
    pub async fn commit(&self, change: Change) -> Result<Option<(Session, Vec<Event>)>> {
        let traceparent = checkfu_telemetry::current_traceparent();
        match self.send(Write::Change { change, traceparent }).await? {
            Done::Changed(done) => Ok(done.map(|d| *d)),
            Done::Created(_) => Err(Error::internal("the event log's writer answered a change with a creation")),
        }
    }

    /// Creates a Session with whatever else is waiting.
    pub async fn create(&self, session: Session, events: Vec<NewEvent>, runs: Vec<Run>) -> Result<Vec<Event>> {
        let traceparent = checkfu_telemetry::current_traceparent();
        match self.send(Write::Create { session, events, runs, traceparent }).await? {
            Done::Created(events) => Ok(events),
            Done::Changed(_) => Err(Error::internal("the event log's writer answered a creation with a change")),
        }
    }

    async fn send(&self, w: Write) -> Outcome {
        let (tx, rx) = oneshot::channel();
        self.queue.send((w, tx)).await.map_err(|_| Error::unavailable("the event log's writer stopped"))?;
        rx.await.map_err(|_| Error::unavailable("the event log's writer stopped"))?
    }
}

impl Write {
    fn flush(&self) -> bool {
        match self {
            Write::Change { change, .. } => change.flush,
            Write::Create { .. } => true,
        }
    }

    async fn apply(&self, conn: &mut AnyConnection) -> Outcome {
        match self {
            Write::Change { change, traceparent } => {
                apply(conn, change, Order::GuardFirst, traceparent).await.map(|done| Done::Changed(done.map(Box::new)))
            }
            Write::Create { session, events, runs, traceparent } => {
                create(conn, session, events, runs, traceparent).await.map(Done::Created)
            }
        }
    }
}

async fn write(db: Db, mut rx: mpsc::Receiver<Queued>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while rx.recv_many(&mut group, MAX_GROUP).await > 0 {
        let outcomes = commit_group(&db, &group).await;
        for ((_, reply), outcome) in group.drain(..).zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }
}

/// Applies the group's writes and commits them: flushed to disk
/// (`synchronous=FULL`) when any write asks for it, else written — the
/// store's setting, `synchronous=NORMAL` — and flushed by the next flushed
/// commit or SQLite's checkpoint. The durability switch rides in the same
/// statements as BEGIN and COMMIT: each statement is a round trip to the
/// SQLite thread.
async fn commit_group(db: &Db, group: &[Queued]) -> Vec<Outcome> {
    let failed = |e: &Error| group.iter().map(|_| Err(e.clone())).collect();
    let mut conn = match db.pool.acquire().await {
        Ok(c) => c,
        Err(e) => return failed(&db_err(e)),
    };
    let flush = group.iter().any(|(w, _)| w.flush());
    match apply_all(&mut conn, group, flush).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            // Its transaction and durability are unknown: open a fresh one.
            conn.detach();
            failed(&e)
        }
    }
}

/// The whole group in one transaction. A change that loses its
/// compare-and-set writes nothing (its checks come first), so no savepoints
/// are needed; a write that fails rolls the group back, and the group is
/// then committed write by write, each answered on its own.
async fn apply_all(conn: &mut AnyConnection, group: &[Queued], flush: bool) -> Result<Vec<Outcome>> {
    let (begin, commit, rollback) = if flush {
        ("PRAGMA synchronous=FULL; BEGIN", "COMMIT; PRAGMA synchronous=NORMAL", "ROLLBACK; PRAGMA synchronous=NORMAL")
    } else {
        ("BEGIN", "COMMIT", "ROLLBACK")
    };
    run(conn, begin).await?;
    let mut outcomes = Vec::with_capacity(group.len());
    for (w, _) in group {
        match w.apply(conn).await {
            Ok(done) => outcomes.push(Ok(done)),
            Err(_) => {
                run(conn, rollback).await?;
                return one_by_one(conn, group, flush).await;
            }
        }
    }
    run(conn, commit).await?;
    Ok(outcomes)
}

async fn one_by_one(conn: &mut AnyConnection, group: &[Queued], flush: bool) -> Result<Vec<Outcome>> {
    if flush {
        run(conn, "PRAGMA synchronous=FULL").await?;
    }
    let mut outcomes = Vec::with_capacity(group.len());
    for (w, _) in group {
        let outcome = async {
            let mut tx = conn.begin().await.map_err(db_err)?;
            let done = w.apply(&mut tx).await?;
            tx.commit().await.map_err(db_err)?;
            Ok(done)
        }
        .await;
        outcomes.push(outcome);
    }
    if flush {
        run(conn, "PRAGMA synchronous=NORMAL").await?;
    }
    Ok(outcomes)
}

/// Statements without arguments, in one round trip.
async fn run(conn: &mut AnyConnection, sql: &'static str) -> Result<()> {
    sqlx::raw_sql(sql).execute(&mut *conn).await.map(|_| ()).map_err(db_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{ev, session};
    use crate::store::{SessionsStore, SqlSessionsStore};
    use checkfu_core::testing::tid;
    use checkfu_store::Location;
    use checkfu_store::sqlx::Row;

    #[tokio::test(flavor = "multi_thread")]
    async fn one_group_answers_each_change_on_its_own() {
        let dir = tempfile::tempdir().expect("dir");
        let location = Location::SqliteDir(dir.path().into());
        let db = Db::open(&location, "sessions", &crate::MIGRATIONS).await.expect("db");
        let store = SqlSessionsStore::new(db.clone());
        let taken = ev("agent.message");
        store.insert_session(&session("sess_0"), &[ev("session.created"), taken.clone()], &[]).await.expect("insert");
        for id in ["sess_1", "sess_2", "sess_3"] {
            store.insert_session(&session(id), &[ev("session.created")], &[]).await.expect("insert");
        }
        let change = |id: &str, event, flush| {
            let (tx, _rx) = oneshot::channel();
            let cur = session(id);
            (
                Write::Change {
                    change: Change {
                        expected_version: cur.version,
                        session: cur,
                        events: vec![event],
                        runs: vec![],
                        claim_guard: None,
                        flush,
                        outcome_changed: false,
                    },
                    traceparent: String::new(),
                },
                tx,
            )
        };
        let group = vec![
            change("sess_1", ev("agent.message"), false),
            change("sess_2", taken, true),
            change("sess_3", ev("agent.message"), false),
            // Decided from the version the first change of the group moved.
            change("sess_1", ev("agent.message"), false),
            (
                Write::Create {
                    session: session("sess_new"),
                    events: vec![ev("session.created")],
                    runs: vec![],
                    traceparent: String::new(),
                },
                oneshot::channel().0,
            ),
        ];
        let outcomes = commit_group(&db, &group).await;
        assert!(matches!(outcomes[0], Ok(Done::Changed(Some(_)))), "{:?}", outcomes[0]);
        assert!(outcomes[1].is_err(), "a taken event id fails its own change");
        assert!(matches!(outcomes[2], Ok(Done::Changed(Some(_)))), "{:?}", outcomes[2]);
        assert!(matches!(outcomes[3], Ok(Done::Changed(None))), "a lost compare-and-set: {:?}", outcomes[3]);
        assert!(matches!(&outcomes[4], Ok(Done::Created(events)) if events.len() == 1), "{:?}", outcomes[4]);
        let logged = |id: &'static str| {
            let store = store.clone();
            async move { store.list_events(&tid(id), &crate::store::View::All, 0, 10, &[]).await.expect("list").len() }
        };
        assert_eq!((logged("sess_1").await, logged("sess_2").await, logged("sess_3").await, logged("sess_new").await), (2, 1, 2, 1));
        // Each write's events carry the trace of the request that made it,
        // not the writer's.
        let trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let (tx, _rx) = oneshot::channel();
        let cur = store.get_session(&tid("sess_3")).await.expect("get").expect("exists");
        let traced_change = Change {
            expected_version: cur.version,
            session: cur,
            events: vec![ev("agent.message")],
            runs: vec![],
            claim_guard: None,
            flush: false,
            outcome_changed: false,
        };
        let traced = vec![(Write::Change { change: traced_change, traceparent: trace.into() }, tx)];
        assert!(matches!(commit_group(&db, &traced).await[0], Ok(Done::Changed(Some(_)))));
        let headers: String = sqlx::query("SELECT headers_json FROM outbox ORDER BY id DESC LIMIT 1")
            .fetch_one(&db.pool)
            .await
            .expect("outbox")
            .try_get(0)
            .expect("headers");
        assert!(headers.contains(trace), "{headers}");

        // A group that needed a flush leaves the store's setting as it was.
        let flushed = vec![change("sess_3", ev("agent.message"), true)];
        commit_group(&db, &flushed).await;
        let mode: i64 = sqlx::query("PRAGMA synchronous").fetch_one(&db.pool).await.expect("pragma").try_get(0).expect("mode");
        assert_eq!(mode, 1, "NORMAL");
    }
}
