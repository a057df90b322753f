//! Migrations are written once (`migrations/<service>/`, a file per dialect
//! only where the SQL differs) and never change once released: sqlx records
//! each applied migration's checksum and refuses to start against a database
//! whose history it would apply differently. `migrations/applied.lock`
//! holds those checksums — taken from the per-dialect files the single
//! source replaced — and these tests hold every embedded migration to them.
#![cfg(test)]

use checkfu_node::roles::TABLE;
use checkfu_store::Dialect;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

type Key = (String, &'static str, i64);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn lock() -> BTreeMap<Key, String> {
    let text = std::fs::read_to_string(root().join("migrations/applied.lock")).expect("migrations/applied.lock");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "a lock line is `service dialect version sha384`: {l}");
            let dialect = match f[1] {
                "sqlite" => "sqlite",
                "postgres" => "postgres",
                other => panic!("unknown dialect {other} in {l}"),
            };
            ((f[0].to_string(), dialect, f[2].parse().expect("version")), f[3].to_string())
        })
        .collect()
}

#[test]
fn every_migration_is_byte_for_byte_the_one_released() {
    let lock = lock();
    let mut seen = BTreeSet::new();
    let mut problems = vec![];
    for (service, migrations) in TABLE.iter().flat_map(|p| p.stores()) {
        for (dialect, name) in [(Dialect::Sqlite, "sqlite"), (Dialect::Postgres, "postgres")] {
            let migrator = migrations.migrator(dialect).expect("migrator");
            for m in migrator.iter() {
                let key = (service.to_string(), name, m.version);
                let checksum: String = m.checksum.iter().map(|b| format!("{b:02x}")).collect();
                match lock.get(&key) {
                    Some(locked) if *locked == checksum => {}
                    Some(_) => problems.push(format!("{service} {name} {}: its text changed after release", m.version)),
                    None => problems.push(format!(
                        "{service} {name} {}: not in migrations/applied.lock (add `{service} {name} {} {checksum}`)",
                        m.version, m.version
                    )),
                }
                seen.insert(key);
            }
        }
    }
    for key in lock.keys().filter(|k| !seen.contains(*k)) {
        problems.push(format!("{} {} {}: released but no longer embedded", key.0, key.1, key.2));
    }
    assert!(seen.len() >= 70, "every service's migrations were read ({})", seen.len());
    assert!(problems.is_empty(), "migrations:\n{}", problems.join("\n"));
}

#[test]
fn every_migration_file_is_embedded_once() {
    let embedded: BTreeMap<&str, BTreeSet<&str>> =
        TABLE.iter().flat_map(|p| p.stores()).map(|(service, m)| (*service, m.sources.iter().map(|s| s.file).collect())).collect();
    let mut problems = vec![];
    for dir in std::fs::read_dir(root().join("migrations")).expect("migrations/").flatten().filter(|d| d.path().is_dir()) {
        let service = dir.file_name().to_string_lossy().to_string();
        let Some(files) = embedded.get(service.as_str()) else {
            problems.push(format!("migrations/{service}: no service embeds it"));
            continue;
        };
        let mut split: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for f in std::fs::read_dir(dir.path()).expect("dir").flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            let (stem, dialect) = if let Some(s) = name.strip_suffix(".sqlite.sql") {
                (s.to_string(), "sqlite")
            } else if let Some(s) = name.strip_suffix(".postgres.sql") {
                (s.to_string(), "postgres")
            } else if let Some(s) = name.strip_suffix(".sql") {
                (s.to_string(), "both")
            } else {
                problems.push(format!("migrations/{service}/{name}: not a migration"));
                continue;
            };
            if !files.contains(stem.as_str()) {
                problems.push(format!("migrations/{service}/{name}: not embedded"));
            }
            split.entry(stem).or_default().push(dialect);
        }
        for (stem, mut dialects) in split {
            dialects.sort();
            if dialects != ["both"] && dialects != ["postgres", "sqlite"] {
                problems.push(format!("migrations/{service}/{stem}: one shared file, or one per dialect ({dialects:?})"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
