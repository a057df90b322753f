//! SSE fan-out inside one gateway replica. However many clients follow a
//! Session here, the gateway holds one live subscription to the sessions
//! service for it and renders each event's frame once; every client's
//! stream reads the shared, rendered frames directly. Each client still gets exactly its own stream: its
//! history is read from the log (`ListEvents`) up to where the shared feed
//! takes over, and any gap (a lagging client, a feed that restarted) is
//! filled from the log again, so no event is missed or repeated.

use crate::views;
use bytes::{Bytes, BytesMut};
use checkfu_core::events::EventType;
use checkfu_proto::sessions::v1 as ss;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_proto::transport::Transport;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// One SSE frame, rendered to its wire bytes once for every client — or
/// several persisted events' frames with consecutive seqs, sent together.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The (last) event's seq; `None` for a preview.
    pub seq: Option<i64>,
    /// For previews: the type being previewed (clients opt in per type).
    pub preview_of: Option<Arc<str>>,
    /// `id: <seq>` (persisted events only), `event: <name>`, `data: <json>`.
    pub wire: Bytes,
    /// The child thread whose view it is in; `None`: the primary view
    /// (api.md §15.2).
    pub thread: Option<Arc<str>>,
}

fn render(seq: Option<i64>, event: &str, data: &str) -> Bytes {
    // JSON text has no raw newlines, so `data` is one line.
    let id = seq.map(|s| format!("id: {s}\n")).unwrap_or_default();
    Bytes::from(format!("{id}event: {event}\ndata: {data}\n\n"))
}

fn event_frame(e: &ss::Event) -> Frame {
    let data = serde_json::to_string(&views::event(e)).unwrap_or_default();
    // A cross-post is in the primary view, although it names its child.
    let thread = (!e.session_thread_id.is_empty() && e.origin_event_id.is_empty()).then(|| Arc::from(e.session_thread_id.as_str()));
    Frame { seq: Some(e.seq), preview_of: None, wire: render(Some(e.seq), &e.r#type, &data), thread }
}

fn delta_frame(d: &ss::Delta) -> Frame {
    let mut data = json!({"event_type": d.event_type, "preview_id": d.preview_id, "run_id": d.run_id});
    if d.kind == "event_delta" {
        data["delta"] = json!({"text": d.text});
    }
    let thread = (!d.session_thread_id.is_empty()).then(|| Arc::from(d.session_thread_id.as_str()));
    Frame { seq: None, preview_of: Some(d.event_type.as_str().into()), wire: render(None, &d.kind, &data.to_string()), thread }
}

/// Frames written in one go when several are ready.
const BATCH: usize = 64;

/// The response body of one SSE client: its frames — those already waiting
/// written together — and a `: ping` comment every `ping` (never first).
/// Ends with the frames, or when `shutdown` is cancelled (the node drains,
/// or the caller's access was revoked). `keep` lives as long as the body
/// (the stream's slot under its Principal's cap, say).
pub fn sse_body<K: Send + 'static>(
    frames: impl futures_util::Stream<Item = Frame> + Send + 'static,
    ping: std::time::Duration,
    shutdown: tokio_util::sync::CancellationToken,
    keep: K,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    use futures_util::{FutureExt, StreamExt};
    let ticks = tokio::time::interval_at(tokio::time::Instant::now() + ping, ping);
    let state = (Box::pin(frames), ticks, shutdown, keep);
    futures_util::stream::unfold(state, |(mut frames, mut ticks, shutdown, keep)| async move {
        let chunk = tokio::select! {
            f = frames.next() => {
                let first = f?;
                match frames.next().now_or_never() {
                    // Only one ready: its shared bytes as they are.
                    None | Some(None) => first.wire,
                    Some(Some(second)) => {
                        let mut buf = BytesMut::from(&first.wire[..]);
                        buf.extend_from_slice(&second.wire);
                        for _ in 2..BATCH {
                            match frames.next().now_or_never() {
                                Some(Some(more)) => buf.extend_from_slice(&more.wire),
                                _ => break,
                            }
                        }
                        buf.freeze()
                    }
                }
            }
            _ = ticks.tick() => Bytes::from_static(b": ping\n\n"),
            () = shutdown.cancelled() => return None,
        };
        Some((Ok(chunk), (frames, ticks, shutdown, keep)))
    })
}

/// Frames kept for a slow client before it falls back to the log.
const FEED_CAPACITY: usize = 4096;
/// History read per `ListEvents` call.
const PAGE: u32 = 1000;

/// What the shared feed carries: the frames that arrived together (one
/// commit's events, typically), so each client wakes once per batch.
type Batch = Arc<Frames>;

/// The frames of one batch, in order.
struct Frames {
    frames: Vec<Frame>,
    /// When the batch's persisted events have consecutive seqs: all their
    /// frames as one buffer, `(first seq, frame)`. A client that is exactly
    /// before the first and wants none of the batch's previews (most
    /// clients, most batches) sends this shared buffer as it is instead of
    /// walking and copying the frames one by one.
    run: Option<(i64, Frame)>,
}

impl Frames {
    fn new(frames: Vec<Frame>) -> Self {
        let mut persisted = frames.iter().filter_map(|f| f.seq.map(|s| (s, &f.wire)));
        // Only a batch of one view is shared whole.
        let one_view = frames.iter().all(|f| f.thread == frames[0].thread);
        let run = persisted.next().filter(|_| one_view).and_then(|(first, wire)| {
            let mut buf = BytesMut::from(&wire[..]);
            let mut last = first;
            for (seq, wire) in persisted {
                if seq != last + 1 {
                    return None;
                }
                buf.extend_from_slice(wire);
                last = seq;
            }
            Some((first, Frame { seq: Some(last), preview_of: None, wire: buf.freeze(), thread: frames[0].thread.clone() }))
        });
        Frames { frames, run }
    }

    /// The batch's persisted events as one frame, when that is exactly what
    /// a client at `cursor` sends next: they follow the cursor and none of
    /// the batch's previews is of a type in `delta_types`.
    fn whole_after(&self, cursor: i64, delta_types: &[String], view: Option<&str>) -> Option<Frame> {
        let (first, run) = self.run.as_ref()?;
        let wanted = |f: &Frame| f.preview_of.as_deref().is_some_and(|t| delta_types.iter().any(|d| d == t));
        (*first == cursor + 1 && run.thread.as_deref() == view && !self.frames.iter().any(wanted)).then(|| run.clone())
    }
}

/// The shared feeds of this gateway, one per followed Session.
pub struct Feeds {
    feeds: Mutex<HashMap<String, broadcast::Sender<Batch>>>,
    /// How often a feed without events checks whether anyone still follows
    /// it (the streams' ping interval: both are about quiet Sessions).
    followers_check: std::time::Duration,
}

impl Feeds {
    pub fn new(followers_check: std::time::Duration) -> Self {
        Feeds { feeds: Mutex::default(), followers_check }
    }

    /// Publishes how many Sessions this gateway follows live.
    fn count(map: &HashMap<String, broadcast::Sender<Batch>>) {
        metrics::gauge!("checkfu_gateway_live_feeds").set(map.len() as f64);
    }

    /// A receiver on the Session's shared feed, starting one if needed.
    async fn join(
        self: &Arc<Self>,
        sessions: &SessionsServiceClient<Transport>,
        session_id: &str,
    ) -> Result<broadcast::Receiver<Batch>, tonic::Status> {
        if let Some(tx) = self.feeds.lock().unwrap_or_else(|p| p.into_inner()).get(session_id) {
            return Ok(tx.subscribe());
        }
        // Live only: the feed starts after the current end of the log; each
        // client reads what came before from the log itself.
        let req = ss::SubscribeEventsRequest {
            session_id: session_id.into(),
            after_seq: 0,
            delta_types: EventType::PREVIEWED.iter().map(|t| t.to_string()).collect(),
            live_only: true,
        };
        let mut upstream = sessions.clone().subscribe_events(req).await?.into_inner();
        let (tx, rx) = broadcast::channel(FEED_CAPACITY);
        {
            let mut map = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(existing) = map.get(session_id) {
                // Another client started it meanwhile: use that one.
                return Ok(existing.subscribe());
            }
            map.insert(session_id.to_string(), tx.clone());
            Self::count(&map);
        }
        let feeds = Arc::clone(self);
        let sid = session_id.to_string();
        let every = self.followers_check;
        tokio::spawn(async move {
            use futures_util::{FutureExt, StreamExt};
            let frame = |item: ss::StreamItem| match item.item {
                Some(ss::stream_item::Item::Event(e)) => Some(event_frame(&e)),
                Some(ss::stream_item::Item::Delta(d)) => Some(delta_frame(&d)),
                None => None,
            };
            // Leaves the map, if this feed is still the Session's. `unless_followed`:
            // only when nobody follows it, decided under the map's lock,
            // where clients join, so a client joining right now either gets
            // this feed alive or starts a new one (and reads from the log
            // whatever this feed had no receiver for).
            let leave = |unless_followed: bool| {
                let mut map = feeds.feeds.lock().unwrap_or_else(|p| p.into_inner());
                if unless_followed && tx.receiver_count() > 0 {
                    return false;
                }
                if map.get(&sid).is_some_and(|t| t.same_channel(&tx)) {
                    map.remove(&sid);
                    Self::count(&map);
                }
                true
            };
            let mut idle_check = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                let first = tokio::select! {
                    item = upstream.next() => match item {
                        Some(Ok(first)) => first,
                        // Upstream ended: the clients end too and resume
                        // with Last-Event-ID.
                        _ => {
                            leave(false);
                            return;
                        }
                    },
                    // A quiet Session's feed still ends once nobody follows it.
                    _ = idle_check.tick() => {
                        if leave(true) {
                            return;
                        }
                        continue;
                    }
                };
                // Everything already arrived goes out as one batch.
                let mut batch: Vec<Frame> = frame(first).into_iter().collect();
                while batch.len() < BATCH {
                    match upstream.next().now_or_never() {
                        Some(Some(Ok(more))) => batch.extend(frame(more)),
                        _ => break,
                    }
                }
                if batch.is_empty() {
                    continue;
                }
                // Nobody follows this Session here any more.
                if tx.send(Arc::new(Frames::new(batch))).is_err() && leave(true) {
                    return;
                }
            }
        });
        Ok(rx)
    }

    /// One client's stream: every persisted event after `after_seq` in seq
    /// order exactly once, then live; previews of `delta_types` interleaved.
    /// It reads the shared feed directly (no task or queue per client).
    pub async fn follow(
        self: &Arc<Self>,
        sessions: SessionsServiceClient<Transport>,
        session_id: String,
        view: Option<String>,
        after_seq: i64,
        delta_types: Vec<String>,
    ) -> Result<impl futures_util::Stream<Item = Frame> + Send + 'static, tonic::Status> {
        let rx = self.join(&sessions, &session_id).await?;
        let state = Follower {
            sessions,
            session_id,
            view,
            cursor: after_seq.max(0),
            delta_types,
            rx,
            backlog: VecDeque::new(),
            live: VecDeque::new(),
            caught_up: false,
        };
        Ok(futures_util::stream::unfold(state, |mut f| async move { f.next().await.map(|frame| (frame, f)) }))
    }
}

/// One client's position in a Session's log and its view of the feed.
struct Follower {
    sessions: SessionsServiceClient<Transport>,
    session_id: String,
    /// The child thread whose view it streams; `None`: the primary view.
    /// Other views' events only move the cursor.
    view: Option<String>,
    /// The last seq sent.
    cursor: i64,
    delta_types: Vec<String>,
    rx: broadcast::Receiver<Batch>,
    /// Log events read but not yet sent.
    backlog: VecDeque<Frame>,
    /// The rest of the feed batch being sent.
    live: VecDeque<Frame>,
    /// The log has been read up to where the feed takes over.
    caught_up: bool,
}

impl Follower {
    /// The next frame; `None` ends the stream (the client resumes with
    /// Last-Event-ID).
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.backlog.pop_front() {
                self.cursor = f.seq.unwrap_or(self.cursor);
                if self.mine(&f) {
                    return Some(f);
                }
                continue;
            }
            if !self.caught_up {
                self.caught_up = self.read_log().await?;
                continue;
            }
            let f = match self.live.pop_front() {
                Some(f) => f,
                None => match self.rx.recv().await {
                    Ok(batch) => {
                        if let Some(run) = batch.whole_after(self.cursor, &self.delta_types, self.view.as_deref()) {
                            self.cursor = run.seq.unwrap_or(self.cursor);
                            return Some(run);
                        }
                        self.live.extend(batch.frames.iter().cloned());
                        continue;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.caught_up = false;
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            };
            match f.seq {
                Some(seq) if seq <= self.cursor => {}
                Some(seq) if seq == self.cursor + 1 => {
                    self.cursor = seq;
                    if self.mine(&f) {
                        return Some(f);
                    }
                }
                // A gap: fill it from the log (the rest of the batch is
                // then behind the cursor or fills in after it).
                Some(_) => {
                    self.live.push_front(f);
                    self.caught_up = false;
                }
                None => {
                    if self.mine(&f) && f.preview_of.as_deref().is_some_and(|t| self.delta_types.iter().any(|d| d == t)) {
                        return Some(f);
                    }
                }
            }
        }
    }

    /// Whether a frame is in this follower's view.
    fn mine(&self, f: &Frame) -> bool {
        f.thread.as_deref() == self.view.as_deref()
    }

    /// Reads one page of the log after the cursor into the backlog (the
    /// whole log: other views' events move the cursor too); returns
    /// whether the log is exhausted (`None` when it cannot be read).
    async fn read_log(&mut self) -> Option<bool> {
        let after = self.backlog.back().and_then(|f| f.seq).unwrap_or(self.cursor);
        let req =
            ss::ListEventsRequest { session_id: self.session_id.clone(), after_seq: after, limit: PAGE, types: vec![], view: "all".into() };
        let page = self.sessions.clone().list_events(req).await.ok()?.into_inner();
        self.backlog.extend(page.data.iter().map(event_frame));
        Some(!page.has_more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn persisted(seq: i64) -> Frame {
        Frame { seq: Some(seq), preview_of: None, wire: render(Some(seq), "agent.message", "{}"), thread: None }
    }

    fn preview(of: &str) -> Frame {
        Frame { seq: None, preview_of: Some(of.into()), wire: render(None, "event_delta", "{}"), thread: None }
    }

    #[test]
    fn a_batch_of_consecutive_events_is_one_shared_frame_for_a_client_right_behind_it() {
        let batch = Frames::new(vec![persisted(5), preview("agent.thinking"), persisted(6), persisted(7)]);
        let run = batch.whole_after(4, &[], None).expect("a client at seq 4 takes 5..=7 at once");
        assert_eq!(run.seq, Some(7));
        let expected: Vec<u8> = [5, 6, 7].iter().flat_map(|s| persisted(*s).wire.to_vec()).collect();
        assert_eq!(&run.wire[..], &expected[..], "the persisted frames, in order, without the preview");
        assert!(batch.whole_after(3, &[], None).is_none(), "a client behind the batch fills its gap first");
        assert!(batch.whole_after(5, &[], None).is_none(), "a client inside the batch takes frames one by one");
        assert!(
            batch.whole_after(4, &["agent.thinking".into()], None).is_none(),
            "a client that asked for the batch's preview type gets it interleaved"
        );
        assert!(batch.whole_after(4, &["agent.message".into()], None).is_some(), "previews of other types do not matter");
    }

    #[test]
    fn a_batch_with_a_gap_or_only_previews_has_no_shared_frame() {
        assert!(Frames::new(vec![persisted(5), persisted(7)]).run.is_none());
        assert!(Frames::new(vec![preview("agent.message")]).run.is_none());
    }
}
