//! Platform tasks: work a service, not a Run, asks of a routing profile's
//! model — a Dream's curation of a memory store (api.md §13.5). The gateway
//! owns the prompt and the parsing, so callers get a typed answer whatever
//! the provider; the scripted model answers by the rules the API documents,
//! so the same journeys run offline.
//!
//! A task's answer is a JSON object the model is told to write; anything
//! else from a real provider is `unavailable` (the next candidate is tried,
//! and a caller may treat it as the model failing, never as a verdict).

use crate::model::*;
use checkfu_core::{Error, Result};
use serde::Deserialize;

/// The most text a task may hand a model: documents and messages together.
pub const MAX_TASK_CHARS: usize = 2 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    Dream(DreamTask),
}

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

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Dream(Vec<DreamChange>),
}

impl Task {
    /// Refuses a task too large to hand a model.
    pub fn check(&self) -> Result<()> {
        let Task::Dream(t) = self;
        let chars = t.instructions.len()
            + t.messages.iter().map(String::len).sum::<usize>()
            + t.documents.iter().map(|(p, c)| p.len() + c.len()).sum::<usize>();
        if chars > MAX_TASK_CHARS {
            return Err(Error::invalid(format!("the task holds {chars} bytes of text; at most {MAX_TASK_CHARS} go to a model"))
                .with_reason("task_too_large"));
        }
        Ok(())
    }

    /// The request a real provider gets.
    pub fn prompt(&self) -> ModelRequest {
        let Task::Dream(t) = self;
        let mut user = String::new();
        if !t.instructions.is_empty() {
            user.push_str("Instructions from the operator:\n");
            user.push_str(&t.instructions);
            user.push_str("\n\n");
        }
        user.push_str("The store's documents:\n");
        for (path, content) in &t.documents {
            user.push_str(&format!("=== {path}\n{content}\n"));
        }
        user.push_str("\nWhat the users said in the Sessions, oldest first:\n");
        for m in &t.messages {
            user.push_str(&format!("- {m}\n"));
        }
        ModelRequest {
            system: DREAM_SYSTEM.into(),
            messages: vec![Message { role: Role::User, content: vec![Block::Text(user)] }],
            tools: vec![],
        }
    }

    /// Reads a real provider's answer.
    pub fn parse(&self, text: &str) -> Result<Answer> {
        #[derive(Deserialize)]
        struct Changes {
            changes: Vec<DreamChange>,
        }
        let object = json_object(text).ok_or_else(|| Error::unavailable("the model's answer held no JSON object"))?;
        let c: Changes = serde_json::from_str(object)
            .map_err(|e| Error::unavailable(format!("the model's answer was not the changes asked for: {e}")))?;
        Ok(Answer::Dream(c.changes))
    }

    /// The scripted model's answer and usage (docs/memory.md, Dreams).
    pub fn scripted(&self) -> (Answer, Usage) {
        let Task::Dream(t) = self;
        let (changes, written) = scripted_dream(t);
        let read = t.instructions.chars().count()
            + t.messages.iter().map(|m| m.chars().count()).sum::<usize>()
            + t.documents.iter().map(|(_, c)| c.chars().count()).sum::<usize>();
        (Answer::Dream(changes), Usage { input_tokens: read.div_ceil(4) as i64, output_tokens: written.div_ceil(4) as i64 })
    }
}

const DREAM_SYSTEM: &str = "You curate a memory store: a tree of text documents an agent reads. \
From what the users said, keep what is worth remembering and tidy what is there, following the operator's instructions. \
Answer with only a JSON object {\"changes\":[{\"path\":\"/…\",\"content\":\"…\"}]}: each change gives a document's whole new text, \
or \"content\":null to delete it; paths start with /. Answer {\"changes\":[]} when nothing should change.";

/// Where scripted notes go.
pub const NOTES_PATH: &str = "/dream/notes.md";

/// Each message line starting `remember: ` adds its remainder to
/// `/dream/notes.md` once (not when a line of the notes already says it).
/// Answers the changes and the characters written.
fn scripted_dream(t: &DreamTask) -> (Vec<DreamChange>, usize) {
    let current = t.documents.iter().find(|(p, _)| p == NOTES_PATH).map(|(_, c)| c.as_str()).unwrap_or("");
    let mut seen: std::collections::HashSet<String> = current.lines().map(str::to_string).collect();
    let mut notes = current.to_string();
    let mut added = false;
    for line in t.messages.iter().flat_map(|m| m.lines()) {
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
    if !added {
        return (vec![], 0);
    }
    let written = notes.chars().count();
    (vec![DreamChange { path: NOTES_PATH.into(), content: Some(notes) }], written)
}

/// The text from the first `{` to the last `}`.
pub fn json_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (end > start).then(|| &text[start..=end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dream(messages: &[&str], docs: &[(&str, &str)]) -> Task {
        Task::Dream(DreamTask {
            instructions: String::new(),
            messages: messages.iter().map(|m| m.to_string()).collect(),
            documents: docs.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect(),
        })
    }

    #[test]
    fn scripted_notes_hold_each_remembered_line_once() {
        let (Answer::Dream(changes), usage) = dream(&["remember: tea", "hello\nremember: tea\nremember: cake"], &[]).scripted();
        assert_eq!(changes, vec![DreamChange { path: NOTES_PATH.into(), content: Some("tea\ncake\n".into()) }]);
        assert_eq!(usage.output_tokens, 3, "9 characters written");
        assert_eq!(usage.input_tokens, (13 + 34usize).div_ceil(4) as i64, "47 characters read");
    }

    #[test]
    fn scripted_notes_extend_what_the_store_has_and_skip_what_it_says() {
        let (Answer::Dream(changes), _) = dream(&["remember: tea\nremember: milk"], &[(NOTES_PATH, "tea")]).scripted();
        assert_eq!(changes[0].content.as_deref(), Some("tea\nmilk\n"));
        let (Answer::Dream(none), usage) = dream(&["remember: tea", "no notes here"], &[(NOTES_PATH, "tea\n")]).scripted();
        assert!(none.is_empty());
        assert_eq!(usage.output_tokens, 0);
    }

    #[test]
    fn a_real_answer_is_read_from_its_json_object() {
        let t = dream(&[], &[]);
        let a = t.parse("Sure! {\"changes\":[{\"path\":\"/a.md\",\"content\":null}]} done").unwrap();
        assert_eq!(a, Answer::Dream(vec![DreamChange { path: "/a.md".into(), content: None }]));
        assert!(t.parse("no object").is_err());
        assert!(t.parse("{\"other\":1}").is_err());
    }

    #[test]
    fn oversized_tasks_are_refused() {
        let big = "x".repeat(MAX_TASK_CHARS + 1);
        assert!(dream(&[&big], &[]).check().is_err());
        assert!(dream(&["small"], &[]).check().is_ok());
    }
}
