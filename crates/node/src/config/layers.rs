//! The layers a configuration is built from, as TOML tables merged key by
//! key, remembering which layer set each key (for errors and for
//! `checkfu config`).

use super::env::{Env, Kind, VARIABLES};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// Where a key's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(&'static str),
    Flag(&'static str),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("the default"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "${v}"),
            Source::Flag(flag) => write!(f, "--{flag}"),
        }
    }
}

/// A configuration that cannot be used: which key, set where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub source: Source,
    pub rule: String,
}

impl ConfigError {
    pub fn new(key: &str, source: Source, rule: impl Into<String>) -> ConfigError {
        ConfigError { key: key.into(), source, rule: rule.into() }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            write!(f, "configuration ({}): {}", self.source, self.rule)
        } else {
            write!(f, "configuration key `{}` (from {}): {}", self.key, self.source, self.rule)
        }
    }
}

impl std::error::Error for ConfigError {}

pub(super) struct Layers {
    table: Table,
    sources: BTreeMap<String, Source>,
}

impl Layers {
    pub fn new(defaults: &impl Serialize) -> Result<Layers, ConfigError> {
        let table = Table::try_from(defaults).map_err(|e| ConfigError::new("", Source::Default, e.to_string()))?;
        let mut sources = BTreeMap::new();
        leaves("", &table, &mut |key| {
            sources.insert(key, Source::Default);
        });
        Ok(Layers { table, sources })
    }

    pub fn file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let source = Source::File(path.to_path_buf());
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::new("", source.clone(), format!("cannot read it: {e}")))?;
        let table: Table = text.parse().map_err(|e: toml::de::Error| ConfigError::new("", source.clone(), e.to_string()))?;
        leaves("", &table, &mut |key| {
            self.sources.insert(key, source.clone());
        });
        merge(&mut self.table, table);
        Ok(())
    }

    pub fn env(&mut self, env: &Env) -> Result<(), ConfigError> {
        for var in VARIABLES {
            let Some(text) = env.get(var.name) else { continue };
            let fail = |rule: &str| ConfigError::new(var.key, Source::Env(var.name), format!("{rule}, got {text:?}"));
            let value = match var.kind {
                Kind::Text => Value::String(text.clone()),
                Kind::Integer => Value::Integer(text.trim().parse().map_err(|_| fail("must be a whole number"))?),
                Kind::Boolean => match text.trim() {
                    "true" | "1" | "yes" => Value::Boolean(true),
                    "false" | "0" | "no" => Value::Boolean(false),
                    _ => return Err(fail("must be true or false")),
                },
            };
            self.set(var.key, value, Source::Env(var.name));
        }
        Ok(())
    }

    /// Sets the dotted `key`, creating the tables on its way.
    pub fn set(&mut self, key: &str, value: Value, source: Source) {
        let mut table = &mut self.table;
        let mut parts = key.split('.').peekable();
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                table.insert(part.to_string(), value);
                break;
            }
            let entry = table.entry(part.to_string()).or_insert_with(|| Value::Table(Table::new()));
            if !entry.is_table() {
                *entry = Value::Table(Table::new());
            }
            let Value::Table(next) = entry else { break };
            table = next;
        }
        self.sources.insert(key.to_string(), source);
    }

    /// The typed configuration, and where each key came from.
    pub fn finish<T: DeserializeOwned>(self) -> Result<(T, BTreeMap<String, Source>), ConfigError> {
        match serde_path_to_error::deserialize(Value::Table(self.table)) {
            Ok(t) => Ok((t, self.sources)),
            Err(e) => {
                let key = e.path().to_string();
                let key = if key == "." { String::new() } else { key };
                let source = source_of(&self.sources, &key);
                Err(ConfigError::new(&key, source, e.into_inner().to_string()))
            }
        }
    }
}

/// The layer that set `key`, or the first key under it.
pub(super) fn source_of(sources: &BTreeMap<String, Source>, key: &str) -> Source {
    if let Some(s) = sources.get(key) {
        return s.clone();
    }
    let prefix = format!("{key}.");
    sources.iter().find(|(k, _)| k.starts_with(&prefix)).map(|(_, s)| s.clone()).unwrap_or(Source::Default)
}

/// Calls `f` with the dotted path of every value that is not a table.
fn leaves(prefix: &str, table: &Table, f: &mut dyn FnMut(String)) {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            Value::Table(t) => leaves(&key, t, f),
            _ => f(key),
        }
    }
}

/// `over` into `base`: tables merge key by key, anything else replaces.
fn merge(base: &mut Table, over: Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}
