//! Rebuilds the model conversation from a Session's event log. The log is
//! the truth: after every step the runner re-reads it, so a resumed Run (new
//! runner, new lease) sees exactly what the previous one wrote.

use crate::model::{ApprovalStatus, Decision, Disposition};
use checkfu_core::events::EventType as E;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::runner::v1::RunEvent;
use serde_json::Value;

#[derive(Debug, Default, Clone)]
pub struct Transcript {
    pub messages: Vec<mg::Message>,
    /// An interrupt arrived at or after the Run's start.
    pub interrupted: bool,
    pub cursor: i64,
    /// Tool uses not answered yet, in the order the model made them: ones
    /// waiting on approval, and any a crashed runner left unanswered.
    pub outstanding: Vec<Outstanding>,
    /// User messages that arrived while a model call was already under way
    /// (after the log position its context was read at): that call did not
    /// see them, so they belong after its output, not before it.
    deferred: Vec<Vec<mg::ContentBlock>>,
    /// Seqs of the user messages at the end of `messages` since the last
    /// model call started (candidates for `deferred`).
    recent_user: Vec<i64>,
}

/// A tool use with no answer yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Outstanding {
    pub tool_use_id: String,
    pub name: String,
    pub input: Value,
    /// How governance decided it.
    pub evaluated_permission: Disposition,
    pub approval_id: Option<String>,
    /// The approval's answer once it is resolved.
    pub decision: Option<Decision>,
    /// Where the approval ended (`None` for a status this runner does not know).
    pub status: Option<ApprovalStatus>,
    pub deny_message: Option<String>,
    /// Authorized (by a StandingApproval) before it ran.
    pub authorized: bool,
}

fn str_field(p: &Value, k: &str) -> String {
    p.get(k).and_then(Value::as_str).unwrap_or_default().to_string()
}

use checkfu_core::events::text_of;

/// The text the model sees for a tool result's `content`.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Array(_)) => text_of(&serde_json::json!({"c": v}), "c"),
        Some(v) if v.get("type").and_then(Value::as_str) == Some("result_truncated") => format!(
            "{}\n[result truncated: {} characters in all]",
            v.get("preview").and_then(Value::as_str).unwrap_or_default(),
            v.get("original_chars").and_then(Value::as_u64).unwrap_or_default()
        ),
        // A platform tool's result (multiagent) is JSON.
        Some(v @ Value::Object(_)) => v.to_string(),
        _ => String::new(),
    }
}

/// A user message's blocks: its text, then a File block per document or
/// image it names (filled in from the workspace before the model call).
fn user_blocks(payload: &Value) -> Vec<mg::ContentBlock> {
    use mg::content_block::Block as B;
    let mut out = vec![block(B::Text(text_of(payload, "content")))];
    for b in payload.get("content").and_then(Value::as_array).into_iter().flatten() {
        if matches!(b.get("type").and_then(Value::as_str), Some("document" | "image")) {
            let file_id = b.pointer("/source/file_id").and_then(Value::as_str).unwrap_or_default().to_string();
            let title = b.get("title").and_then(Value::as_str).unwrap_or_default().to_string();
            out.push(block(B::File(mg::FileRef { file_id, title, ..Default::default() })));
        }
    }
    out
}

fn block(b: mg::content_block::Block) -> mg::ContentBlock {
    mg::ContentBlock { block: Some(b) }
}

impl Transcript {
    /// Appends a block. Each user message stays its own message (the model
    /// reads "the newest user message"); tool results gather into one user
    /// message, and one assistant turn's text and tool uses into one.
    fn push(&mut self, role: &str, b: mg::content_block::Block) {
        use mg::content_block::Block as B;
        if role == "assistant" {
            self.recent_user.clear();
        }
        let joins = match (self.messages.last(), &b) {
            (Some(m), B::ToolResult(_)) => m.role == role && m.content.iter().all(|c| matches!(c.block, Some(B::ToolResult(_)))),
            (Some(m), _) => m.role == role && role == "assistant",
            (None, _) => false,
        };
        match self.messages.last_mut() {
            Some(m) if joins => m.content.push(block(b)),
            _ => self.messages.push(mg::Message { role: role.into(), content: vec![block(b)] }),
        }
    }

    /// A user turn of plain text the platform wrote.
    fn user_text(&mut self, text: String, seq: i64) {
        use mg::content_block::Block as B;
        self.flush_deferred();
        self.messages.push(mg::Message { role: "user".into(), content: vec![block(B::Text(text))] });
        self.recent_user.push(seq);
    }

    /// Adds a tool use's answer; it is no longer outstanding.
    fn answer(&mut self, p: &Value, b: mg::content_block::Block) {
        let id = str_field(p, "tool_use_id");
        self.outstanding.retain(|o| o.tool_use_id != id);
        self.push("user", b);
    }

    /// Whether a gated tool use with this id is already in the conversation.
    fn is_outstanding(&self, id: &str) -> bool {
        self.outstanding.iter().any(|o| o.tool_use_id == id)
    }

    /// Folds newly read events in; `start_seq` is where the Run began.
    pub fn absorb(&mut self, events: &[RunEvent], start_seq: i64) {
        use mg::content_block::Block as B;
        for e in events {
            self.cursor = self.cursor.max(e.seq);
            let p: Value = serde_json::from_str(&e.payload_json).unwrap_or(Value::Null);
            // A type this runner does not know is not part of the conversation.
            let Ok(ty) = E::parse("type", &e.r#type) else { continue };
            match ty {
                E::UserMessage => {
                    self.flush_deferred();
                    self.messages.push(mg::Message { role: "user".into(), content: user_blocks(&p) });
                    self.recent_user.push(e.seq);
                }
                // An Outcome's description is its first Run's user turn, and
                // a grader's feedback the revision Run's (api.md §14).
                E::UserDefineOutcome => self.user_text(str_field(&p, "description"), e.seq),
                // A message from another thread is this thread's newest user
                // turn (api.md §15.3).
                E::AgentThreadMessageReceived => self.user_text(text_of(&p, "content"), e.seq),
                E::OutcomeEvaluationCompleted if str_field(&p, "result") == "needs_revision" => {
                    self.user_text(str_field(&p, "feedback"), e.seq)
                }
                // A model call read the log up to `context_seq`: messages
                // after it that are already here were not in its context.
                E::SpanModelRequestStart => {
                    let context = p.get("context_seq").and_then(Value::as_i64).unwrap_or(e.seq - 1);
                    let mut held = vec![];
                    while let Some(seq) = self.recent_user.last().copied().filter(|s| *s > context) {
                        self.recent_user.pop();
                        match self.messages.pop() {
                            Some(m) if m.role == "user" => held.push(m.content),
                            Some(m) => {
                                self.messages.push(m);
                                tracing::debug!(seq, "a message after the call's context is not at the end; left in place");
                                break;
                            }
                            None => break,
                        }
                    }
                    held.reverse();
                    held.extend(std::mem::take(&mut self.deferred));
                    self.deferred = held;
                    self.recent_user.clear();
                }
                E::RunCompleted | E::SessionStatusIdle if self.outstanding.is_empty() => self.flush_deferred(),
                E::AgentMessage => self.push("assistant", B::Text(text_of(&p, "content"))),
                E::AgentToolUse => {
                    self.outstanding.push(Outstanding {
                        tool_use_id: str_field(&p, "tool_use_id"),
                        name: str_field(&p, "name"),
                        input: p.get("input").cloned().unwrap_or_else(|| serde_json::json!({})),
                        evaluated_permission: Disposition::from_wire(&str_field(&p, "evaluated_permission")),
                        approval_id: None,
                        decision: None,
                        status: None,
                        deny_message: None,
                        authorized: false,
                    });
                    self.push(
                        "assistant",
                        B::ToolUse(mg::ToolUse {
                            id: str_field(&p, "tool_use_id"),
                            name: str_field(&p, "name"),
                            input_json: p.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into()),
                        }),
                    )
                }
                E::ActionApprovalPending => {
                    let id = str_field(&p, "tool_use_id");
                    if let Some(o) = self.outstanding.iter_mut().find(|o| o.tool_use_id == id) {
                        o.approval_id = Some(str_field(&p, "action_approval_id"));
                    }
                }
                E::ActionApprovalResolved => {
                    let id = str_field(&p, "tool_use_id");
                    if let Some(o) = self.outstanding.iter_mut().find(|o| o.tool_use_id == id) {
                        o.decision = Some(Decision::from_wire(&str_field(&p, "decision")));
                        o.status = ApprovalStatus::parse("status", &str_field(&p, "status")).ok();
                        if let Some(m) = p.get("deny_message").and_then(Value::as_str) {
                            o.deny_message = Some(m.to_string());
                        }
                    }
                }
                E::UserToolConfirmation => {
                    let id = str_field(&p, "tool_use_id");
                    if let Some(o) = self.outstanding.iter_mut().find(|o| o.tool_use_id == id) {
                        o.deny_message = p.get("deny_message").and_then(Value::as_str).map(str::to_string);
                    }
                }
                E::RunActionAuthorized => {
                    let id = str_field(&p, "tool_use_id");
                    if let Some(o) = self.outstanding.iter_mut().find(|o| o.tool_use_id == id) {
                        o.authorized = true;
                    }
                }
                // An approved custom tool use: the tool use is already in
                // the conversation; now the host owes its result.
                E::AgentCustomToolUse if self.is_outstanding(&str_field(&p, "custom_tool_use_id")) => {
                    let id = str_field(&p, "custom_tool_use_id");
                    self.outstanding.retain(|o| o.tool_use_id != id);
                }
                E::AgentCustomToolUse => self.push(
                    "assistant",
                    B::ToolUse(mg::ToolUse {
                        id: p.get("custom_tool_use_id").and_then(Value::as_str).unwrap_or_default().into(),
                        name: p.get("name").and_then(Value::as_str).unwrap_or_default().into(),
                        input_json: p.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into()),
                    }),
                ),
                E::UserCustomToolResult => self.push(
                    "user",
                    B::ToolResult(mg::ToolResult {
                        tool_use_id: p.get("custom_tool_use_id").and_then(Value::as_str).unwrap_or_default().into(),
                        content: text_of(&p, "content"),
                        is_error: p.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    }),
                ),
                // A user.tool_result: the work item's holder ran a sandbox
                // tool (api.md §17.13).
                E::AgentToolResult | E::UserToolResult => self.answer(
                    &p,
                    B::ToolResult(mg::ToolResult {
                        tool_use_id: str_field(&p, "tool_use_id"),
                        content: result_text(p.get("content")),
                        is_error: p.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    }),
                ),
                E::PolicyDenied => self.answer(
                    &p,
                    B::ToolResult(mg::ToolResult {
                        tool_use_id: str_field(&p, "tool_use_id"),
                        content: p.get("guidance").and_then(Value::as_str).unwrap_or("denied by policy").into(),
                        is_error: true,
                    }),
                ),
                E::UserInterrupt if e.seq >= start_seq => self.interrupted = true,
                _ => {}
            }
        }
    }

    /// Folds in events this runner appended itself, if they took exactly the
    /// next seqs (nothing else was written in between); otherwise leaves the
    /// transcript to catch up from the log. Returns whether it folded them.
    pub fn absorb_own(&mut self, seqs: &[i64], events: &[(E, String)], start_seq: i64) -> bool {
        let contiguous = seqs.len() == events.len() && seqs.iter().enumerate().all(|(i, s)| *s == self.cursor + 1 + i as i64);
        if contiguous {
            let own: Vec<RunEvent> = seqs
                .iter()
                .zip(events)
                .map(|(seq, (t, p))| RunEvent { seq: *seq, r#type: t.as_str().into(), payload_json: p.clone(), run_id: String::new() })
                .collect();
            self.absorb(&own, start_seq);
        }
        contiguous
    }

    /// Starts from a claim's tail when it continues this transcript
    /// (the transcript reaches at least to just before the tail).
    pub fn absorb_tail(&mut self, tail: &[RunEvent], start_seq: i64) -> bool {
        match tail.first() {
            Some(first) if self.cursor + 1 >= first.seq => {
                let fresh: Vec<RunEvent> = tail.iter().filter(|e| e.seq > self.cursor).cloned().collect();
                self.absorb(&fresh, start_seq);
                true
            }
            _ => false,
        }
    }

    /// Puts messages a finished call did not see after its output; called
    /// at the boundary before the next call.
    pub fn flush_deferred(&mut self) {
        for content in std::mem::take(&mut self.deferred) {
            self.messages.push(mg::Message { role: "user".into(), content });
        }
    }

    /// The model owes a turn when the conversation ends on the user's side
    /// (a message, or tool results), or a message arrived that the last
    /// call did not see.
    pub fn needs_turn(&self) -> bool {
        !self.deferred.is_empty() || self.messages.last().is_some_and(|m| m.role == "user")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: i64, t: &str, p: &str) -> RunEvent {
        RunEvent { seq, r#type: t.into(), payload_json: p.into(), run_id: String::new() }
    }

    #[test]
    fn a_work_holders_result_answers_its_call() {
        let mut t = Transcript::default();
        t.absorb(
            &[ev(
                1,
                "agent.tool_use",
                r#"{"tool_use_id":"toolu_1","name":"bash","input":{},"evaluated_permission":"allow","external":true}"#,
            )],
            1,
        );
        assert_eq!(t.outstanding.len(), 1);
        t.absorb(&[ev(2, "user.tool_result", r#"{"tool_use_id":"toolu_1","content":[{"type":"text","text":"hi"}],"is_error":false}"#)], 1);
        assert!(t.outstanding.is_empty(), "answered");
        let last = t.messages.last().expect("a message");
        assert_eq!(last.role, "user");
        match &last.content[0].block {
            Some(mg::content_block::Block::ToolResult(r)) => assert_eq!((r.tool_use_id.as_str(), r.content.as_str()), ("toolu_1", "hi")),
            other => panic!("{other:?}"),
        }
        assert!(t.needs_turn(), "the model sees the result next");
    }

    #[test]
    fn a_message_from_another_thread_is_the_newest_user_turn() {
        let mut t = Transcript::default();
        let p = r#"{"from_session_thread_id":"sthr_1","content":[{"type":"text","text":"report back"}]}"#;
        t.absorb(&[ev(1, "agent.thread_message_received", p)], 1);
        assert!(t.needs_turn());
        assert_eq!(t.messages.len(), 1);
        assert_eq!(t.messages[0].role, "user");
    }

    #[test]
    fn an_outcomes_description_and_its_feedback_are_user_turns() {
        let mut t = Transcript::default();
        t.absorb(&[ev(1, "user.define_outcome", r#"{"description":"say hello","rubric":"r","max_iterations":2}"#)], 1);
        t.absorb(&[ev(2, "agent.message", r#"{"content":[{"type":"text","text":"hi"}]}"#)], 1);
        t.absorb(&[ev(3, "outcome.evaluation_completed", r#"{"result":"satisfied","feedback":""}"#)], 1);
        t.absorb(&[ev(4, "outcome.evaluation_completed", r#"{"result":"needs_revision","feedback":"fail require: x"}"#)], 4);
        let texts: Vec<(String, String)> = t
            .messages
            .iter()
            .map(|m| match &m.content[0].block {
                Some(mg::content_block::Block::Text(x)) => (m.role.clone(), x.clone()),
                _ => (m.role.clone(), String::new()),
            })
            .collect();
        assert_eq!(
            texts,
            [("user".to_string(), "say hello".to_string()), ("assistant".into(), "hi".into()), ("user".into(), "fail require: x".into())]
        );
    }

    #[test]
    fn a_turn_is_owed_only_while_the_user_spoke_last() {
        let mut t = Transcript::default();
        t.absorb(&[ev(1, "session.created", "{}"), ev(2, "user.message", r#"{"content":[{"type":"text","text":"hi"}]}"#)], 2);
        assert!(t.needs_turn());
        t.absorb(&[ev(3, "agent.message", r#"{"content":[{"type":"text","text":"echo: hi"}]}"#)], 2);
        assert!(!t.needs_turn());
        assert_eq!(t.cursor, 3);
        t.absorb(&[ev(4, "user.message", r#"{"content":[{"type":"text","text":"more"}]}"#)], 2);
        assert!(t.needs_turn(), "a steering message owes another turn");
        t.absorb(&[ev(5, "user.message", r#"{"content":[{"type":"text","text":"newest"}]}"#)], 2);
        assert_eq!(t.messages.len(), 4, "each user message stays separate");
    }

    #[test]
    fn a_denial_recorded_without_its_confirmation_still_carries_its_message() {
        let mut t = Transcript::default();
        let usep = r#"{"tool_use_id":"toolu_1","name":"write","input":{},"evaluated_permission":"require_approval"}"#;
        t.absorb(&[ev(1, "user.message", r#"{"content":[{"type":"text","text":"go"}]}"#), ev(2, "agent.tool_use", usep)], 1);
        let resolved =
            r#"{"action_approval_id":"aapr_1","tool_use_id":"toolu_1","decision":"deny","status":"denied","deny_message":"not that"}"#;
        t.absorb(&[ev(3, "action_approval.resolved", resolved)], 1);
        let o = t.outstanding.iter().find(|o| o.tool_use_id == "toolu_1").expect("outstanding");
        assert_eq!(o.deny_message.as_deref(), Some("not that"));
    }

    #[test]
    fn a_message_naming_files_carries_a_file_block_for_each() {
        use mg::content_block::Block as B;
        let mut t = Transcript::default();
        let p = r#"{"content":[{"type":"text","text":"see"},{"type":"document","source":{"type":"file","file_id":"file_1"},"title":"n"},
            {"type":"image","source":{"type":"file","file_id":"file_2"}}]}"#;
        t.absorb(&[ev(1, "user.message", p)], 1);
        let blocks: Vec<_> = t.messages[0].content.iter().map(|b| b.block.clone().expect("block")).collect();
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[0], B::Text("see".into()));
        let B::File(f) = &blocks[1] else { panic!("{blocks:?}") };
        assert_eq!((f.file_id.as_str(), f.title.as_str()), ("file_1", "n"));
        assert!(matches!(&blocks[2], B::File(f) if f.file_id == "file_2"));
    }

    /// The race of the steering report: a message persisted after the log
    /// was read for a model call, but before the call's start was written.
    /// That call answered the message before it; the next turn is owed for
    /// this one, and it comes after the answer, not before.
    #[test]
    fn a_message_the_call_did_not_see_is_owed_a_turn_after_its_answer() {
        let msg = |t: &str| format!(r#"{{"content":[{{"type":"text","text":"{t}"}}]}}"#);
        let mut t = Transcript::default();
        t.absorb(
            &[
                ev(131, "user.message", &msg("first")),
                ev(132, "user.message", &msg("steer")),
                ev(133, "span.model_request_start", r#"{"provider":"scripted","model":"s","context_seq":131}"#),
                ev(134, "span.model_request_end", "{}"),
                ev(135, "agent.message", &msg("echo: first")),
                ev(136, "run.completed", "{}"),
            ],
            131,
        );
        assert!(t.needs_turn(), "the steering message was never answered");
        let texts: Vec<String> = t
            .messages
            .iter()
            .map(|m| {
                let Some(mg::content_block::Block::Text(s)) = &m.content[0].block else { return String::new() };
                format!("{}:{s}", m.role)
            })
            .collect();
        assert_eq!(texts, vec!["user:first", "assistant:echo: first", "user:steer"]);
        // A call that did see it owes nothing more.
        let mut seen = Transcript::default();
        seen.absorb(
            &[
                ev(1, "user.message", &msg("a")),
                ev(2, "span.model_request_start", r#"{"context_seq":1}"#),
                ev(3, "agent.message", &msg("echo: a")),
            ],
            1,
        );
        assert!(!seen.needs_turn());
        // Held across a batch boundary, and through a tool round.
        let mut split = Transcript::default();
        split.absorb(&[ev(1, "user.message", &msg("a")), ev(2, "user.message", &msg("b"))], 1);
        split.absorb(&[ev(3, "span.model_request_start", r#"{"context_seq":1}"#), ev(4, "span.model_request_end", "{}")], 1);
        split.absorb(&[ev(5, "agent.tool_use", r#"{"tool_use_id":"t1","name":"read","input":{}}"#)], 1);
        assert!(split.needs_turn(), "b is still owed");
        split.absorb(&[ev(6, "agent.tool_result", r#"{"tool_use_id":"t1","content":"x","is_error":false}"#)], 1);
        split.flush_deferred();
        let roles: Vec<&str> = split.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, vec!["user", "assistant", "user", "user"], "b comes after the tool result");
    }

    #[test]
    fn own_appends_fold_in_only_when_nothing_came_between() {
        let mut t = Transcript::default();
        t.absorb(&[ev(1, "user.message", r#"{"content":[{"type":"text","text":"hi"}]}"#)], 1);
        let msg = r#"{"content":[{"type":"text","text":"echo: hi"}]}"#.to_string();
        assert!(!t.absorb_own(&[3], &[(E::AgentMessage, msg.clone())], 1), "seq 2 was written by someone else");
        assert_eq!(t.cursor, 1);
        assert!(t.absorb_own(&[2], &[(E::AgentMessage, msg)], 1));
        assert_eq!(t.cursor, 2);
        assert!(!t.needs_turn());
    }

    #[test]
    fn a_claim_tail_is_used_only_when_it_continues_the_transcript() {
        let mut t = Transcript::default();
        t.absorb(&[ev(1, "user.message", r#"{"content":[{"type":"text","text":"a"}]}"#)], 1);
        let tail = [ev(3, "user.message", r#"{"content":[{"type":"text","text":"b"}]}"#)];
        assert!(!t.absorb_tail(&tail, 3), "seq 2 is missing");
        let tail = [
            ev(2, "agent.message", r#"{"content":[{"type":"text","text":"x"}]}"#),
            ev(3, "user.message", r#"{"content":[{"type":"text","text":"b"}]}"#),
        ];
        assert!(t.absorb_tail(&tail, 3));
        assert_eq!((t.cursor, t.messages.len()), (3, 3));
    }

    #[test]
    fn interrupts_before_the_run_do_not_count() {
        let mut t = Transcript::default();
        t.absorb(&[ev(1, "user.interrupt", "{}")], 5);
        assert!(!t.interrupted);
        t.absorb(&[ev(6, "user.interrupt", "{}")], 5);
        assert!(t.interrupted);
    }

    #[test]
    fn denials_answer_the_tool_use() {
        let mut t = Transcript::default();
        t.absorb(
            &[
                ev(1, "user.message", r#"{"content":[{"type":"text","text":"call x {}"}]}"#),
                ev(2, "agent.tool_use", r#"{"tool_use_id":"t1","name":"x","input":{}}"#),
                ev(3, "policy.denied", r#"{"tool_use_id":"t1","guidance":"no"}"#),
            ],
            1,
        );
        assert!(t.needs_turn());
        assert_eq!(t.messages.len(), 3);
    }
}
