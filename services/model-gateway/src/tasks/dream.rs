//! A Dream's curation (api.md §13.5): the model reads what the users said
//! and answers whole-document changes.

use super::tokens;
use crate::model::Usage;
use checkfu_core::{Error, Result};
use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DreamTask {
    pub instructions: String,
    /// The user messages' text, Sessions in the listed order, events by seq.
    pub messages: Vec<String>,
    /// `(path, content)` of the store at the pinned version.
    pub documents: Vec<(String, String)>,
}

/// One path's new content, or `None` to delete it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DreamChange {
    pub path: String,
    pub content: Option<String>,
}

pub(super) const SYSTEM: &str = "You curate a memory store: a tree of text documents an agent reads. \
From what the users said, keep what is worth remembering and tidy what is there, following the operator's instructions. \
Answer with only a JSON object {\"changes\":[{\"path\":\"/…\",\"content\":\"…\"}]}: each change gives a document's whole new text, \
or \"content\":null to delete it; paths start with /. Answer {\"changes\":[]} when nothing should change.";

/// Where scripted notes go.
pub const NOTES_PATH: &str = "/dream/notes.md";

impl DreamTask {
    pub(super) fn size(&self) -> usize {
        self.instructions.len()
            + self.messages.iter().map(String::len).sum::<usize>()
            + self.documents.iter().map(|(p, c)| p.len() + c.len()).sum::<usize>()
    }

    pub(super) fn prompt(&self) -> String {
        let mut user = String::new();
        if !self.instructions.is_empty() {
            user.push_str("Instructions from the operator:\n");
            user.push_str(&self.instructions);
            user.push_str("\n\n");
        }
        user.push_str("The store's documents:\n");
        for (path, content) in &self.documents {
            user.push_str(&format!("=== {path}\n{content}\n"));
        }
        user.push_str("\nWhat the users said in the Sessions, oldest first:\n");
        for m in &self.messages {
            user.push_str(&format!("- {m}\n"));
        }
        user
    }

    /// Each message line starting `remember: ` adds its remainder to
    /// `/dream/notes.md` once (not when a line of the notes already says
    /// it). Usage: ⌈characters read ÷ 4⌉ in (instructions, messages and
    /// documents), ⌈characters written ÷ 4⌉ out.
    pub(super) fn scripted(&self) -> (Vec<DreamChange>, Usage) {
        let read = self.instructions.chars().count()
            + self.messages.iter().map(|m| m.chars().count()).sum::<usize>()
            + self.documents.iter().map(|(_, c)| c.chars().count()).sum::<usize>();
        let current = self.documents.iter().find(|(p, _)| p == NOTES_PATH).map(|(_, c)| c.as_str()).unwrap_or("");
        let mut seen: std::collections::HashSet<String> = current.lines().map(str::to_string).collect();
        let mut notes = current.to_string();
        let mut added = false;
        for line in self.messages.iter().flat_map(|m| m.lines()) {
            let Some(rest) = line.trim_start().strip_prefix("remember: ") else { continue };
            let rest = rest.trim_end();
            if rest.is_empty() || !seen.insert(rest.to_string()) {
                continue;
            }
            if !notes.is_empty() && !notes.ends_with('\n') {
                notes.push('\n');
            }
            notes.push_str(rest);
            notes.push('\n');
            added = true;
        }
        let usage = |written: usize| Usage { input_tokens: tokens(read), output_tokens: tokens(written) };
        if !added {
            return (vec![], usage(0));
        }
        let written = notes.chars().count();
        (vec![DreamChange { path: NOTES_PATH.into(), content: Some(notes) }], usage(written))
    }
}

pub(super) fn parse(object: &str) -> Result<Vec<DreamChange>> {
    #[derive(Deserialize)]
    struct Changes {
        changes: Vec<DreamChange>,
    }
    let c: Changes =
        serde_json::from_str(object).map_err(|e| Error::unavailable(format!("the model's answer was not the changes asked for: {e}")))?;
    Ok(c.changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dream(messages: &[&str], docs: &[(&str, &str)]) -> DreamTask {
        DreamTask {
            instructions: String::new(),
            messages: messages.iter().map(|m| m.to_string()).collect(),
            documents: docs.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect(),
        }
    }

    #[test]
    fn scripted_notes_hold_each_remembered_line_once() {
        let (changes, usage) = dream(&["remember: tea", "hello\nremember: tea\nremember: cake"], &[]).scripted();
        assert_eq!(changes, vec![DreamChange { path: NOTES_PATH.into(), content: Some("tea\ncake\n".into()) }]);
        assert_eq!(usage.output_tokens, 3, "9 characters written");
        assert_eq!(usage.input_tokens, (13 + 34usize).div_ceil(4) as i64, "47 characters read");
    }

    #[test]
    fn scripted_notes_extend_what_the_store_has_and_skip_what_it_says() {
        let (changes, _) = dream(&["remember: tea\nremember: milk"], &[(NOTES_PATH, "tea")]).scripted();
        assert_eq!(changes[0].content.as_deref(), Some("tea\nmilk\n"));
        let (none, usage) = dream(&["remember: tea", "no notes here"], &[(NOTES_PATH, "tea\n")]).scripted();
        assert!(none.is_empty());
        assert_eq!(usage.output_tokens, 0);
    }

    #[test]
    fn a_real_answer_names_whole_documents_or_deletions() {
        assert_eq!(
            parse("{\"changes\":[{\"path\":\"/a.md\",\"content\":null}]}").unwrap(),
            vec![DreamChange { path: "/a.md".into(), content: None }]
        );
        assert!(parse("{\"other\":1}").is_err());
    }
}
