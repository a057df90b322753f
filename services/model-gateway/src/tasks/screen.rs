//! A delivery screen's judgment (api.md §18.8): may this `agent.message`
//! be delivered? The gateway renders the prompt and hands back the model's
//! reply object as given; the caller (the sessions service) holds it to
//! exactly `{"verdict":"allow"|"block"}`, so a reply that breaks it is a
//! screening error there, never a guess here. Only candidates qualified for
//! `delivery_screen` are called.
//!
//! The scripted model answers by the instructions' rule lines, so screened
//! journeys run offline and deterministically: `block: T` blocks and
//! `error: T` fails the call, each iff the message contains T; otherwise
//! it allows.

use super::tokens;
use crate::model::{Effort, Usage};
use checkfu_core::{Error, Result};
use serde_json::json;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScreenTask {
    pub instructions: String,
    /// The message's text, as its author wrote it.
    pub message: String,
    /// The screen's `tier`: every candidate's effort for this call.
    pub effort: Option<Effort>,
}

pub(super) const SYSTEM: &str = "You decide whether an assistant's message may be delivered to its reader, following the instructions. \
Reply with only a JSON object {\"verdict\":\"allow\"} or {\"verdict\":\"block\"} and nothing else.";

impl ScreenTask {
    pub(super) fn size(&self) -> usize {
        self.instructions.len() + self.message.len()
    }

    pub(super) fn prompt(&self) -> String {
        format!("Instructions:\n{}\n\nMessage:\n{}\n", self.instructions, self.message)
    }

    /// The instructions' rule `kind: T` whose T the message contains.
    fn instructed(&self, kind: &str) -> bool {
        self.instructions.lines().filter_map(|l| l.trim().strip_prefix(kind)).any(|t| self.message.contains(t.trim()))
    }

    /// The scripted model's reply (or its failure) and usage: ⌈characters
    /// sent ÷ 4⌉ in, ⌈reply ÷ 4⌉ out.
    pub(super) fn scripted(&self) -> Result<(String, Usage)> {
        if self.instructed("error:") {
            return Err(Error::unavailable("the scripted screen failed, as its instructions' error rule asks"));
        }
        let verdict = if self.instructed("block:") { "block" } else { "allow" };
        let reply = json!({ "verdict": verdict }).to_string();
        let sent = SYSTEM.chars().count() + self.prompt().chars().count();
        Ok((reply.clone(), Usage { input_tokens: tokens(sent), output_tokens: tokens(reply.chars().count()) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(instructions: &str, message: &str) -> Result<String> {
        ScreenTask { instructions: instructions.into(), message: message.into(), effort: None }.scripted().map(|(r, _)| r)
    }

    #[test]
    fn scripted_rules_block_or_fail_only_when_the_message_matches() {
        assert_eq!(screen("block: X1", "about X1").unwrap(), r#"{"verdict":"block"}"#);
        assert_eq!(screen("block: X1", "about R").unwrap(), r#"{"verdict":"allow"}"#);
        assert!(screen("error: R\nblock: X1", "about R").is_err());
        assert_eq!(screen("", "anything").unwrap(), r#"{"verdict":"allow"}"#);
    }
}
