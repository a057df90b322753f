//! Group commit for the event log, on both stores.
//!
//! Writes queue for a single writer task, which puts every write waiting
//! into one transaction — a change whose compare-and-set lost writes
//! nothing, and one that fails sends the group back to commit write by
//! write — and commits them together. Nobody is answered before that
//! commit.
//!
//! SQLite has one writer and the log flushes accepted inputs to disk before
//! answering them, so one transaction per append would cap the installation
//! at one flush per event. On PostgreSQL each append was a transaction of
//! its own — BEGIN, the session's compare-and-set, the events, the outbox
//! rows, COMMIT, each a round trip and the commit a WAL flush; grouped, the
//! BEGIN, the COMMIT and the flush are shared by the group. There, changes
//! take row locks, so the group applies them in session-id order (a
//! Session's own changes keep their order): two replicas' groups lock
//! sessions rows in the same order and cannot deadlock each other; and a
//! claim is checked after its session row moved ([`Order::SessionFirst`]),
//! so a claim that loses sends the group back to commit write by write.
//! A change that is only events is one statement there (the compare-and-set,
//! the events and their outbox rows in one `WITH`), and a group of one such
//! change runs without BEGIN and COMMIT: one round trip.

use super::Change;
use super::log_writes::{Applied, Order, apply, apply_in_one, create, in_one_statement};
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

/// Writer tasks on PostgreSQL: a group waits for its commit's round trips,
/// so a few writers keep the connection pool busy; each Session's writes
/// go to one of them, so they stay in order.
const POSTGRES_WRITERS: usize = 4;

/// Queues into the writer tasks.
#[derive(Clone, Debug)]
pub struct GroupCommit {
    queues: Vec<mpsc::Sender<Queued>>,
}

impl GroupCommit {
    /// Starts the writers on `db` (one on SQLite, its one writer); they stop
    /// when the last handle is dropped.
    pub fn start(db: Db) -> GroupCommit {
        let writers = if db.dialect == checkfu_store::Dialect::Sqlite { 1 } else { POSTGRES_WRITERS };
        let queues = (0..writers)
            .map(|_| {
                let (queue, rx) = mpsc::channel(4 * MAX_GROUP);
                tokio::spawn(write(db.clone(), rx));
                queue
            })
            .collect();
        GroupCommit { queues }
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
        let queue = &self.queues[shard(w.session(), self.queues.len())];
        queue.send((w, tx)).await.map_err(|_| Error::unavailable("the event log's writer stopped"))?;
        rx.await.map_err(|_| Error::unavailable("the event log's writer stopped"))?
    }
}

/// Which of `n` writers takes a Session's writes.
fn shard(session_id: &str, n: usize) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    (BuildHasherDefault::<DefaultHasher>::default().hash_one(session_id) % n as u64) as usize
}

/// How one write went inside the group's transaction.
enum Step {
    Done(Done),
    /// It must not commit ([`Applied::Undo`]).
    Undo,
}

impl Write {
    fn flush(&self) -> bool {
        match self {
            Write::Change { change, .. } => change.flush,
            Write::Create { .. } => true,
        }
    }

    /// The Session whose row the write locks (the order a group applies in).
    fn session(&self) -> &str {
        match self {
            Write::Change { change, .. } => &change.session.id,
            Write::Create { session, .. } => &session.id,
        }
    }

    /// Whether the write is one statement on this store (then it needs no
    /// transaction of its own).
    fn one_statement(&self, order: Order) -> bool {
        matches!(self, Write::Change { change, .. } if order == Order::SessionFirst && in_one_statement(change))
    }

    async fn apply(&self, conn: &mut AnyConnection, order: Order) -> Result<Step> {
        match self {
            Write::Change { change, traceparent } if self.one_statement(order) => {
                Ok(match apply_in_one(conn, change, traceparent).await? {
                    Applied::Done(done) => Step::Done(Done::Changed(Some(done))),
                    Applied::Lost | Applied::Undo => Step::Done(Done::Changed(None)),
                })
            }
            Write::Change { change, traceparent } => Ok(match apply(conn, change, order, traceparent).await? {
                Applied::Done(done) => Step::Done(Done::Changed(Some(done))),
                Applied::Lost => Step::Done(Done::Changed(None)),
                Applied::Undo => Step::Undo,
            }),
            Write::Create { session, events, runs, traceparent } => {
                create(conn, session, events, runs, traceparent).await.map(|e| Step::Done(Done::Created(e)))
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

/// Applies the group's writes and commits them. On SQLite the commit is
/// flushed to disk (`synchronous=FULL`) when any write asks for it, else
/// written — the store's setting, `synchronous=NORMAL` — and flushed by the
/// next flushed commit or SQLite's checkpoint; the durability switch rides
/// in the same statements as BEGIN and COMMIT (each statement is a round
/// trip to the SQLite thread). PostgreSQL flushes every commit.
async fn commit_group(db: &Db, group: &[Queued]) -> Vec<Outcome> {
    let failed = |e: &Error| group.iter().map(|_| Err(e.clone())).collect();
    let mut conn = match db.pool.acquire().await {
        Ok(c) => c,
        Err(e) => return failed(&db_err(e)),
    };
    let writes: Vec<&Write> = group.iter().map(|(w, _)| w).collect();
    let sqlite = db.dialect == checkfu_store::Dialect::Sqlite;
    let flush = sqlite && writes.iter().any(|w| w.flush());
    let order = Order::of(db.dialect);
    match apply_all(&mut conn, &writes, order, flush).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            // Its transaction and durability are unknown: open a fresh one.
            conn.detach();
            failed(&e)
        }
    }
}

/// The whole group in one transaction, in session-id order (stable, so a
/// Session's writes keep theirs). A change that loses its compare-and-set
/// writes nothing, so no savepoints are needed; a write that fails, or a
/// claim that lost after moving its session row, rolls the group back, and
/// the group is then committed write by write, each answered on its own.
/// Outcomes come back in the group's order.
async fn apply_all(conn: &mut AnyConnection, writes: &[&Write], order: Order, flush: bool) -> Result<Vec<Outcome>> {
    let (begin, commit, rollback) = if flush {
        ("PRAGMA synchronous=FULL; BEGIN", "COMMIT; PRAGMA synchronous=NORMAL", "ROLLBACK; PRAGMA synchronous=NORMAL")
    } else {
        ("BEGIN", "COMMIT", "ROLLBACK")
    };
    // A group of one statement is its own transaction.
    if let [w] = writes
        && w.one_statement(order)
    {
        return Ok(vec![match w.apply(conn, order).await {
            Ok(Step::Done(done)) => Ok(done),
            Ok(Step::Undo) => Ok(Done::Changed(None)),
            Err(e) => Err(e),
        }]);
    }
    let mut by_session: Vec<usize> = (0..writes.len()).collect();
    by_session.sort_by(|a, b| writes[*a].session().cmp(writes[*b].session()));
    run(conn, begin).await?;
    let mut outcomes: Vec<Option<Outcome>> = writes.iter().map(|_| None).collect();
    for i in by_session {
        match writes[i].apply(conn, order).await {
            Ok(Step::Done(done)) => outcomes[i] = Some(Ok(done)),
            Ok(Step::Undo) | Err(_) => {
                run(conn, rollback).await?;
                return one_by_one(conn, writes, order, flush).await;
            }
        }
    }
    run(conn, commit).await?;
    Ok(outcomes.into_iter().map(|o| o.unwrap_or_else(|| Err(Error::internal("a grouped write was not applied")))).collect())
}

async fn one_by_one(conn: &mut AnyConnection, writes: &[&Write], order: Order, flush: bool) -> Result<Vec<Outcome>> {
    if flush {
        run(conn, "PRAGMA synchronous=FULL").await?;
    }
    let mut outcomes = Vec::with_capacity(writes.len());
    for w in writes {
        let outcome = async {
            let mut tx = conn.begin().await.map_err(db_err)?;
            match w.apply(&mut tx, order).await? {
                Step::Done(done) => {
                    tx.commit().await.map_err(db_err)?;
                    Ok(done)
                }
                // Dropping the transaction rolls it back.
                Step::Undo => Ok(Done::Changed(None)),
            }
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
    use crate::store::{ClaimGuard, SessionsStore, SqlSessionsStore};
    use checkfu_core::testing::tid;
    use checkfu_store::Location;
    use checkfu_store::sqlx::Row;

    #[tokio::test(flavor = "multi_thread")]
    async fn one_group_answers_each_change_on_its_own_on_sqlite() {
        let dir = tempfile::tempdir().expect("dir");
        let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &crate::MIGRATIONS).await.expect("db");
        one_group_answers_each_change_on_its_own(&db).await;
        // A group that needed a flush leaves the store's setting as it was.
        let store = SqlSessionsStore::new(db.clone());
        let cur = store.get_session(&tid("sess_3")).await.expect("get").expect("exists");
        let flushed = vec![change(cur, ev("agent.message"), true, None)];
        commit_group(&db, &flushed).await;
        let mode: i64 = sqlx::query("PRAGMA synchronous").fetch_one(&db.pool).await.expect("pragma").try_get(0).expect("mode");
        assert_eq!(mode, 1, "NORMAL");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn one_group_answers_each_change_on_its_own_on_postgres() {
        let Some(url) = checkfu_core::testing::postgres("the group commit on PostgreSQL") else { return };
        let schema = checkfu_core::testing::fresh_schema("grp");
        let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
        one_group_answers_each_change_on_its_own(&db).await;
    }

    fn change(cur: Session, event: NewEvent, flush: bool, claim_guard: Option<ClaimGuard>) -> Queued {
        let (tx, _rx) = oneshot::channel();
        let change = Change {
            expected_version: cur.version,
            session: cur,
            events: vec![event],
            runs: vec![],
            claim_guard,
            flush,
            outcome_changed: false,
        };
        (Write::Change { change, traceparent: String::new() }, tx)
    }

    /// Changes that succeed, fail, lose their compare-and-set or their
    /// claim, and a creation, in one group: each is answered on its own,
    /// in the group's order, whichever order the store applied them in.
    async fn one_group_answers_each_change_on_its_own(db: &Db) {
        let store = SqlSessionsStore::new(db.clone());
        let taken = ev("agent.message");
        store.insert_session(&session("sess_0"), &[ev("session.created"), taken.clone()], &[]).await.expect("insert");
        for id in ["sess_1", "sess_2", "sess_3", "sess_4"] {
            store.insert_session(&session(id), &[ev("session.created")], &[]).await.expect("insert");
        }
        let cur = |id: &'static str| {
            let store = store.clone();
            async move { store.get_session(&tid(id)).await.expect("get").expect("exists") }
        };
        let lost_claim = ClaimGuard { run_id: tid("run_missing"), generation: 1, now_ms: 0 };
        let group = vec![
            change(cur("sess_3").await, ev("agent.message"), false, None),
            change(cur("sess_2").await, taken, true, None),
            change(cur("sess_1").await, ev("agent.message"), false, None),
            // Decided from the version the first change to sess_3 moved.
            change(cur("sess_3").await, ev("agent.message"), false, None),
            // A claim whose Run is not claimable: nothing of it is written.
            change(cur("sess_4").await, ev("run.started"), false, Some(lost_claim)),
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
        let outcomes = commit_group(db, &group).await;
        assert!(matches!(outcomes[0], Ok(Done::Changed(Some(_)))), "{:?}", outcomes[0]);
        assert!(outcomes[1].is_err(), "a taken event id fails its own change");
        assert!(matches!(outcomes[2], Ok(Done::Changed(Some(_)))), "{:?}", outcomes[2]);
        assert!(matches!(outcomes[3], Ok(Done::Changed(None))), "a lost compare-and-set: {:?}", outcomes[3]);
        assert!(matches!(outcomes[4], Ok(Done::Changed(None))), "a lost claim: {:?}", outcomes[4]);
        assert!(matches!(&outcomes[5], Ok(Done::Created(events)) if events.len() == 1), "{:?}", outcomes[5]);
        let logged = |id: &'static str| {
            let store = store.clone();
            async move { store.list_events(&tid(id), &crate::store::View::All, 0, 10, &[]).await.expect("list").len() }
        };
        assert_eq!(
            (logged("sess_1").await, logged("sess_2").await, logged("sess_3").await, logged("sess_4").await, logged("sess_new").await),
            (2, 1, 2, 1, 1)
        );
        assert_eq!(cur("sess_4").await.version, session("sess_4").version, "the lost claim left its session row as it was");

        // A group without failures commits as one, in the group's order
        // for each Session.
        let first = cur("sess_1").await;
        // The row as the first change leaves it: one version and one event on.
        let mut second = first.clone();
        second.version += 1;
        second.last_seq += 1;
        let group = vec![change(cur("sess_4").await, ev("agent.message"), false, None), change(first, ev("agent.message"), false, None)];
        let outcomes = commit_group(db, &group).await;
        assert!(outcomes.iter().all(|o| matches!(o, Ok(Done::Changed(Some(_))))), "{outcomes:?}");
        let group = vec![change(second.clone(), ev("agent.message"), false, None), change(second, ev("agent.message"), false, None)];
        let outcomes = commit_group(db, &group).await;
        assert!(matches!(outcomes[0], Ok(Done::Changed(Some(_)))) && matches!(outcomes[1], Ok(Done::Changed(None))), "{outcomes:?}");

        // A claim that loses beside a change that holds: only the claim is
        // not written (on PostgreSQL its session row had moved, so the group
        // went write by write).
        let lost_claim = ClaimGuard { run_id: tid("run_missing"), generation: 1, now_ms: 0 };
        let before = cur("sess_4").await;
        let group = vec![
            change(before.clone(), ev("run.started"), false, Some(lost_claim)),
            change(cur("sess_2").await, ev("agent.message"), false, None),
        ];
        let outcomes = commit_group(db, &group).await;
        assert!(matches!(outcomes[0], Ok(Done::Changed(None))) && matches!(outcomes[1], Ok(Done::Changed(Some(_)))), "{outcomes:?}");
        assert_eq!(cur("sess_4").await.version, before.version);

        // Each write's events carry the trace of the request that made it,
        // not the writer's.
        let trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let (tx, _rx) = oneshot::channel();
        let cur3 = cur("sess_3").await;
        let traced_change = Change {
            expected_version: cur3.version,
            session: cur3,
            events: vec![ev("agent.message")],
            runs: vec![],
            claim_guard: None,
            flush: false,
            outcome_changed: false,
        };
        let traced = vec![(Write::Change { change: traced_change, traceparent: trace.into() }, tx)];
        assert!(matches!(commit_group(db, &traced).await[0], Ok(Done::Changed(Some(_)))));
        let headers: String = sqlx::query("SELECT headers_json FROM outbox ORDER BY id DESC LIMIT 1")
            .fetch_one(&db.pool)
            .await
            .expect("outbox")
            .try_get(0)
            .expect("headers");
        assert!(headers.contains(trace), "{headers}");
    }
}
