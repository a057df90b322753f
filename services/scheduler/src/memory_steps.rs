//! Memory steps in a program (api.md §18.7): what a `step_memory_read` or
//! `step_memory_write` asks of the memory service, and how its answer
//! settles the step and is kept as the trace's `memory` receipt (no
//! content).
//!
//! A Memory step is `running` from the write that reaches it until its
//! answer is saved; nothing else is recorded before it is sent, because
//! sending it again is safe: a read has no effect, and a write carries the
//! key `<firing>/<step>` with which the memory service answers a second
//! send with what the first did. So recovery (or the next attempt of an
//! authored retry — the key stays) sends whatever has no answer.

use crate::memory_access::{MemoryAccess, MemoryAnswer, MemoryWork};
use crate::program::{Outcome, Program};
use serde_json::Value;

impl Program {
    /// A Memory write's content and expected sha, read from its bindings:
    /// the content must be text (`memory_content_not_text`), a bound sha a
    /// string (`memory_expected_sha_invalid`).
    pub(crate) fn memory_write_input(&self, n: &Value, event: &Value) -> Result<(String, Option<String>), &'static str> {
        let bindings = &n["inputBindings"];
        let content = match self.read_bound(event, &bindings["content"])? {
            Value::String(s) => s,
            _ => return Err("memory_content_not_text"),
        };
        let expected = match bindings.get("expectedSha256").filter(|b| !b.is_null()) {
            None => None,
            Some(b) => match self.read_bound(event, b)? {
                Value::String(s) => Some(s),
                _ => return Err("memory_expected_sha_invalid"),
            },
        };
        Ok((content, expected))
    }

    /// The Memory steps `running` with no answer for their attempt.
    pub fn memory_work(&self, event: &Value) -> Vec<MemoryWork> {
        self.steps
            .iter()
            .filter(|s| matches!(s.kind.as_str(), "step_memory_read" | "step_memory_write"))
            .filter(|s| s.outcome.as_ref().is_some_and(|o| o.kind == "running"))
            .filter(|s| !self.memory.iter().any(|m| m.step_id == s.id && m.attempt == s.attempt.max(1)))
            .filter_map(|s| {
                let n = self.target.steps.iter().find(|n| n["id"] == s.id.as_str())?;
                let write = match s.kind.as_str() {
                    "step_memory_write" => Some(self.memory_write_input(n, event).ok()?),
                    _ => None,
                };
                Some(MemoryWork {
                    step_id: s.id.clone(),
                    attempt: s.attempt.max(1),
                    store: n["memoryStore"].as_str().unwrap_or_default().to_string(),
                    path: n["path"].as_str().unwrap_or_default().to_string(),
                    at_version: n["atVersion"].as_i64(),
                    write,
                })
            })
            .collect()
    }

    /// Saves a Memory step's answer and settles its attempt: `false` when
    /// the step moved on or the attempt has its answer already.
    pub fn memory_answered(&mut self, w: &MemoryWork, answer: MemoryAnswer, now: i64) -> bool {
        let Some(step) = self.steps.iter_mut().find(|s| s.id == w.step_id) else { return false };
        let running = step.outcome.as_ref().is_some_and(|o| o.kind == "running");
        if !running || step.attempt.max(1) != w.attempt || self.memory.iter().any(|m| m.step_id == w.step_id && m.attempt == w.attempt) {
            return false;
        }
        let mut access = MemoryAccess {
            step_id: w.step_id.clone(),
            attempt: w.attempt,
            memory_store_id: w.store.clone(),
            path: w.path.clone(),
            operation: if w.write.is_some() { "write" } else { "read" }.into(),
            result: "failed".into(),
            store_version: None,
            content_sha256: None,
            memory_proposal_id: None,
            error: None,
            at_ms: now,
        };
        let outcome = match answer {
            MemoryAnswer::Document { store_version, document } => {
                access.result = if w.write.is_some() { "written" } else { "read" }.into();
                access.store_version = Some(store_version);
                access.content_sha256 = document["content_sha256"].as_str().map(String::from);
                let mut output = serde_json::json!({"store_version": store_version, "document": document});
                if w.write.is_some() {
                    output["result"] = "written".into();
                }
                step.output = Some(output);
                Outcome::completed()
            }
            MemoryAnswer::Proposed { memory_proposal_id } => {
                access.result = "proposed".into();
                access.memory_proposal_id = Some(memory_proposal_id.clone());
                step.output = Some(serde_json::json!({"result": "proposed", "memory_proposal_id": memory_proposal_id}));
                Outcome::completed()
            }
            MemoryAnswer::Failed(reason) => {
                access.error = Some(reason.clone());
                Outcome::failed(&reason)
            }
        };
        self.memory.push(access);
        self.settle_attempt(&w.step_id, outcome, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StepsTarget;
    use serde_json::json;

    const STORE: &str = "mstr_01jx0000000000000000000001";

    fn program() -> Program {
        let steps = vec![
            json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook"}}),
            json!({"kind": "step_memory_read", "id": "r", "memoryStore": STORE, "path": "/n.md"}),
            json!({"kind": "step_memory_write", "id": "w", "memoryStore": STORE, "path": "/n.md",
                "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/t"},
                    "expectedSha256": {"sourceNodeId": "r", "pointer": "/document/content_sha256"}}}),
        ];
        let edges = vec![json!({"kind": "starts", "from": "hook", "to": "r"}), json!({"kind": "then", "from": "r", "to": "w"})];
        Program::new(StepsTarget { program_sha256: "x".into(), steps, edges }, "hook".into())
    }

    fn document(sha: &str) -> Value {
        json!({"path": "/n.md", "content": "old", "content_sha256": sha, "size_bytes": 3, "updated_at": "t", "updated_in_version": 1})
    }

    #[test]
    fn a_read_feeds_the_write_its_sha_and_each_is_sent_until_answered() {
        let mut p = program();
        let event = json!({"t": "new"});
        p.advance(&event, false, 1);
        let work = p.memory_work(&event);
        assert_eq!(work.len(), 1, "only the read runs first");
        assert_eq!(p.memory_work(&event), work, "unanswered, it is sent again");
        assert!(p.memory_answered(&work[0], MemoryAnswer::Document { store_version: 4, document: document("s1") }, 2));
        assert!(!p.memory_answered(&work[0], MemoryAnswer::Failed("memory_unavailable".into()), 3), "answered once");
        p.advance(&event, false, 3);
        let work = p.memory_work(&event);
        assert_eq!(work[0].write, Some(("new".into(), Some("s1".into()))));
        assert!(p.memory_answered(&work[0], MemoryAnswer::Failed("memory_sha_mismatch".into()), 4));
        p.advance(&event, false, 4);
        assert_eq!(p.result.as_deref(), Some("failed"));
        let receipts: Vec<(&str, &str, Option<i64>)> =
            p.memory.iter().map(|m| (m.operation.as_str(), m.result.as_str(), m.store_version)).collect();
        assert_eq!(receipts, vec![("read", "read", Some(4)), ("write", "failed", None)]);
        assert!(!serde_json::to_string(&p.memory).unwrap().contains("old"), "receipts hold no content");
    }

    #[test]
    fn content_must_be_text() {
        let mut p = program();
        let event = json!({"t": {"not": "text"}});
        p.advance(&event, false, 1);
        let work = p.memory_work(&event);
        p.memory_answered(&work[0], MemoryAnswer::Document { store_version: 1, document: document("s1") }, 2);
        p.advance(&event, false, 2);
        let w = p.step("w").unwrap();
        assert_eq!(w.outcome.as_ref().and_then(|o| o.reason.as_deref()), Some("memory_content_not_text"));
    }
}
