//! One Run: keep the lease, re-read the log, ask the model for a turn while
//! one is owed, write what it produced, settle. Boundaries between steps are
//! where steering messages and interrupts take effect.

use crate::Runner;
use crate::transcript::Transcript;
use checkfu_core::events::EventType as E;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::runner::v1 as pb;
use checkfu_proto::sessions::v1::StopReasonType;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Model calls that fail as unavailable are tried this many times in all.
const MODEL_ATTEMPTS: usize = 3;

/// How long a model call's start span waits for the call's result before it
/// is written on its own (see `generate_once`).
const START_SPAN_GRACE: Duration = Duration::from_millis(20);

/// Where a model call's start span stands once the call returned.
enum Start {
    None,
    /// In the log at this seq, with this payload.
    Written(i64, String),
    /// Not written yet: it goes first in what the turn appends next.
    Pending(String),
}

/// Why a step ended the Run early.
enum Stop {
    /// The lease is gone; another runner owns the Run now.
    Lost,
}

impl From<tonic::Status> for Stop {
    /// Any failed runner-protocol call abandons the Run: its lease expires
    /// and a runner resumes it from the log, so nothing is half-written.
    fn from(s: tonic::Status) -> Self {
        let e = checkfu_core::Error::from(s);
        if e.code != checkfu_core::Code::PreconditionFailed {
            tracing::warn!(error = %e, "runner protocol call failed; leaving the run to its lease");
        }
        Stop::Lost
    }
}

/// How long one read waits for a work item's holder before asking again.
const EXTERNAL_WAIT_MS: u32 = 15_000;

/// Key under which a turn's `agent.message` carries the id its preview used
/// until it goes on the wire as `NewEvent.id` (see [`new_event`]).
const PROPOSED_ID: &str = "__event_id";

/// An event for the sessions service; a proposed id moves out of the
/// payload into `id`.
fn new_event(t: E, payload: String) -> pb::NewEvent {
    if t == E::AgentMessage
        && payload.contains(PROPOSED_ID)
        && let Ok(Value::Object(mut p)) = serde_json::from_str::<Value>(&payload)
        && let Some(Value::String(id)) = p.remove(PROPOSED_ID)
    {
        return pb::NewEvent { r#type: t.as_str().into(), payload_json: Value::Object(p).to_string(), id };
    }
    pb::NewEvent { r#type: t.as_str().into(), payload_json: payload, id: String::new() }
}

impl Runner {
    pub(crate) async fn execute(&self, work: pb::WorkItem, stop: CancellationToken) {
        let Some(lease) = work.lease.clone() else { return };
        let lost = stop.child_token();
        let beat = tokio::spawn(heartbeat(self.clone(), lease.clone(), lost.clone()));
        // The Run continues the trace of the request that admitted it.
        let span =
            tracing::info_span!("run", otel.name = "run", checkfu.role = "runner", run_id = %work.run_id, session_id = %work.session_id);
        checkfu_telemetry::adopt_traceparent(&span, &work.traceparent);
        let outcome = tokio::select! {
            r = self.run_in_sandbox(&work, &lease).instrument(span.clone()) => r,
            () = lost.cancelled() => Err(Stop::Lost),
        };
        beat.abort();
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).remove(&work.run_id);
        let Ok((cursor, events, reason)) = outcome else {
            if stop.is_cancelled() {
                // Stopping: hand the Run back so another runner resumes it
                // now, not when the lease lapses.
                if let Err(status) = self.runs.clone().release(lease).await {
                    tracing::warn!(%status, run_id = %work.run_id, "handing the run back failed; it resumes when its lease lapses");
                }
            }
            return;
        };
        let events = events.into_iter().map(|(t, p)| new_event(t, p)).collect();
        let stop_reason = StopReasonType::from_api_name(reason.get("type").and_then(Value::as_str).unwrap_or_default()) as i32;
        // The JSON text too, for a 0.1.0 sessions service.
        #[allow(deprecated)]
        let req =
            pb::CompleteRequest { lease: Some(lease), stop_reason, stop_reason_json: reason.to_string(), last_seen_seq: cursor, events };
        let r = self.runs.clone().complete(req).instrument(span).await;
        if let Err(status) = r {
            tracing::warn!(%status, run_id = %work.run_id, "completing the run failed; its lease will expire and it will be resumed");
        }
    }

    async fn read_all(&self, lease: &pb::LeaseRef, t: &mut Transcript, start_seq: i64) -> Result<(), Stop> {
        loop {
            let req = pb::ReadEventsRequest { lease: Some(lease.clone()), after_seq: t.cursor, limit: 1000, wait_ms: 0 };
            let batch = self.runs.clone().read_events(req).await?.into_inner().data;
            let n = batch.len();
            t.absorb(&batch, start_seq);
            if n < 1000 {
                return Ok(());
            }
        }
    }

    /// Restores the Session's workspace, runs the turn, then captures what
    /// it left (`sync.rs`) before the Run settles; an external_tools
    /// Session has no workspace here.
    ///
    /// A Session's threads running here at once share its workspace: only
    /// the first to start restores it, and only the last to settle captures
    /// it — one checkpoint once every thread here is done.
    async fn run_in_sandbox(&self, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<Settle, Stop> {
        if work.external_tools {
            // Its workspace is on the worker's machine (api.md §17.13).
            return self.drive(work, lease).await;
        }
        let here = InFlight::enter(&self.in_flight, &work.session_id);
        if here.first
            && let Err(status) = self.restore(work, lease).await
        {
            tracing::warn!(%status, session_id = %work.session_id, "restoring the workspace failed; the turn runs with what is here");
        }
        let settled = self.drive(work, lease).await;
        let last = here.leave();
        let settled = settled?;
        if last && let Err(status) = self.capture(work, lease).await {
            tracing::warn!(%status, session_id = %work.session_id, "capturing the workspace failed; the Run settles without it");
        }
        Ok(settled)
    }

    /// Returns the last log position read and the final turn's events,
    /// which the completion appends in the same commit that settles the Run.
    async fn drive(&self, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<Settle, Stop> {
        // Each thread has its own context (api.md §15).
        let key = if work.session_thread_id.is_empty() { &work.session_id } else { &work.session_thread_id };
        let mut t = self.transcripts.take(key);
        let outcome = self.drive_from(work, lease, &mut t).await;
        if outcome.is_ok() {
            self.transcripts.put(key, t);
        }
        outcome
    }

    async fn drive_from(&self, work: &pb::WorkItem, lease: &pb::LeaseRef, t: &mut Transcript) -> Result<Settle, Stop> {
        let mut caught_up = t.absorb_tail(&work.tail, work.start_seq);
        let mut budget_reached = work.budget_reached;
        loop {
            if !caught_up {
                self.read_all(lease, t, work.start_seq).await?;
            }
            if t.interrupted {
                return Ok((t.cursor, vec![], json!({"type": "end_turn"})));
            }
            if !t.outstanding.is_empty() {
                // Calls from before this Run: answer them first.
                let decided = Self::resume_outstanding(work, &t.outstanding);
                match self.act(work, lease, t, decided, vec![], None).await? {
                    Turn::Waiting(events) => return Ok((t.cursor, events, json!({"type": "requires_action"}))),
                    Turn::CalledTools { folded, budget_reached: b } => (caught_up, budget_reached) = (folded, b),
                    Turn::Final(_) | Turn::Exhausted => {}
                }
                continue;
            }
            if !t.needs_turn() {
                return Ok((t.cursor, vec![], json!({"type": "end_turn"})));
            }
            if budget_reached {
                // Admission is closed: stop before the next model call; the
                // queued work restarts when the Budget re-opens.
                return Ok((t.cursor, vec![], json!({"type": "budget_reached"})));
            }
            // A turn that called no tool ends the Run without re-reading:
            // completion admits a new Run for any message after `t.cursor`,
            // and an unseen interrupt would end the turn the same way.
            match self.turn(work, lease, t).await? {
                Turn::Final(events) => return Ok((t.cursor, events, json!({"type": "end_turn"}))),
                Turn::Waiting(events) => return Ok((t.cursor, events, json!({"type": "requires_action"}))),
                Turn::Exhausted => return Ok((t.cursor, vec![], json!({"type": "retries_exhausted"}))),
                Turn::CalledTools { folded, budget_reached: b } => (caught_up, budget_reached) = (folded, b),
            }
        }
    }

    /// Appends events; returns the seqs they got.
    async fn append(&self, lease: &pb::LeaseRef, events: Vec<(E, String)>) -> Result<Vec<i64>, Stop> {
        Ok(self.append_checked(lease, events).await?.seqs)
    }

    /// Appends events; the answer also says whether the Budget now stops
    /// admission.
    async fn append_checked(&self, lease: &pb::LeaseRef, events: Vec<(E, String)>) -> Result<pb::AppendEventsResponse, Stop> {
        let events = events.into_iter().map(|(t, p)| new_event(t, p)).collect();
        Ok(self.runs.clone().append_events(pb::AppendEventsRequest { lease: Some(lease.clone()), events }).await?.into_inner())
    }

    /// One model call and what it produced.
    async fn turn(&self, work: &pb::WorkItem, lease: &pb::LeaseRef, t: &mut Transcript) -> Result<Turn, Stop> {
        let declared = crate::tools::declared(work);
        let mut tools = declared
            .iter()
            .filter_map(|d| {
                let name = d.get("name").and_then(Value::as_str)?;
                // A builtin is described as the plane running it reads it.
                let builtin = crate::tools::is_builtin(Some(d)).then(|| crate::specs::builtin(name, work.external_tools)).flatten();
                let (description, schema) = match builtin {
                    Some((d, schema)) => (d.to_string(), schema.to_string()),
                    None => (
                        d.get("description").and_then(Value::as_str).unwrap_or_default().to_string(),
                        d.get("input_schema").map(Value::to_string).unwrap_or_else(|| "{}".into()),
                    ),
                };
                Some(mg::ToolSpec { name: name.into(), description, input_schema_json: schema })
            })
            .collect::<Vec<_>>();
        tools.extend(self.offered_tool_specs(work, &declared).await);
        // Messages a finished call did not see go after its output now.
        t.flush_deferred();
        let req = mg::GenerateRequest {
            routing_profile_id: work.routing_profile_id.clone(),
            system: work.instructions.clone(),
            messages: self.with_files(work, t.messages.clone()).await,
            tools,
            run_id: work.run_id.clone(),
        };
        // The call's context is the log up to here; its start span says so,
        // so whatever arrives from now on is known to be after it.
        let context_seq = t.cursor;
        if let Some(hold) = &self.cfg.hold_before_model {
            hold.wait().await;
        }
        let mut attempt = 0;
        // The answer's agent.message takes the id its preview carries.
        let mut message_id = checkfu_core::id::EventId::mint().to_string();
        let (completed, started) = loop {
            attempt += 1;
            if attempt > 1 {
                message_id = checkfu_core::id::EventId::mint().to_string();
            }
            match self.generate_once(&self.token(work), lease, req.clone(), context_seq, &message_id).await {
                Ok(c) => break c,
                Err(GenErr::Stop(s)) => return Err(s),
                Err(GenErr::Model(e)) => {
                    let retry = e.code == checkfu_core::Code::Unavailable && attempt < MODEL_ATTEMPTS;
                    let status = if retry {
                        "retrying"
                    } else if e.code == checkfu_core::Code::Unavailable {
                        "exhausted"
                    } else {
                        "terminal"
                    };
                    let err = json!({"error": {"type": e.code.as_type(), "message": e.message, "retry_status": status}});
                    self.append(
                        lease,
                        vec![
                            (
                                E::SpanModelRequestEnd,
                                json!({"model_usage": {"input_tokens": 0, "output_tokens": 0}, "cost_micro_usd": 0, "is_error": true})
                                    .to_string(),
                            ),
                            (E::SessionError, err.to_string()),
                        ],
                    )
                    .await?;
                    if !retry {
                        return Ok(Turn::Exhausted);
                    }
                    tokio::time::sleep(Duration::from_millis(200 * attempt as u64)).await;
                }
            }
        };
        let usage = completed.usage.unwrap_or_default();
        let (mut events, started) = match started {
            Start::Pending(p) => (vec![(E::SpanModelRequestStart, p)], None),
            Start::Written(seq, p) => (vec![], Some((seq, p))),
            Start::None => (vec![], None),
        };
        let mut text = String::new();
        let mut uses = vec![];
        for b in completed.content {
            match b.block {
                Some(mg::content_block::Block::Text(s)) => text.push_str(&s),
                Some(mg::content_block::Block::ToolUse(u)) => uses.push(u),
                _ => {}
            }
        }
        // The message is the request's output, so it sits inside its span
        // (as CMA clients read it too, api.md §17.8).
        if !text.is_empty() {
            let mut payload: Value = json!({"content": [{"type": "text", "text": text}]});
            payload[PROPOSED_ID] = json!(message_id);
            events.push((E::AgentMessage, payload.to_string()));
        }
        events.push((
            E::SpanModelRequestEnd,
            json!({"model_usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}, "cost_micro_usd": completed.cost_micro_usd, "is_error": false}).to_string(),
        ));
        if uses.is_empty() {
            return Ok(Turn::Final(events));
        }
        // Decide every call first and record the calls (with how governance
        // decided them) before anything runs; then answer each.
        let decided = match self.decide(work, uses).await {
            Ok(d) => d,
            Err(status) => {
                tracing::warn!(%status, "governance could not decide the tool calls; leaving the run to its lease");
                return Err(Stop::Lost);
            }
        };
        self.act(work, lease, t, decided, events, started).await
    }

    /// Records decided calls and answers them. Calls the Session must wait
    /// on settle the Run (with everything else answered) in the completing
    /// commit; otherwise the calls and answers are appended and the loop
    /// goes on. `events` precede the calls (the model turn's own output).
    async fn act(
        &self,
        work: &pb::WorkItem,
        lease: &pb::LeaseRef,
        t: &mut Transcript,
        decided: Vec<crate::tools::Decided>,
        mut events: Vec<(E, String)>,
        started: Option<(i64, String)>,
    ) -> Result<Turn, Stop> {
        for d in &decided {
            events.extend(Self::call_events(d));
        }
        if decided.iter().any(crate::tools::Decided::waits) {
            for d in &decided {
                events.extend(self.answer(work, d).await);
            }
            return Ok(Turn::Waiting(events));
        }
        let mut seqs = if events.is_empty() { vec![] } else { self.append(lease, events.clone()).await? };
        let mut answers = Vec::with_capacity(decided.len());
        for d in &decided {
            answers.extend(self.answer(work, d).await);
        }
        let appended =
            if answers.is_empty() { pb::AppendEventsResponse::default() } else { self.append_checked(lease, answers.clone()).await? };
        seqs.extend(appended.seqs);
        let (mut own_seqs, mut own): (Vec<i64>, Vec<(E, String)>) = match started {
            Some((seq, p)) => (vec![seq], vec![(E::SpanModelRequestStart, p)]),
            None => (vec![], vec![]),
        };
        own_seqs.extend(seqs);
        own.extend(events);
        own.extend(answers);
        let folded = t.absorb_own(&own_seqs, &own, work.start_seq);
        let external: Vec<String> = decided.iter().filter(|d| d.runs_externally()).map(|d| d.call.id.clone()).collect();
        if !external.is_empty() {
            self.await_external(work, lease, t, &external).await?;
            return Ok(Turn::CalledTools { folded: true, budget_reached: appended.budget_reached });
        }
        Ok(Turn::CalledTools { folded, budget_reached: appended.budget_reached })
    }

    /// Waits, the Session still running, until the holder of its work item
    /// answered every call in `ids` (api.md §17.13). An interrupt ends the
    /// wait: each call still open gets an error result, so every tool use
    /// has an answer.
    async fn await_external(&self, work: &pb::WorkItem, lease: &pb::LeaseRef, t: &mut Transcript, ids: &[String]) -> Result<(), Stop> {
        self.read_all(lease, t, work.start_seq).await?;
        self.release_slot(&work.run_id);
        self.wait_for_holder(work, lease, t, ids).await?;
        self.retake_slot(&work.run_id).await;
        Ok(())
    }

    async fn wait_for_holder(&self, work: &pb::WorkItem, lease: &pb::LeaseRef, t: &mut Transcript, ids: &[String]) -> Result<(), Stop> {
        loop {
            let open: Vec<&String> = ids.iter().filter(|id| t.outstanding.iter().any(|o| &o.tool_use_id == *id)).collect();
            if open.is_empty() {
                return Ok(());
            }
            if t.interrupted {
                let answers = open
                    .iter()
                    .map(|id| {
                        let r = json!({"tool_use_id": id, "content": "interrupted before the worker answered", "is_error": true});
                        (E::AgentToolResult, r.to_string())
                    })
                    .collect();
                self.append(lease, answers).await?;
                return self.read_all(lease, t, work.start_seq).await;
            }
            let req = pb::ReadEventsRequest { lease: Some(lease.clone()), after_seq: t.cursor, limit: 1000, wait_ms: EXTERNAL_WAIT_MS };
            let batch = self.runs.clone().read_events(req).await?.into_inner().data;
            t.absorb(&batch, work.start_seq);
        }
    }

    /// One model call. Returns the result and where its start span stands.
    ///
    /// The start span is written while the model works, and is always
    /// settled before anything the turn appends after it. A call that
    /// answers within [`START_SPAN_GRACE`] leaves it to the turn to write
    /// with the call's output, in one commit: the transcript already places
    /// messages that landed before it by its `context_seq`.
    async fn generate_once(
        &self,
        token: &str,
        lease: &pb::LeaseRef,
        req: mg::GenerateRequest,
        context_seq: i64,
        message_id: &str,
    ) -> Result<(mg::Completed, Start), GenErr> {
        let req = checkfu_proto::token::with_token(req, token);
        let mut stream = self.models.clone().generate(req).await.map_err(|s| GenErr::Model(s.into()))?.into_inner();
        let (previews, publisher) = self.preview_publisher(lease.clone(), message_id.to_string());
        let mut result = Err(GenErr::Model(checkfu_core::Error::unavailable("the model stream ended without a result")));
        // A start span written (its payload and the append), and one not yet.
        let mut started: Option<(String, PendingAppend)> = None;
        let mut deferred: Option<String> = None;
        let grace = tokio::time::sleep(START_SPAN_GRACE);
        tokio::pin!(grace);
        loop {
            let chunk = tokio::select! {
                biased;
                chunk = stream.next() => match chunk {
                    Some(c) => c,
                    None => break,
                },
                () = &mut grace, if deferred.is_some() => {
                    if let Some(payload) = deferred.take() {
                        started = Some(self.write_start(lease, payload));
                    }
                    continue;
                }
            };
            let chunk = match chunk {
                Ok(c) => c,
                Err(s) => {
                    result = Err(GenErr::Model(s.into()));
                    break;
                }
            };
            match chunk.chunk {
                Some(mg::generate_chunk::Chunk::Started(s)) => {
                    // A fallback to another candidate starts a second call:
                    // the first one's span goes in first.
                    if let Some(payload) = deferred.take() {
                        started = Some(self.write_start(lease, payload));
                    }
                    if let Some((_, prev)) = started.take() {
                        let _ = prev.await;
                    }
                    deferred = Some(json!({"provider": s.provider, "model": s.model, "context_seq": context_seq}).to_string());
                    grace.as_mut().reset(tokio::time::Instant::now() + START_SPAN_GRACE);
                }
                Some(mg::generate_chunk::Chunk::TextDelta(d)) => {
                    let _ = previews.send(d);
                }
                Some(mg::generate_chunk::Chunk::Completed(c)) => {
                    result = Ok(c);
                    break;
                }
                None => {}
            }
        }
        // Previews go out before the persisted result they preview.
        drop(previews);
        let _ = publisher.await;
        let mut start = Start::None;
        if let Some((payload, task)) = started {
            match task.await {
                Ok(Ok(seqs)) => start = seqs.first().map_or(Start::None, |s| Start::Written(*s, payload)),
                Ok(Err(stop)) => return Err(GenErr::Stop(stop)),
                Err(_) => return Err(GenErr::Stop(Stop::Lost)),
            }
        }
        if let Some(payload) = deferred {
            if result.is_ok() {
                start = Start::Pending(payload);
            } else {
                // A failed call's start still precedes its error.
                self.append(lease, vec![(E::SpanModelRequestStart, payload)]).await.map_err(GenErr::Stop)?;
            }
        }
        result.map(|c| (c, start))
    }

    /// Starts appending a start span; the turn awaits it before its own
    /// appends.
    fn write_start(&self, lease: &pb::LeaseRef, payload: String) -> (String, PendingAppend) {
        let (this, lease, sent) = (self.clone(), lease.clone(), payload.clone());
        (payload, tokio::spawn(async move { this.append(&lease, vec![(E::SpanModelRequestStart, sent)]).await }))
    }

    /// Publishes preview chunks in order, batching those that queue up while
    /// a call is in flight. Previews are best effort: a dropped one never
    /// affects the log.
    /// `preview_id` is the id the final `agent.message` will have.
    fn preview_publisher(
        &self,
        lease: pb::LeaseRef,
        preview_id: String,
    ) -> (tokio::sync::mpsc::UnboundedSender<String>, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut client = self.runs.clone();
        let task = tokio::spawn(async move {
            let mut start = true;
            while let Some(first) = rx.recv().await {
                let mut chunks = vec![first];
                while let Ok(more) = rx.try_recv() {
                    chunks.push(more);
                }
                let req = pb::PublishDeltasRequest {
                    lease: Some(lease.clone()),
                    event_type: E::AgentMessage.as_str().into(),
                    preview_id: preview_id.clone(),
                    start,
                    text: String::new(),
                    chunks,
                };
                start = false;
                let _ = client.publish_deltas(req).await;
            }
        });
        (tx, task)
    }
}

/// How a Run settles: the last position read, the events to append with
/// the completion, and the stop reason.
type Settle = (i64, Vec<(E, String)>, Value);

/// How a model turn ended.
enum Turn {
    /// The model answered: these events settle the Run with its completion.
    Final(Vec<(E, String)>),
    /// The model could not be reached (its failure is already recorded):
    /// settle the Run with `retries_exhausted`.
    Exhausted,
    /// The model called host-side tools: these events (with the
    /// `agent.custom_tool_use`s) settle the Run waiting for their results.
    Waiting(Vec<(E, String)>),
    /// The model called tools; the turn's events are appended (and folded
    /// into the transcript when nothing else was written in between).
    /// `budget_reached`: the Budget stops admission of the next model call.
    CalledTools { folded: bool, budget_reached: bool },
}

/// An append running in the background, resolving to the seqs it got.
type PendingAppend = tokio::task::JoinHandle<Result<Vec<i64>, Stop>>;

enum GenErr {
    Stop(Stop),
    Model(checkfu_core::Error),
}

/// Keeps the lease (and with it the capability token) alive until the Run
/// ends or the lease is lost.
async fn heartbeat(runner: Runner, lease: pb::LeaseRef, lost: CancellationToken) {
    let mut client = runner.runs.clone();
    loop {
        tokio::time::sleep(runner.cfg.heartbeat_every).await;
        match client.heartbeat(lease.clone()).await {
            Ok(r) if r.get_ref().status == "ok" => {
                let token = r.into_inner().capability_token;
                if !token.is_empty() {
                    runner.tokens.lock().unwrap_or_else(|p| p.into_inner()).insert(lease.run_id.clone(), token);
                }
            }
            Ok(_) => {
                tracing::info!(run_id = %lease.run_id, "lease lost; stopping");
                lost.cancel();
                return;
            }
            Err(status) => tracing::warn!(%status, "heartbeat failed; will retry"),
        }
    }
}

type Counts = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>;

/// One Run of a Session in progress on this runner; counted out when it
/// ends, however it ends (a lost lease drops it mid-turn).
struct InFlight {
    counts: Counts,
    session_id: String,
    /// No other Run of the Session was in progress here when it began.
    first: bool,
    left: bool,
}

impl InFlight {
    fn enter(counts: &Counts, session_id: &str) -> InFlight {
        let mut m = counts.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(session_id.to_string()).or_default();
        *n += 1;
        InFlight { counts: counts.clone(), session_id: session_id.to_string(), first: *n == 1, left: false }
    }

    /// Counts the Run out; true when no other Run of the Session is left.
    fn leave(mut self) -> bool {
        self.left = true;
        self.count_out()
    }

    fn count_out(&self) -> bool {
        let mut m = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let Some(n) = m.get_mut(&self.session_id) else { return true };
        *n = n.saturating_sub(1);
        if *n == 0 {
            m.remove(&self.session_id);
            return true;
        }
        false
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.left {
            self.count_out();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Counts, InFlight};

    #[test]
    fn the_first_run_of_a_session_materializes_and_the_last_writes_back() {
        let counts = Counts::default();
        let a = InFlight::enter(&counts, "sess_1");
        let b = InFlight::enter(&counts, "sess_1");
        let other = InFlight::enter(&counts, "sess_2");
        assert!(a.first && !b.first && other.first);
        assert!(!a.leave(), "b is still running");
        assert!(b.leave(), "the last one writes back");
        // A Run dropped mid-turn (its lease lost) still counts out.
        let c = InFlight::enter(&counts, "sess_1");
        assert!(c.first);
        drop(c);
        assert!(InFlight::enter(&counts, "sess_1").first);
        assert!(other.leave());
    }
}
