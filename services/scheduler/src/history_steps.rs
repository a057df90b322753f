//! History steps in a program (api.md §18.7): a `step_select_history`
//! picks the Sessions after its frontier and saves that selection as its
//! output — `{frontier, base, session_ids, through}` — so recovery never
//! selects differently; a `step_record_history` moves the frontier from
//! `base` to `through` once every step it requires completed, and is
//! `skipped` otherwise, leaving the selection for the next firing.
//!
//! Both are `running` until their answer is saved. Asking again is safe:
//! a selection is a read, and the frontier's compare-and-set answers a
//! second move by the same firing as done.

use crate::history_record::{HistoryAnswer, HistoryReceipt, HistoryWork};
use crate::program::{Outcome, Program};
use serde_json::{Value, json};

impl Program {
    /// Whether a `step_record_history` reached now moves its frontier:
    /// `None` when a step it requires did not complete (it is then
    /// `skipped`).
    pub(crate) fn record_due(&self, n: &Value) -> Option<()> {
        let mut required = n["requires"].as_array().into_iter().flatten().filter_map(Value::as_str);
        required.all(|id| self.step(id).and_then(|s| s.outcome.as_ref()).is_some_and(|o| o.kind == "completed")).then_some(())
    }

    /// The history steps `running` with no answer saved.
    pub fn history_work(&self) -> Vec<HistoryWork> {
        self.steps
            .iter()
            .filter(|s| self.is_running(&s.id))
            .filter(|s| !self.history.iter().any(|h| h.step_id == s.id))
            .filter_map(|s| {
                let n = self.target.steps.iter().find(|n| n["id"] == s.id.as_str())?;
                let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
                match s.kind.as_str() {
                    "step_select_history" => Some(HistoryWork::Select {
                        step_id: s.id.clone(),
                        frontier: text(&n["frontier"]),
                        agents: n["agents"].as_array().into_iter().flatten().map(text).collect(),
                        limit: n["limit"].as_i64().unwrap_or(1),
                    }),
                    "step_record_history" => {
                        let selection = self.step(n["selection"].as_str()?)?.output.as_ref()?;
                        Some(HistoryWork::Record {
                            step_id: s.id.clone(),
                            frontier: text(&selection["frontier"]),
                            base: text(&selection["base"]),
                            through: text(&selection["through"]),
                            session_ids: selection["session_ids"].as_array().into_iter().flatten().map(text).collect(),
                        })
                    }
                    _ => None,
                }
            })
            .collect()
    }

    /// Saves a history step's answer and settles it: `false` when it
    /// moved on or has its answer already.
    pub fn history_answered(&mut self, w: &HistoryWork, answer: HistoryAnswer, now: i64) -> bool {
        let id = w.step_id().to_string();
        if !self.is_running(&id) || self.history.iter().any(|h| h.step_id == id) {
            return false;
        }
        let (operation, frontier, mut base, mut through, mut session_ids) = match w {
            HistoryWork::Select { frontier, .. } => ("select", frontier.clone(), String::new(), String::new(), vec![]),
            HistoryWork::Record { frontier, base, through, session_ids, .. } => {
                ("record", frontier.clone(), base.clone(), through.clone(), session_ids.clone())
            }
        };
        let (result, error, outcome) = match answer {
            HistoryAnswer::Selected { base: b, session_ids: ids } => {
                through = ids.last().cloned().unwrap_or_else(|| b.clone());
                base = b;
                session_ids = ids;
                let output = json!({"frontier": frontier, "base": base, "session_ids": session_ids, "through": through});
                if let Some(s) = self.steps.iter_mut().find(|s| s.id == id) {
                    s.output = Some(output);
                }
                ("selected", None, Outcome::completed())
            }
            HistoryAnswer::Moved => ("moved", None, Outcome::completed()),
            HistoryAnswer::Failed(reason) => ("failed", Some(reason.clone()), Outcome::failed(&reason)),
        };
        self.history.push(HistoryReceipt {
            step_id: id.clone(),
            operation: operation.into(),
            frontier,
            base,
            through,
            session_ids,
            result: result.into(),
            error,
            at_ms: now,
        });
        self.set(&id, outcome, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StepsTarget;

    fn program() -> Program {
        let steps = vec![
            json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook"}}),
            json!({"kind": "step_select_history", "id": "sel", "frontier": "learn", "limit": 10}),
            json!({"kind": "step_wait", "id": "w", "durationSeconds": 1}),
            json!({"kind": "step_record_history", "id": "rec", "selection": "sel", "requires": ["w"]}),
        ];
        let edges = vec![
            json!({"kind": "starts", "from": "hook", "to": "sel"}),
            json!({"kind": "then", "from": "sel", "to": "w"}),
            json!({"kind": "then", "from": "w", "to": "rec"}),
        ];
        Program::new(StepsTarget { program_sha256: "x".into(), steps, edges }, "hook".into())
    }

    #[test]
    fn a_selection_is_saved_then_its_record_moves_the_frontier_to_its_last_session() {
        let mut p = program();
        let event = json!({});
        p.advance(&event, false, 1);
        let work = p.history_work();
        assert!(matches!(&work[..], [HistoryWork::Select { limit: 10, .. }]), "{work:?}");
        let chosen = HistoryAnswer::Selected { base: "sess_0".into(), session_ids: vec!["sess_1".into(), "sess_2".into()] };
        assert!(p.history_answered(&work[0], chosen.clone(), 2));
        assert!(!p.history_answered(&work[0], chosen, 3), "saved once");
        assert_eq!(p.step("sel").unwrap().output.as_ref().unwrap()["through"], "sess_2");
        p.advance(&event, false, 3);
        p.set("w", Outcome::completed(), 4);
        p.advance(&event, false, 4);
        let work = p.history_work();
        assert_eq!(
            work,
            vec![HistoryWork::Record {
                step_id: "rec".into(),
                frontier: "learn".into(),
                base: "sess_0".into(),
                through: "sess_2".into(),
                session_ids: vec!["sess_1".into(), "sess_2".into()]
            }]
        );
        assert!(p.history_answered(&work[0], HistoryAnswer::Moved, 5));
        p.advance(&event, false, 5);
        assert_eq!(p.result.as_deref(), Some("succeeded"));
        assert_eq!(p.history.iter().map(|h| h.result.as_str()).collect::<Vec<_>>(), ["selected", "moved"]);
    }

    #[test]
    fn a_record_whose_required_step_did_not_complete_is_skipped() {
        let mut p = program();
        let event = json!({});
        p.advance(&event, false, 1);
        let work = p.history_work();
        p.history_answered(&work[0], HistoryAnswer::Selected { base: String::new(), session_ids: vec!["sess_1".into()] }, 2);
        p.advance(&event, false, 2);
        p.set("w", Outcome::denied(None), 3);
        p.advance(&event, false, 3);
        assert_eq!(p.step("rec").unwrap().outcome.as_ref().map(|o| o.kind.as_str()), Some("skipped"));
        assert!(p.history_work().is_empty(), "nothing moves");
    }
}
