//! One database handle per service. The same runtime SQL serves SQLite (the
//! embedded twin, one file per service under the data directory) and
//! PostgreSQL (production, one schema per service) through sqlx's `Any`
//! driver, so a store is written once and its conformance suite runs on both.
//!
//! Portability rules the stores follow: integers are `BIGINT`/`i64`, booleans
//! are `0`/`1` integers, timestamps are epoch milliseconds, JSON is `TEXT`,
//! placeholders are `$n`.

use checkfu_core::{Code, Error};
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};
use std::time::Duration;

pub use sqlx;

pub mod envelope;
mod migrations;
pub mod sealed;

pub use migrations::{Migrations, Source};

/// Which SQL dialect a pool speaks; a store uses it only where SQL differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A connected, migrated database for one service.
#[derive(Clone, Debug)]
pub struct Db {
    /// Writes, and every read inside a transaction.
    pub pool: AnyPool,
    /// Reads outside a transaction. On SQLite, [`SQLITE_READERS`]
    /// connections of their own: WAL lets a reader see the last commit
    /// while the one writer's connection is busy committing and flushing
    /// the next, where a read queued on the writer's connection would wait
    /// out that flush. On PostgreSQL, the same pool as `pool`. A read here
    /// sees every commit that returned before it began — what a read on a
    /// PostgreSQL pool sees.
    pub reads: AnyPool,
    pub dialect: Dialect,
}

/// Read connections per SQLite file: one per core of the machines the
/// embedded installation is sized for.
pub const SQLITE_READERS: u32 = 2;

/// An idle SQLite read connection closes after this (an idle installation
/// keeps no reader's page cache).
const READER_IDLE: Duration = Duration::from_secs(60);

/// Where a service's data lives.
#[derive(Clone, Debug)]
pub enum Location {
    /// A directory; the service keeps `<dir>/<service>.db`.
    SqliteDir(std::path::PathBuf),
    /// A `postgres://` URL; the service keeps its tables in schema `<service>`.
    Postgres(String),
}

impl Location {
    /// Parses a `postgres://` URL, a `sqlite://DIR` URL or a plain directory path.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Location::Postgres(s.to_string())
        } else {
            Location::SqliteDir(s.trim_start_matches("sqlite://").into())
        }
    }
}

impl Db {
    /// Opens (creating if needed) the service's database and applies its
    /// migrations. Embedded commits are written to the WAL
    /// (`synchronous=NORMAL`: a process crash loses none); the event log
    /// flushes the ones that answer a client (sessions' group commit).
    pub async fn open(location: &Location, service: &str, migrations: &Migrations) -> Result<Db, Error> {
        install_default_drivers();
        let schema = service.replace('-', "_");
        let db = match location {
            Location::SqliteDir(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Error::unavailable(format!("cannot create data directory {}: {e}", dir.display())))?;
                let url = format!("sqlite://{}/{schema}.db?mode=rwc", dir.display());
                // One connection: SQLite serialises writers anyway, and a single
                // connection never meets a busy lock upgrade inside a transaction.
                let pool = AnyPoolOptions::new()
                    .max_connections(1)
                    // A local file does not go stale; pinging it before every
                    // query would double each query's round trips.
                    .test_before_acquire(false)
                    .acquire_timeout(Duration::from_secs(30))
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("PRAGMA journal_mode=WAL").await?;
                            conn.execute("PRAGMA synchronous=NORMAL").await?;
                            conn.execute("PRAGMA busy_timeout=5000").await?;
                            conn.execute("PRAGMA foreign_keys=ON").await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await
                    .map_err(db_err)?;
                // Opened when first used, after the writer made the file and
                // set WAL (which the file keeps); `query_only` makes a write
                // sent here by mistake fail instead of contending for the lock.
                let reads = AnyPoolOptions::new()
                    .max_connections(SQLITE_READERS)
                    .min_connections(0)
                    .idle_timeout(READER_IDLE)
                    .test_before_acquire(false)
                    .acquire_timeout(Duration::from_secs(30))
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            conn.execute("PRAGMA busy_timeout=5000").await?;
                            conn.execute("PRAGMA query_only=1").await?;
                            Ok(())
                        })
                    })
                    .connect_lazy(&url)
                    .map_err(db_err)?;
                Db { pool, reads, dialect: Dialect::Sqlite }
            }
            Location::Postgres(url) => {
                create_schema(url, &schema).await?;
                // The schema name is derived from a fixed service name, never from input.
                let set_path = format!("SET search_path TO {schema}");
                let pool = AnyPoolOptions::new()
                    .max_connections(16)
                    // sqlx pings a pooled connection before lending it by
                    // default: a round trip to the server for every query.
                    // Only one idle long enough to have gone stale (the
                    // server restarted, a proxy timed it out) is pinged,
                    // and dropped if it does not answer.
                    .test_before_acquire(false)
                    .before_acquire(|conn, meta| {
                        Box::pin(async move {
                            if meta.idle_for < STALE_AFTER {
                                return Ok(true);
                            }
                            Ok(sqlx::Connection::ping(conn).await.is_ok())
                        })
                    })
                    .acquire_timeout(Duration::from_secs(10))
                    .after_connect(move |conn, _| {
                        let set_path = set_path.clone();
                        Box::pin(async move {
                            conn.execute(sqlx::AssertSqlSafe(set_path)).await?;
                            Ok(())
                        })
                    })
                    .connect(url)
                    .await
                    .map_err(db_err)?;
                Db { reads: pool.clone(), pool, dialect: Dialect::Postgres }
            }
        };
        let migrator = migrations.migrator(db.dialect)?;
        migrator.run(&db.pool).await.map_err(|e| Error::unavailable(format!("migrating {service} failed: {e}")))?;
        Ok(db)
    }

    /// True when the database answers a trivial query.
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }
}

/// A pooled PostgreSQL connection idle this long is pinged before use.
const STALE_AFTER: Duration = Duration::from_secs(10);

async fn create_schema(url: &str, schema: &str) -> Result<(), Error> {
    let pool = AnyPoolOptions::new().max_connections(1).connect(url).await.map_err(db_err)?;
    // Two processes starting together may race to create it; the loser sees
    // a unique violation and the schema exists either way.
    let sql = format!("CREATE SCHEMA IF NOT EXISTS {schema}");
    if let Err(e) = pool.execute(sqlx::AssertSqlSafe(sql)).await
        && !is_unique_violation(&e)
    {
        return Err(db_err(e));
    }
    pool.close().await;
    Ok(())
}

pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// Classifies a database failure. A unique violation means a client asked for
/// something that already exists; lost connectivity is `unavailable`; the rest
/// is logged and reported as `internal` without leaking SQL to the caller.
pub fn db_err(e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => {
            Error::new(Code::Conflict, "a resource with the same unique key already exists")
        }
        sqlx::Error::RowNotFound => Error::new(Code::NotFound, "not found"),
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            tracing::warn!(error = %e, "database unavailable");
            Error::unavailable("the database is unavailable")
        }
        _ => {
            tracing::error!(error = %e, "database error");
            Error::internal("a storage error occurred")
        }
    }
}

/// `count` numbered placeholders from `$first`, for `IN (...)`:
/// `marks(4, 3)` is `$4, $5, $6`.
pub fn marks(first: usize, count: usize) -> String {
    (first..first + count).map(|n| format!("${n}")).collect::<Vec<_>>().join(", ")
}

/// Placeholders for a multi-row `VALUES` of `rows` tuples of `cols`, from
/// `$1`: `value_rows(2, 2)` is `($1, $2), ($3, $4)`.
pub fn value_rows(rows: usize, cols: usize) -> String {
    (0..rows).map(|r| format!("({})", marks(r * cols + 1, cols))).collect::<Vec<_>>().join(", ")
}

/// Booleans travel as integers so one SQL text works on both dialects.
pub fn flag(b: bool) -> i64 {
    i64::from(b)
}

/// One page of rows from several Environments, newest (largest id) first.
/// `sql` selects with `$1` the Environment, `$2` the id to page before and
/// `$3` the row limit; it runs once per Environment (indexed), and the
/// results are merged.
pub async fn list_in_envs<T>(
    db: &Db,
    sql: &'static str,
    environment_ids: &[String],
    page: &checkfu_core::page::PageRequest,
    map: fn(&sqlx::any::AnyRow) -> Result<T, Error>,
    id: fn(&T) -> &str,
) -> Result<Vec<T>, Error> {
    list_in_envs_with(db, sql, environment_ids, &[], page, map, id).await
}

/// [`list_in_envs`] with further filter values bound as `$4`, `$5`, ...
pub async fn list_in_envs_with<T>(
    db: &Db,
    sql: &'static str,
    environment_ids: &[String],
    filters: &[&str],
    page: &checkfu_core::page::PageRequest,
    map: fn(&sqlx::any::AnyRow) -> Result<T, Error>,
    id: fn(&T) -> &str,
) -> Result<Vec<T>, Error> {
    let before = page.before();
    let mut out = Vec::new();
    for env in environment_ids {
        let mut q = sqlx::query(sql).bind(env).bind(&before).bind(page.fetch_limit());
        for f in filters {
            q = q.bind(*f);
        }
        for r in &q.fetch_all(&db.reads).await.map_err(db_err)? {
            out.push(map(r)?);
        }
    }
    out.sort_by(|a, b| id(b).cmp(id(a)));
    out.truncate(page.fetch_limit() as usize);
    Ok(out)
}

/// The one row `sql` selects with `$1 = key`, mapped; `None` when absent.
pub async fn find_one<T>(
    db: &Db,
    sql: &'static str,
    key: &str,
    map: fn(&sqlx::any::AnyRow) -> Result<T, Error>,
) -> Result<Option<T>, Error> {
    sqlx::query(sql).bind(key).fetch_optional(&db.reads).await.map_err(db_err)?.as_ref().map(map).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::{Connection, Row};

    /// Reads outside a transaction do not queue behind the one SQLite
    /// writer: while a write transaction is open (as while the log's group
    /// commit flushes) a read answers with the last commit, and once the
    /// write commits the next read sees it. A write sent to the readers
    /// fails rather than contending for the lock.
    #[tokio::test(flavor = "multi_thread")]
    async fn sqlite_reads_answer_while_the_writer_holds_a_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&Location::SqliteDir(dir.path().into()), "readers", &Migrations { sources: &[] }).await.unwrap();
        sqlx::query("CREATE TABLE t (n BIGINT)").execute(&db.pool).await.unwrap();
        sqlx::query("INSERT INTO t (n) VALUES (1)").execute(&db.pool).await.unwrap();
        let count =
            |db: Db| async move { sqlx::query("SELECT COUNT(*) AS c FROM t").fetch_one(&db.reads).await.unwrap().get::<i64, _>("c") };

        let mut writer = db.pool.acquire().await.unwrap();
        let mut tx = writer.begin().await.unwrap();
        sqlx::query("INSERT INTO t (n) VALUES (2)").execute(&mut *tx).await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(5), count(db.clone())).await;
        assert_eq!(read.expect("a read answers while the writer's transaction is open"), 1, "the last commit, not the open write");
        tx.commit().await.unwrap();
        drop(writer);
        assert_eq!(count(db.clone()).await, 2, "a read after the commit returned sees it");

        let e = sqlx::query("INSERT INTO t (n) VALUES (3)").execute(&db.reads).await;
        assert!(e.is_err(), "the read connections refuse writes");
    }

    #[test]
    fn placeholders_are_numbered_in_order() {
        assert_eq!(super::marks(4, 3), "$4, $5, $6");
        assert_eq!(super::value_rows(2, 3), "($1, $2, $3), ($4, $5, $6)");
    }
}
