//! Printing results: the API's JSON, one object per line, with `--json`;
//! only ids with `--quiet` (for scripts: `ID=$(checkfu ... -q)`); else a
//! line per resource (lists, creates) or the resource indented (one
//! resource shown on its own).

use crate::client::ClientArgs;
use serde_json::Value;
use std::io::Write;

#[derive(Debug, Clone, Copy)]
pub struct Printer {
    pub json: bool,
    pub quiet: bool,
}

impl Printer {
    pub fn of(args: &ClientArgs) -> Printer {
        Printer { json: args.json, quiet: args.quiet }
    }

    /// `--quiet`: the resource's id alone (nothing for one without).
    fn id(out: &mut dyn Write, v: &Value) -> anyhow::Result<()> {
        if let Some(id) = v["id"].as_str() {
            writeln!(out, "{id}")?;
        }
        Ok(())
    }

    /// One resource, as text already made (with its own line breaks).
    pub fn text(&self, out: &mut dyn Write, v: &Value, text: String) -> anyhow::Result<()> {
        match (self.json, self.quiet) {
            (true, _) => writeln!(out, "{v}")?,
            (false, true) => Self::id(out, v)?,
            (false, false) => write!(out, "{text}")?,
        }
        Ok(())
    }

    /// One resource, as one line of text.
    pub fn line(&self, out: &mut dyn Write, v: &Value, text: impl FnOnce(&Value) -> String) -> anyhow::Result<()> {
        match (self.json, self.quiet) {
            (true, _) => writeln!(out, "{v}")?,
            (false, true) => Self::id(out, v)?,
            (false, false) => writeln!(out, "{}", text(v))?,
        }
        Ok(())
    }

    /// Resources, a line each.
    pub fn lines(&self, out: &mut dyn Write, items: &[Value], text: impl Fn(&Value) -> String) -> anyhow::Result<()> {
        for v in items {
            self.line(out, v, &text)?;
        }
        Ok(())
    }

    /// One resource in full: indented JSON for a person.
    pub fn detail(&self, out: &mut dyn Write, v: &Value) -> anyhow::Result<()> {
        match (self.json, self.quiet) {
            (true, _) => writeln!(out, "{v}")?,
            (false, true) => Self::id(out, v)?,
            (false, false) => writeln!(out, "{}", serde_json::to_string_pretty(v)?)?,
        }
        Ok(())
    }
}

/// A string field, or "".
pub fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}
