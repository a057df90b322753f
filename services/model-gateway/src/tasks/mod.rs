//! Platform tasks: work a service, not a Run, asks of a routing profile's
//! model — a Dream's curation of a memory store (api.md §13.5, `dream.rs`),
//! an Outcome's grading (§14, `grade.rs`) and an Automation's Check
//! (§18.1, `check.rs`, called only under a qualification). The gateway owns the prompt
//! and the parsing, so callers get a typed answer whatever the provider;
//! the scripted model answers by the rules the API documents, so the same
//! journeys run offline.
//!
//! A task's answer is a JSON object the model is told to write; anything
//! else from a real provider is `unavailable` (the next candidate is tried,
//! and a caller treats it as the model failing, never as a verdict).

pub mod check;
pub mod dream;
pub mod grade;
pub mod screen;

use crate::model::*;
use crate::qualifications::Purpose;
pub use check::CheckTask;
use checkfu_core::{Error, Result};
pub use dream::{DreamChange, DreamTask};
pub use grade::{GradeTask, Graded};
pub use screen::ScreenTask;

/// The most text a task may hand a model.
pub const MAX_TASK_CHARS: usize = 2 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub enum Task {
    Dream(DreamTask),
    Grade(GradeTask),
    Check(CheckTask),
    Screen(ScreenTask),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Dream(Vec<DreamChange>),
    Grade(Graded),
    /// The model's reply object as given (empty when it gave none).
    Check(String),
    /// The same, for a screen.
    Screen(String),
}

impl Task {
    /// Refuses a task too large to hand a model.
    pub fn check(&self) -> Result<()> {
        let chars = match self {
            Task::Dream(t) => t.size(),
            Task::Grade(t) => t.size(),
            Task::Check(t) => t.size(),
            Task::Screen(t) => t.size(),
        };
        if chars > MAX_TASK_CHARS {
            return Err(Error::invalid(format!("the task holds {chars} bytes of text; at most {MAX_TASK_CHARS} go to a model"))
                .with_reason("task_too_large"));
        }
        Ok(())
    }

    /// The request a real provider gets.
    pub fn prompt(&self) -> ModelRequest {
        let (system, user) = match self {
            Task::Dream(t) => (dream::SYSTEM, t.prompt()),
            Task::Grade(t) => (grade::SYSTEM, t.prompt()),
            Task::Check(t) => (check::SYSTEM, t.prompt()),
            Task::Screen(t) => (screen::SYSTEM, t.prompt()),
        };
        ModelRequest {
            system: system.into(),
            messages: vec![Message { role: Role::User, content: vec![Block::Text(user)] }],
            tools: vec![],
        }
    }

    /// Reads a real provider's answer. A Check's reply goes back as given,
    /// for its caller to hold to the shape it demanded.
    pub fn parse(&self, text: &str) -> Result<Answer> {
        let object = || json_object(text).ok_or_else(|| Error::unavailable("the model's answer held no JSON object"));
        match self {
            Task::Dream(_) => dream::parse(object()?).map(Answer::Dream),
            Task::Grade(t) => t.parse(object()?).map(Answer::Grade),
            Task::Check(_) => Ok(Answer::Check(json_object(text).unwrap_or_default().to_string())),
            Task::Screen(_) => Ok(Answer::Screen(json_object(text).unwrap_or_default().to_string())),
        }
    }

    /// The purpose a candidate must be qualified for to be called, for a
    /// judgment.
    pub fn purpose(&self) -> Option<Purpose> {
        match self {
            Task::Check(_) => Some(Purpose::Decision),
            Task::Screen(_) => Some(Purpose::DeliveryScreen),
            Task::Dream(_) | Task::Grade(_) => None,
        }
    }

    /// The effort every candidate takes for this task, when it sets one.
    pub fn effort(&self) -> Option<Effort> {
        match self {
            Task::Check(t) => t.effort,
            Task::Screen(t) => t.effort,
            Task::Dream(_) | Task::Grade(_) => None,
        }
    }

    /// The scripted model's answer and usage (a scripted Check or screen
    /// can fail, as its instructions ask).
    pub fn scripted(&self) -> Result<(Answer, Usage)> {
        Ok(match self {
            Task::Dream(t) => {
                let (changes, usage) = t.scripted();
                (Answer::Dream(changes), usage)
            }
            Task::Grade(t) => {
                let (graded, usage) = t.scripted();
                (Answer::Grade(graded), usage)
            }
            Task::Check(t) => {
                let (reply, usage) = t.scripted()?;
                (Answer::Check(reply), usage)
            }
            Task::Screen(t) => {
                let (reply, usage) = t.scripted()?;
                (Answer::Screen(reply), usage)
            }
        })
    }
}

/// Characters as the scripted model counts tokens: ⌈n ÷ 4⌉.
pub(crate) fn tokens(chars: usize) -> i64 {
    chars.div_ceil(4) as i64
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

    #[test]
    fn oversized_tasks_are_refused() {
        let big = "x".repeat(MAX_TASK_CHARS + 1);
        let t = |m: &str| Task::Dream(DreamTask { messages: vec![m.to_string()], ..Default::default() });
        assert!(t(&big).check().is_err());
        assert!(t("small").check().is_ok());
    }

    #[test]
    fn an_answer_is_read_from_its_json_object() {
        assert_eq!(json_object("Sure! {\"a\": {\"b\": 1}} done"), Some("{\"a\": {\"b\": 1}}"));
        assert_eq!(json_object("} no {"), None);
        let t = Task::Dream(DreamTask::default());
        assert!(t.parse("no object").is_err());
    }
}
