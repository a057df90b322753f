//! Live fan-out of a Session's committed events and ephemeral previews to
//! subscribers. Within a process it is a broadcast channel per Session;
//! across replicas each item also goes out on the shared fan-out (Redis pub/sub
//! in production), so a subscriber on any replica sees every Session live,
//! whichever replica committed it. Subscribers never rely on it for
//! completeness: they replay from the store and use the hub only to learn
//! sooner, filling any gap (or lag) from the store again.

use crate::model::Event;
use checkfu_core::id::{EventId, RunId, SessionId};
use checkfu_ephemeral::Fanout;
use checkfu_ephemeral::outage::FailureLog;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, mpsc};

/// An ephemeral preview of an event being produced; never persisted.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    /// `event_start` or `event_delta`.
    pub kind: &'static str,
    pub event_type: String,
    pub preview_id: String,
    pub text: String,
    pub run_id: String,
    /// The child thread previewing, empty for the primary.
    pub thread_id: String,
}

#[derive(Debug, Clone)]
pub enum Item {
    Event(Event),
    Delta(Delta),
}

const CHANNEL_CAPACITY: usize = 1024;

/// Channels on the shared fan-out: `checkfu:live:<session id>`.
const PREFIX: &str = "checkfu:live:";

#[derive(Default)]
pub struct Hub {
    channels: Mutex<HashMap<String, broadcast::Sender<Item>>>,
    /// Items for other replicas, sent in order by one task.
    outgoing: Option<Outgoing>,
}

/// The queue to the fan-out publisher, and this hub's origin tag.
type Outgoing = (mpsc::UnboundedSender<(String, Vec<u8>)>, String);

fn encode(origin: &str, item: &Item) -> Vec<u8> {
    let body = match item {
        Item::Event(e) => json!({"o": origin, "e": {
            "id": e.id, "session_id": e.session_id, "seq": e.seq, "type": e.event_type, "run_id": e.run_id,
            "thread_id": e.thread_id, "origin_event_id": e.origin_event_id, "authored_by": e.authored_by, "caused_by": e.caused_by, "payload": e.payload, "created_ms": e.created_ms,
        }}),
        Item::Delta(d) => json!({"o": origin, "d": {
            "kind": d.kind, "event_type": d.event_type, "preview_id": d.preview_id, "text": d.text, "run_id": d.run_id, "thread_id": d.thread_id,
        }}),
    };
    body.to_string().into_bytes()
}

/// An item from another replica; `None` for this replica's own or a
/// message that does not parse.
fn decode(origin: &str, bytes: &[u8]) -> Option<Item> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    if v["o"] == origin {
        return None;
    }
    let s = |x: &Value, k: &str| x.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(e) = v.get("e") {
        return Some(Item::Event(Event {
            id: EventId::parse("id", &s(e, "id")?).ok()?,
            session_id: SessionId::parse("session_id", &s(e, "session_id")?).ok()?,
            seq: e.get("seq")?.as_i64()?,
            event_type: s(e, "type")?,
            run_id: s(e, "run_id").and_then(|r| RunId::parse("run_id", &r).ok()),
            thread_id: s(e, "thread_id"),
            origin_event_id: s(e, "origin_event_id").and_then(|r| EventId::parse("origin_event_id", &r).ok()),
            authored_by: e.get("authored_by").cloned().unwrap_or(Value::Null),
            caused_by: e.get("caused_by").cloned().unwrap_or(Value::Null),
            payload: e.get("payload").cloned().unwrap_or(Value::Null),
            created_ms: e.get("created_ms")?.as_i64()?,
        }));
    }
    let d = v.get("d")?;
    let kind = match d.get("kind")?.as_str()? {
        "event_start" => "event_start",
        _ => "event_delta",
    };
    Some(Item::Delta(Delta {
        kind,
        event_type: s(d, "event_type")?,
        preview_id: s(d, "preview_id")?,
        text: s(d, "text")?,
        run_id: s(d, "run_id")?,
        thread_id: s(d, "thread_id").unwrap_or_default(),
    }))
}

impl Hub {
    /// A hub that also shares items with the other replicas through
    /// `fanout`, and receives theirs.
    pub async fn shared(fanout: Arc<dyn Fanout>) -> checkfu_core::Result<Arc<Hub>> {
        let origin = checkfu_core::id::new_id("hub");
        let mut incoming = fanout.subscribe_prefix(PREFIX).await?;
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, Vec<u8>)>();
        let hub = Arc::new(Hub { channels: Mutex::default(), outgoing: Some((tx, origin.clone())) });
        let out = fanout.clone();
        tokio::spawn(async move {
            let failures = FailureLog::new("live fan-out: publishing failed; subscribers on other replicas catch up from the store");
            while let Some((channel, bytes)) = rx.recv().await {
                match out.publish(&channel, bytes).await {
                    Ok(()) => failures.recovered(),
                    Err(e) => {
                        failures.failed(&e);
                    }
                }
            }
        });
        let weak = Arc::downgrade(&hub);
        tokio::spawn(async move {
            while let Some((channel, bytes)) = incoming.recv().await {
                let Some(hub) = weak.upgrade() else { return };
                if let (Some(session_id), Some(item)) = (channel.strip_prefix(PREFIX), decode(&origin, &bytes)) {
                    hub.deliver(session_id, item);
                }
            }
        });
        Ok(hub)
    }

    pub fn subscribe(&self, session_id: &str) -> broadcast::Receiver<Item> {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(session_id.to_string()).or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0).subscribe()
    }

    pub fn publish(&self, session_id: &str, item: Item) {
        if let Some((tx, origin)) = &self.outgoing {
            let _ = tx.send((format!("{PREFIX}{session_id}"), encode(origin, &item)));
        }
        self.deliver(session_id, item);
    }

    /// To this process's subscribers of the Session.
    fn deliver(&self, session_id: &str, item: Item) {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = map.get(session_id) {
            if tx.receiver_count() == 0 {
                map.remove(session_id);
            } else {
                let _ = tx.send(item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_cross_replicas_intact_and_skip_their_origin() {
        let e = Event {
            id: EventId::mint(),
            session_id: SessionId::mint(),
            seq: 7,
            event_type: "agent.message".into(),
            run_id: Some(RunId::mint()),
            thread_id: None,
            origin_event_id: None,
            authored_by: json!({"kind": "agent", "id": "agt_1"}),
            caused_by: json!({"kind": "run", "id": "run_1"}),
            payload: json!({"content": [{"type": "text", "text": "hi"}]}),
            created_ms: 5,
        };
        let bytes = encode("hub_a", &Item::Event(e.clone()));
        assert!(decode("hub_a", &bytes).is_none(), "a replica ignores its own items");
        match decode("hub_b", &bytes) {
            Some(Item::Event(got)) => assert_eq!(got, e),
            other => panic!("{other:?}"),
        }
        let mut forged = serde_json::from_slice::<Value>(&bytes).expect("json");
        forged["e"]["session_id"] = json!("agt_01h0000000000000000000000");
        let forged = serde_json::to_vec(&forged).expect("json");
        assert!(decode("hub_b", &forged).is_none(), "an item whose ids are not of their kind is dropped");
        let d = Delta {
            kind: "event_delta",
            event_type: "agent.message".into(),
            preview_id: "prv_1".into(),
            text: "h".into(),
            run_id: "run_1".into(),
            thread_id: "sthr_1".into(),
        };
        match decode("hub_b", &encode("hub_a", &Item::Delta(d.clone()))) {
            Some(Item::Delta(got)) => assert_eq!(got, d),
            other => panic!("{other:?}"),
        }
    }

    /// A live-only follower sends every event committed after its feed
    /// opened, also one committed before the follower starts: the gateway
    /// reads the log only up to where the feed begins, so an event dropped
    /// here is one its clients never see (a stream that stopped short of a
    /// Session's end).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_live_only_feed_sends_events_committed_before_it_starts_following() {
        use crate::store::conformance::{SID, service};
        let (svc, _store, _dir) = service().await;
        let before = svc.log.session(SID).await.expect("session").last_seq;
        let feed = svc.log.open_feed(SID).await.expect("open");
        let who = checkfu_core::id::new_id("prin");
        let content = serde_json::json!({"content": [{"type": "text", "text": "hi"}]});
        let msg =
            crate::input::Input::parse("user.message", content, &who, serde_json::json!({"kind": "principal", "id": who})).expect("input");
        svc.append_user_event(SID, msg).await.expect("append");
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let follower = svc.clone();
        tokio::spawn(async move { follower.log.follow(feed, None, vec![], tx).await });
        match tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await {
            Ok(Some(Item::Event(e))) => assert_eq!(e.seq, before + 1, "the first event after the feed opened"),
            other => panic!("the event committed before following was lost: {other:?}"),
        }
    }

    /// Previews are never replayed: a feed that answered its opener must
    /// already receive what is published next.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_feed_receives_previews_published_as_soon_as_it_is_open() {
        use crate::store::conformance::{SID, service};
        let (svc, _store, _dir) = service().await;
        let feed = svc.log.open_feed(SID).await.expect("open");
        let delta = Delta {
            kind: "event_delta",
            event_type: "agent.message".into(),
            preview_id: "prv_1".into(),
            text: "h".into(),
            run_id: "run_1".into(),
            thread_id: String::new(),
        };
        svc.log.hub.publish(SID, Item::Delta(delta.clone()));
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let follower = svc.clone();
        tokio::spawn(async move { follower.log.follow(feed, None, vec!["agent.message".into()], tx).await });
        match tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await {
            Ok(Some(Item::Delta(got))) => assert_eq!(got, delta),
            other => panic!("the preview was lost: {other:?}"),
        }
    }
}
