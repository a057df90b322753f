//! An Automation continuing a Session (api.md §18.4). The scheduler mints
//! the id of its input when it records it — one per `(firing, step,
//! attempt)` — and asks with that id, so recovery and a replayed request
//! rejoin the first `user.message` and the Run it admitted, never a second
//! input. The event itself is an ordinary one: `caused_by` is just the
//! firing.
//!
//! A continuation never queues behind other work: it is accepted only into
//! a Session idle at `end_turn` (or never run) whose Budget admits a Run,
//! checked in the same commit that appends it; anything else is refused
//! with nothing written (`session_busy`, `session_terminated`).

use super::Log;
use crate::input::Input;
use crate::model::*;
use crate::store::View;
use checkfu_core::events::EventType;
use checkfu_core::id::{EventId, SessionId};
use checkfu_core::{Error, Result};
use serde_json::{Value, json};

/// What a continuation became: its event, the Run it admitted and
/// whether it was accepted earlier.
#[derive(Debug, Clone)]
pub struct Continued {
    pub event: Event,
    pub run_id: String,
    pub replayed: bool,
}

fn reason(e: &Error) -> Option<&str> {
    e.details.get("reason").and_then(Value::as_str)
}

impl Log {
    /// Appends `input` (a `user.message`) as `event_id`, once, only into
    /// an idle Session; see the module doc.
    pub async fn continue_session(&self, session_id: &str, mut input: Input, event_id: &str) -> Result<Continued> {
        let session_id = &SessionId::parse("id", session_id)?;
        let event_id = EventId::parse("continuation_event_id", event_id)?;
        if input.event_type != EventType::UserMessage {
            return Err(Error::invalid_field("type", "a continuation is a user.message"));
        }
        if let Some(c) = self.continued(session_id, &event_id).await? {
            return Ok(c);
        }
        input.event_id = Some(event_id.clone());
        let accepted = self
            .transact(session_id, |d| {
                if d.session.status == SessionStatus::Terminated {
                    return Err(Error::conflict("the Session is terminated and accepts no input").with_reason("session_terminated"));
                }
                let at_rest = matches!(d.session.stop_reason, None | Some(StopReason::EndTurn));
                if d.session.status != SessionStatus::Idle || !at_rest || d.admission_closed() {
                    return Err(Error::conflict("the Session is not idle at end_turn with a Run admissible: it is not continued")
                        .with_details(json!({"status": d.session.status.as_str(), "stop_reason": d.session.stop_reason}))
                        .with_reason("session_busy"));
                }
                d.apply(&input)?;
                Ok(d.admitted.clone())
            })
            .await;
        match accepted {
            Ok((run, _, events)) => {
                let event = events
                    .into_iter()
                    .find(|e| e.id == event_id)
                    .ok_or_else(|| Error::internal("appended event missing from the commit"))?;
                Ok(Continued { event, run_id: run.map(String::from).unwrap_or_default(), replayed: false })
            }
            // The same input raced in first: it is the answer.
            Err(e) if reason(&e) == Some("session_busy") => match self.continued(session_id, &event_id).await? {
                Some(c) => Ok(c),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// The continuation accepted as `event_id`, with its Run.
    async fn continued(&self, session_id: &SessionId, event_id: &EventId) -> Result<Option<Continued>> {
        let messages = self.store.list_events(session_id, &View::All, 0, i64::MAX, &[EventType::UserMessage.as_str().to_string()]).await?;
        let Some(event) = messages.into_iter().find(|e| &e.id == event_id) else { return Ok(None) };
        let runs =
            self.store.list_events(session_id, &View::All, event.seq, i64::MAX, &[EventType::RunCreated.as_str().to_string()]).await?;
        let run_id = runs
            .into_iter()
            .find(|r| r.caused_by.get("id").and_then(Value::as_str) == Some(event.id.as_str()))
            .and_then(|r| r.run_id.map(String::from))
            .unwrap_or_default();
        Ok(Some(Continued { event, run_id, replayed: true }))
    }
}

#[cfg(test)]
mod tests {
    use crate::model::StopReason;
    use crate::store::conformance::{SID, message, service};
    use checkfu_core::id::EventId;
    use checkfu_core::testing::tid;
    use serde_json::json;

    fn reason(e: &checkfu_core::Error) -> &str {
        e.details["reason"].as_str().unwrap_or_default()
    }

    async fn end_turn(svc: &crate::SessionsService) {
        svc.log
            .transact(&tid(SID), |d| {
                d.complete_run(StopReason::EndTurn, json!({"kind": "test", "id": "t"}));
                Ok(())
            })
            .await
            .expect("run ended");
    }

    #[tokio::test]
    async fn a_continuation_is_appended_once_and_answers_its_run() {
        let (svc, _store, _dir) = service().await;
        let id = EventId::mint();
        let input = message();
        let first = svc.log.continue_session(SID, input.clone(), &id).await.expect("accepted");
        assert!(!first.replayed);
        assert!(first.run_id.starts_with("run_"), "{}", first.run_id);
        assert_eq!(first.event.id, id);
        assert_eq!(first.event.caused_by, input.caused_by, "an ordinary event");
        // Asked again — while its Run runs, and after it ended — it is the first.
        let again = svc.log.continue_session(SID, message(), &id).await.expect("replayed");
        assert_eq!(
            (again.event.id.as_str(), again.run_id.as_str(), again.replayed),
            (first.event.id.as_str(), first.run_id.as_str(), true)
        );
        end_turn(&svc).await;
        let later = svc.log.continue_session(SID, message(), &id).await.expect("replayed");
        assert_eq!((later.event.id, later.run_id), (first.event.id.clone(), first.run_id.clone()));
        // Another id is another input, with a Run of its own.
        let next = svc.log.continue_session(SID, message(), &EventId::mint()).await.expect("accepted");
        assert_ne!(next.run_id, first.run_id);
        let (messages, _) = svc.log.list_events(SID, "", 0, 100, &["user.message".into()]).await.expect("list");
        assert_eq!(messages.len(), 2);
    }

    #[tokio::test]
    async fn a_busy_or_terminated_session_is_not_continued_and_nothing_is_written() {
        let (svc, _store, _dir) = service().await;
        svc.append_user_event(SID, message()).await.expect("a run starts");
        let id = EventId::mint();
        let busy = svc.log.continue_session(SID, message(), &id).await.expect_err("running");
        assert_eq!((busy.code, reason(&busy)), (checkfu_core::Code::Conflict, "session_busy"));
        svc.log
            .transact(&tid(SID), |d| {
                d.complete_run(StopReason::RetriesExhausted, json!({"kind": "test", "id": "t"}));
                Ok(())
            })
            .await
            .expect("run failed");
        let failed = svc.log.continue_session(SID, message(), &id).await.expect_err("not at end_turn");
        assert_eq!(reason(&failed), "session_busy");
        let (messages, _) = svc.log.list_events(SID, "", 0, 100, &["user.message".into()]).await.expect("list");
        assert_eq!(messages.len(), 1, "nothing appended");
        svc.archive(SID, "prin_01jx0000000000000000000009").await.expect("archived");
        let gone = svc.log.continue_session(SID, message(), &id).await.expect_err("terminated");
        assert_eq!(reason(&gone), "session_terminated");
        let bad = svc.log.continue_session(SID, message(), "fire_1/a/1").await.expect_err("not an event id");
        assert_eq!(bad.code, checkfu_core::Code::Invalid);
    }
}
