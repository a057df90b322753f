//! Delivery screening (api.md §18.8). A Session created with a delivery
//! screen (an Automation's child) holds every `agent.message` a Run sends,
//! in every thread, for one evaluation by the model gateway before anything
//! is stored: the append then writes `message.screened {content_sha256,
//! verdict, released, usage}` and, only when released, the message. So
//! withheld text never reaches the log, the outbox, a subscriber or a
//! replay; and since previews would show the text before its verdict, a
//! screened Session streams no message or thinking deltas at all.
//!
//! The call happens before the append's transaction (a model call must not
//! hold the Session's commit), so a Run whose lease is lost meanwhile
//! writes nothing — its screen's cost included — and its next holder's
//! append is screened again.

use crate::runs::{Checked, Runs, Screen};
use checkfu_core::delivery_screen::{DeliveryScreen, Verdict};
use checkfu_core::events::{EventType, text_of};
use checkfu_core::id::{EnvironmentId, SessionId};
use checkfu_core::{Error, Result};
use checkfu_proto::modelgateway::v1 as mg;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// How long one screening may take before it counts as the screen's failure.
const SCREEN_TIMEOUT: Duration = Duration::from_secs(60);

/// What the screen's call cost, as `message.screened.usage` shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cost {
    input_tokens: i64,
    output_tokens: i64,
    cost_micro_usd: i64,
}

impl Runs {
    /// The Session's screen. It is fixed when the Session is created, so a
    /// copy cached once answers for good.
    pub(crate) async fn screen_of(&self, session_id: &SessionId) -> Result<Screen> {
        if let Some(known) = self.screens.get(session_id) {
            return Ok(known);
        }
        // The Session was just committed here, usually: its snapshot
        // answers without a read.
        let s = match self.log.cached_state(session_id.as_str()) {
            Some((s, _)) => s,
            None => self.log.session(session_id.as_str()).await?,
        };
        let screen = s.delivery_screen.map(|d| (s.environment_id, Arc::new(d)));
        self.screens.insert(session_id.clone(), screen.clone());
        Ok(screen)
    }

    /// The events as a screened Session stores them: each `agent.message`
    /// replaced by its `message.screened`, followed by the message only if
    /// released. Events of an unscreened Session come back as they were.
    pub(crate) async fn screened(&self, session_id: &SessionId, events: Vec<Checked>) -> Result<Vec<Checked>> {
        if !events.iter().any(|(t, ..)| *t == EventType::AgentMessage) {
            return Ok(events);
        }
        let Some((environment_id, screen)) = self.screen_of(session_id).await? else { return Ok(events) };
        let mut out = Vec::with_capacity(events.len() + 1);
        for (t, payload, id) in events {
            if t != EventType::AgentMessage {
                out.push((t, payload, id));
                continue;
            }
            let text = text_of(&payload, "content");
            let (verdict, cost) = self.ask_screen(&environment_id, &screen, &text).await;
            let released = screen.releases(verdict);
            metrics::counter!("checkfu_messages_screened_total", "verdict" => verdict.as_str(), "released" => released.to_string())
                .increment(1);
            let usage =
                json!({"input_tokens": cost.input_tokens, "output_tokens": cost.output_tokens, "cost_micro_usd": cost.cost_micro_usd});
            let verdict = json!({"content_sha256": checkfu_core::sha256_hex(&text), "verdict": verdict.as_str(), "released": released,
                "usage": usage});
            out.push((EventType::MessageScreened, verdict, None));
            if released {
                out.push((t, payload, id));
            }
        }
        Ok(out)
    }

    /// One evaluation of `text`: the verdict, and what it cost. A gateway
    /// that fails, times out or breaks the reply's shape is the screen's
    /// `error` — never a guess at allow.
    async fn ask_screen(&self, environment_id: &EnvironmentId, screen: &DeliveryScreen, text: &str) -> (Verdict, Cost) {
        let task = mg::TaskRequest {
            routing_profile_id: screen.model_routing_profile_id.clone(),
            environment_id: environment_id.to_string(),
            task: Some(mg::task_request::Task::Screen(mg::ScreenTask {
                instructions: screen.instructions.clone(),
                message: text.to_string(),
                effort: screen.tier.clone().unwrap_or_default(),
            })),
        };
        let answered = match &self.models {
            Some(m) => match tokio::time::timeout(SCREEN_TIMEOUT, m.clone().run_task(task)).await {
                Ok(r) => r.map(|r| r.into_inner()).map_err(Error::from),
                Err(_) => Err(Error::unavailable("the delivery screen did not answer in time")),
            },
            None => Err(Error::unavailable("no model gateway is configured for delivery screening")),
        };
        match answered {
            Ok(mg::TaskResponse { answer: Some(mg::task_response::Answer::Screen(a)), usage, cost_micro_usd, .. }) => {
                let u = usage.unwrap_or_default();
                let cost = Cost { input_tokens: u.input_tokens, output_tokens: u.output_tokens, cost_micro_usd };
                (Verdict::of_reply(&a.reply_json), cost)
            }
            other => {
                let why = match other {
                    Err(e) => e.message,
                    Ok(_) => "the model gateway answered another task".into(),
                };
                tracing::warn!(error = %why, "a delivery screen could not answer");
                (Verdict::Error, Cost::default())
            }
        }
    }
}
