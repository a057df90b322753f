//! A service's migrations, written once. Most migrations read the same in
//! both dialects and live in `migrations/<service>/NNNN_name.sql`; one whose
//! SQL differs is written twice, `NNNN_name.sqlite.sql` and
//! `NNNN_name.postgres.sql`. [`migrations!`](crate::migrations) embeds them
//! at compile time and [`Migrations::migrator`] turns them into sqlx's
//! migrator for a dialect — the version and description from the file name
//! and the checksum from the text, exactly as sqlx reads a directory, so a
//! database migrated from the old per-dialect directories accepts them.

use crate::Dialect;
use checkfu_core::Error;
use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use std::borrow::Cow;

/// One migration's file name (without `.sql`) and its text per dialect (the
/// same text twice when the dialects agree).
#[derive(Debug)]
pub struct Source {
    pub file: &'static str,
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// A service's migrations, embedded at compile time by
/// [`migrations!`](crate::migrations).
#[derive(Debug)]
pub struct Migrations {
    pub sources: &'static [Source],
}

impl Migrations {
    /// sqlx's migrator for `dialect`.
    pub fn migrator(&self, dialect: Dialect) -> Result<Migrator, Error> {
        let migrations = self
            .sources
            .iter()
            .map(|s| {
                let (version, description) = s
                    .file
                    .split_once('_')
                    .and_then(|(v, d)| Some((v.parse::<i64>().ok()?, d.replace('_', " "))))
                    .ok_or_else(|| Error::internal(format!("migration {:?} is not named NNNN_description", s.file)))?;
                let sql = match dialect {
                    Dialect::Sqlite => s.sqlite,
                    Dialect::Postgres => s.postgres,
                };
                // sqlx's own reading of a directory: a leading comment opts out
                // of the transaction.
                let no_tx = sql.starts_with("-- no-transaction");
                Ok(Migration::new(version, Cow::Owned(description), MigrationType::Simple, sql.into_sql_str(), no_tx))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Migrator::with_migrations(migrations))
    }
}

/// Embeds a service's migrations from `dir` (relative to the calling
/// crate's manifest): each file name without `.sql`, followed by
/// `by_dialect` when it is written once per dialect.
///
/// ```ignore
/// pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/sessions":
///     "0001_init", "0002_budgets", "0003_outbox" by_dialect);
/// ```
#[macro_export]
macro_rules! migrations {
    ($dir:literal: $($file:literal $($by:ident)?),* $(,)?) => {
        $crate::Migrations { sources: &[$($crate::migration_source!($dir, $file $(, $by)?)),*] }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! migration_source {
    ($dir:literal, $file:literal) => {
        $crate::Source {
            file: $file,
            sqlite: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file, ".sql")),
            postgres: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file, ".sql")),
        }
    };
    ($dir:literal, $file:literal, by_dialect) => {
        $crate::Source {
            file: $file,
            sqlite: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file, ".sqlite.sql")),
            postgres: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file, ".postgres.sql")),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_migrator_reads_names_and_checksums_as_sqlx_reads_a_directory() {
        static SOURCES: [Source; 2] = [
            Source { file: "0002_two_words", sqlite: "SELECT 2;", postgres: "SELECT 2;" },
            Source { file: "0001_first", sqlite: "SELECT 'lite';", postgres: "SELECT 'pg';" },
        ];
        let m = Migrations { sources: &SOURCES };
        let lite = m.migrator(Dialect::Sqlite).expect("sqlite");
        let pg = m.migrator(Dialect::Postgres).expect("postgres");
        let versions: Vec<(i64, &str)> = lite.iter().map(|x| (x.version, x.description.as_ref())).collect();
        assert_eq!(versions, [(1, "first"), (2, "two words")], "sorted by version, underscores as spaces");
        let expected = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA384, b"SELECT 'pg';");
        assert_eq!(pg.iter().next().map(|x| x.checksum.to_vec()), Some(expected.as_ref().to_vec()), "the checksum is the text's SHA-384");
        let bad = Migrations { sources: &[Source { file: "init", sqlite: "", postgres: "" }] };
        assert!(bad.migrator(Dialect::Sqlite).is_err(), "a file name without a version is refused");
    }
}
