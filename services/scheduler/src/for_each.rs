//! `step_agent.forEach` (api.md §18.5): one child per item of a bound
//! array, each with its own Budget, started in item order with at most
//! `concurrency` unsettled at once. After a failure no further child
//! starts, and once the started ones settle the step fails
//! `for_each_item_failed`; when every child completed, the step's output
//! is their outputs in item order, whatever order they finished in.
//!
//! The items are kept with the program (a snapshot, like everything a
//! firing runs on), so recovery rejoins the same children in the same
//! order under the same limit.

use crate::model::{MAX_PROMPT_BYTES, render_vars};
use crate::program::{Admit, Item, Outcome, Program};
use serde_json::Value;

use crate::graph::document::MAX_ITEMS;

/// A `forEach` as the program reads it (validated when planned).
struct ForEach<'a> {
    /// The items' binding, as written.
    items: &'a Value,
    max_items: usize,
    concurrency: usize,
}

fn for_each(n: &Value) -> Option<ForEach<'_>> {
    let f = n.get("forEach").filter(|f| f.is_object())?;
    Some(ForEach {
        items: &f["items"],
        max_items: usize::try_from(f["maxItems"].as_i64().unwrap_or(MAX_ITEMS)).unwrap_or(0),
        concurrency: usize::try_from(f["concurrency"].as_i64().unwrap_or(1)).unwrap_or(1).max(1),
    })
}

/// A child's first message: the prompt with `{{item…}}`, `{{item_index}}`
/// and `{{event…}}` rendered; one that names none of them gets the item's
/// JSON appended, so each child knows its item.
fn item_prompt(prompt: &str, item: &Item, event: &Value) -> Result<String, &'static str> {
    let index = Value::from(item.index);
    let text = render_vars(prompt, &[("item", &item.value), ("item_index", &index), ("event", event)], &item.value).text;
    if text.len() > MAX_PROMPT_BYTES {
        return Err("rendered_prompt_too_large");
    }
    Ok(text)
}

impl Program {
    /// Whether step `i` fans out over items.
    pub(crate) fn fans_out(n: &Value) -> bool {
        for_each(n).is_some()
    }

    /// Reaches a `forEach` step: reads its items, refuses what is not an
    /// array or is too long (no child then), and starts the first ones.
    pub(crate) fn start_items(&mut self, i: usize, n: &Value, event: &Value, now: i64, admit: &mut Vec<Admit>) {
        let Some(f) = for_each(n) else { return };
        let id = self.steps[i].id.clone();
        let values = match self.read_bound(event, f.items) {
            Ok(Value::Array(values)) => values,
            Ok(_) => return self.set(&id, Outcome::failed("for_each_not_array"), now),
            Err(reason) => return self.set(&id, Outcome::failed(reason), now),
        };
        if values.len() > f.max_items {
            return self.set(&id, Outcome::failed("for_each_too_many_items"), now);
        }
        self.steps[i].items = values
            .into_iter()
            .enumerate()
            .map(|(index, value)| Item { index, value, child_session_id: None, outcome: None, output: None })
            .collect();
        self.set(&id, Outcome::of("running"), now);
        self.next_items(i, n, event, now, admit);
    }

    /// Admits the next items' children in item order while fewer than
    /// `concurrency` are unsettled and none failed; settles the step when
    /// every started child settled and nothing more will start.
    pub(crate) fn next_items(&mut self, i: usize, n: &Value, event: &Value, now: i64, admit: &mut Vec<Admit>) {
        let Some(f) = for_each(n) else { return };
        let id = self.steps[i].id.clone();
        let failed = self.steps[i].items.iter().any(|it| it.outcome.as_deref().is_some_and(|o| o != "completed"));
        if !failed {
            let prompt = n["prompt"].as_str().unwrap_or_default();
            loop {
                let items = &self.steps[i].items;
                let unsettled = items.iter().filter(|it| it.child_session_id.is_some() && it.outcome.is_none()).count();
                let Some(next) = items.iter().position(|it| it.child_session_id.is_none()) else { break };
                if unsettled >= f.concurrency {
                    break;
                }
                match item_prompt(prompt, &items[next], event) {
                    Ok(p) => {
                        // Marked started now; the service mints the id.
                        self.steps[i].items[next].child_session_id = Some(String::new());
                        admit.push(Admit { step_id: id.clone(), prompt: p, item: Some(next), outcome: None });
                    }
                    Err(reason) => {
                        self.steps[i].items[next].child_session_id = Some(String::new());
                        self.steps[i].items[next].outcome = Some(reason.into());
                        break;
                    }
                }
            }
        }
        let items = &self.steps[i].items;
        if items.iter().any(|it| it.child_session_id.is_some() && it.outcome.is_none()) {
            return;
        }
        if items.iter().any(|it| it.outcome.as_deref().is_some_and(|o| o != "completed")) {
            self.settle_attempt(&id, Outcome::failed("for_each_item_failed"), now);
        } else if items.iter().all(|it| it.outcome.is_some()) {
            let outputs: Vec<Value> = items.iter().map(|it| it.output.clone().unwrap_or(Value::Null)).collect();
            self.steps[i].output = Some(Value::Array(outputs));
            self.settle_attempt(&id, Outcome::completed(), now);
        }
    }

    /// A child refused at admission: its `forEach` item fails on its own
    /// (the step fails once its started siblings settled), any other
    /// running step fails now.
    pub fn child_refused(&mut self, step: &str, session_id: &str, reason: &str, now: i64) {
        if !self.item_settled(step, session_id, &Outcome::failed(reason), None)
            && self.step(step).and_then(|s| s.outcome.as_ref()).is_some_and(|o| o.kind == "running")
        {
            self.set(step, Outcome::failed(reason), now);
        }
    }

    /// An admission refused before its child was asked for (authority
    /// failed its re-check): as [`Program::child_refused`], for the item
    /// or step it would have started.
    pub fn admission_refused(&mut self, ad: &Admit, now: i64) {
        let item = ad.item.and_then(|i| self.steps.iter_mut().find(|s| s.id == ad.step_id).and_then(|s| s.items.get_mut(i)));
        match item {
            Some(it) => it.outcome = Some("child_admission_denied".into()),
            None => self.set(&ad.step_id, Outcome::failed("child_admission_denied"), now),
        }
    }

    /// A `forEach` child settled: its item takes the outcome (and output).
    /// `false` when the Session is none of the step's children.
    pub(crate) fn item_settled(&mut self, step: &str, session_id: &str, outcome: &Outcome, output: Option<Value>) -> bool {
        let Some(s) = self.steps.iter_mut().find(|s| s.id == step) else { return false };
        let Some(item) = s.items.iter_mut().find(|it| it.child_session_id.as_deref() == Some(session_id) && it.outcome.is_none()) else {
            return false;
        };
        item.outcome =
            Some(if outcome.kind == "completed" { "completed".into() } else { outcome.reason.clone().unwrap_or(outcome.kind.clone()) });
        item.output = output;
        true
    }
}
