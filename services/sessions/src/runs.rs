//! Runs, the component that executes Sessions: the runner protocol's
//! control-plane side, with what a claimed Run is given (tools, capability
//! token, sandbox, memory mounts; `capability.rs`, `files.rs`, `memory.rs`)
//! and the Environment Work API's items (`work.rs`).
//!
//! An execution plane claims a Run under a lease with a fencing generation,
//! heartbeats it, reads the log, appends its events and completes it. Every
//! write re-checks the lease in the same atomic commit, so a runner that
//! lost its lease writes nothing.
//!
//! Runs sits on the log, the catalog and the uploads, and knows nothing of
//! the components above it (threads, outcomes, approvals): what a Run's
//! events mean for those is decided inside the log's [`Draft`].

use crate::catalog::Catalog;
use crate::draft::{Draft, system};
use crate::live::{Delta, Item};
use crate::log::{Log, Requeue, lease_lost};
use crate::model::*;
use crate::runners::Runners;
use crate::store::{ClaimGuard, SessionsStore, View};
use crate::uploads::Uploads;
use checkfu_blobs::BlobStore;
use checkfu_core::cache::Bounded;
use checkfu_core::capability::TokenKey;
use checkfu_core::events::EventType;
use checkfu_core::id::{AgentId, EventId, SessionId};
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The Session's instructions followed by each mounted skill's name,
/// description and `SKILL.md` path.
fn with_skills(instructions: &str, skills: &[WorkSkill]) -> String {
    if skills.is_empty() {
        return instructions.to_string();
    }
    let mut out = instructions.to_string();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str("Skills are mounted read-only in the workspace; open a skill's SKILL.md before using it:");
    for s in skills {
        out.push_str(&format!("\n- {} ({}): {}", s.name, s.path, s.description));
    }
    out
}

/// What an append assigned, and whether the Session's Budget now stops
/// admission (the runner then settles before its next model call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub seqs: Vec<i64>,
    pub budget_reached: bool,
}

/// How many of the newest events a claim carries.
const CLAIM_TAIL: i64 = 64;
/// How many a hand-off carries: it usually goes to the runner that ran the
/// Session's last turn, which lacks only that turn's settling and this
/// turn's admission (a runner missing more reads the log).
const HANDOFF_TAIL: i64 = 16;

pub const MAX_CLAIM_WAIT: Duration = Duration::from_secs(30);
/// How long a claim taken by a hand-off waits for its work: one commit.
const HANDOFF_WAIT: Duration = Duration::from_secs(5);
const MAX_APPEND: usize = 100;

/// The events an execution plane sent, typed: only [`EventType::RUNNER`]
/// types, each with an object payload.
/// An event a Run appends: its type, payload, and the id it proposes (an
/// `agent.message` takes its preview's id, api.md §17.14).
pub type RunEvent = (String, Value, String);

/// A Run's event, checked: its type, payload and proposed id.
pub(crate) type Checked = (EventType, Value, Option<EventId>);

/// The screen a Session holds its messages for (`screen.rs`), and its
/// Environment (the routing profile must live there); `None` for an
/// unscreened Session.
pub(crate) type Screen = Option<(checkfu_core::id::EnvironmentId, Arc<checkfu_core::delivery_screen::DeliveryScreen>)>;

fn check_run_events(events: Vec<RunEvent>) -> Result<Vec<Checked>> {
    if events.len() > MAX_APPEND {
        return Err(Error::invalid_field("events", format!("append at most {MAX_APPEND} events at a time")));
    }
    events
        .into_iter()
        .map(|(t, p, id)| {
            let Some(t) = EventType::parse("events.type", &t).ok().filter(|t| EventType::RUNNER.contains(t)) else {
                return Err(Error::invalid_field("events.type", format!("an execution plane cannot append {t:?}")));
            };
            if !p.is_object() {
                return Err(Error::invalid_field("events.payload", "payload must be an object"));
            }
            let id = match id.as_str() {
                "" => None,
                _ if t == EventType::AgentMessage => Some(EventId::parse("events.id", &id)?),
                _ => return Err(Error::invalid_field("events.id", "only an agent.message takes a proposed id (its preview's)")),
            };
            Ok((t, p, id))
        })
        .collect()
}

/// Appends a held Run's events to a draft, projecting model usage onto the
/// Run and the Session. Returns the seqs they will get.
fn append_run_events(d: &mut Draft, lease: &Lease, events: &[Checked]) -> Result<Vec<i64>> {
    let mut run = held(d, lease)?.clone();
    let agent_id = d.focused().map_or_else(|| d.session.agent_id.to_string(), |t| t.agent.agent_id.clone());
    let agent = json!({"kind": "agent", "id": agent_id});
    let cause = json!({"kind": "run", "id": run.id});
    let mut seqs = Vec::with_capacity(events.len());
    for (t, p, proposed) in events {
        let t = *t;
        // A model call's cost, or a delivery screen's (`screen.rs`).
        let charged = match t {
            EventType::SpanModelRequestEnd => Some((p.get("model_usage"), p.get("cost_micro_usd"))),
            EventType::MessageScreened => p.get("usage").map(|u| (Some(u), u.get("cost_micro_usd"))),
            _ => None,
        };
        if let Some((u, cost)) = charged {
            let tokens = |k: &str| u.and_then(|u| u.get(k)).and_then(Value::as_i64).unwrap_or(0).max(0);
            let add = Usage {
                input_tokens: tokens("input_tokens"),
                output_tokens: tokens("output_tokens"),
                model_spend_micro_usd: cost.and_then(Value::as_i64).unwrap_or(0).max(0),
            };
            run.usage.add(add);
            d.session.usage.add(add);
            d.charge_thread(add);
            if let Some(b) = d.session.budget.as_mut() {
                b.charge(add);
            }
        }
        // A model request after a retryable failure: the Session runs again.
        if t == EventType::SpanModelRequestStart && d.session.status == SessionStatus::Rescheduling {
            d.set_status(SessionStatus::Running, None, cause.clone());
        }
        seqs.push(d.next_seq());
        let author = if t.by_agent() { agent.clone() } else { system() };
        d.push_as(proposed.clone().unwrap_or_else(EventId::mint), t, Some(&run.id), author, cause.clone(), p.clone());
        // The runner will retry the model: the Session is rescheduling.
        let retrying = p.get("error").and_then(|e| e.get("retry_status")).and_then(Value::as_str) == Some("retrying");
        if t == EventType::SessionError && retrying && d.session.status == SessionStatus::Running {
            d.set_status(SessionStatus::Rescheduling, None, cause.clone());
        }
    }
    d.put_run(run);
    Ok(seqs)
}

/// The `requires_action` stop reason for a completion: it waits on the
/// custom tool uses and the approval-gated tool uses the completion appends.
/// `event_ids` names the events a client acts on; `waiting_on` the tool use
/// ids still outstanding; `approvals` maps gated ones to their approval.
fn requires_action(events: &[NewEvent]) -> Result<StopReason> {
    let str_of = |e: &NewEvent, k: &str| e.payload.get(k).and_then(Value::as_str).map(str::to_string);
    let mut event_ids = vec![];
    let mut waiting_on = vec![];
    let mut approvals = std::collections::BTreeMap::new();
    for e in events {
        match e.event_type.as_str() {
            t if t == EventType::AgentCustomToolUse.as_str() => {
                if let Some(id) = str_of(e, "custom_tool_use_id") {
                    event_ids.push(e.id.to_string());
                    waiting_on.push(id);
                }
            }
            t if t == EventType::ActionApprovalPending.as_str() => {
                let (Some(tool_use_id), Some(approval_id)) = (str_of(e, "tool_use_id"), str_of(e, "action_approval_id")) else {
                    continue;
                };
                // The client confirms the tool use itself, so name its event.
                let tool_use = events
                    .iter()
                    .find(|u| u.event_type == EventType::AgentToolUse.as_str() && str_of(u, "tool_use_id").as_ref() == Some(&tool_use_id));
                event_ids.push(tool_use.map_or_else(|| e.id.to_string(), |u| u.id.to_string()));
                approvals.insert(tool_use_id.clone(), approval_id);
                waiting_on.push(tool_use_id);
            }
            _ => {}
        }
    }
    if waiting_on.is_empty() {
        return Err(Error::invalid_field(
            "stop_reason",
            "requires_action needs the agent.custom_tool_use or action_approval.pending events it waits on",
        ));
    }
    Ok(StopReason::RequiresAction(Wait { event_ids, waiting_on, approvals }))
}

/// The longest a run's read waits for the next event.
const MAX_READ_WAIT_MS: u32 = 20_000;

/// Checks inside a draft that `lease` still holds one of the Session's
/// active Runs, and puts that Run's thread in focus.
fn held<'a>(d: &'a mut Draft, lease: &Lease) -> Result<&'a Run> {
    if !d.focus_run(&lease.run_id) {
        return Err(lease_lost());
    }
    match &d.run {
        Some(r) if lease.holds(r) => Ok(r),
        _ => Err(lease_lost()),
    }
}

/// Runs and what they are given; cheap to clone (every part is shared).
#[derive(Clone)]
pub struct Runs {
    pub(crate) store: Arc<dyn SessionsStore>,
    pub(crate) log: Log,
    pub(crate) catalog: Catalog,
    pub(crate) uploads: Uploads,
    /// Self-hosted Runners: pairing, credentials, revocation.
    pub runners: Runners,
    /// The memory service, for the Session's mounts of MemoryStores.
    pub(crate) memory: Option<crate::upstream::Memory>,
    /// Session files and workspace snapshots (`files.rs`).
    pub(crate) blobs: Option<Arc<dyn BlobStore>>,
    /// Signs capability tokens (`capability.rs`); from the installation key.
    pub(crate) token_key: Option<TokenKey>,
    /// Sessions known to mount no MemoryStore. Mounts are fixed when a
    /// Session is created, so a claim asks the store about them once.
    pub(crate) unmounted: Arc<Bounded<SessionId, ()>>,
    /// Woken whenever a work item is queued (api.md §17.13).
    pub(crate) work_queued: Arc<Notify>,
    /// Who polled for work recently, on this replica.
    pub(crate) pollers: Arc<crate::pollers::Pollers>,
    /// The model gateway: delivery screens (`screen.rs`).
    pub(crate) models: Option<crate::upstream::Models>,
    /// Each Session's delivery screen, fixed at creation, once read.
    pub(crate) screens: Arc<Bounded<SessionId, Screen>>,
}

/// Sessions known to mount no MemoryStore (and Sessions' delivery
/// screens) kept in memory; beyond this the cache starts over.
const UNMOUNTED_CACHE: usize = 10_000;

/// What Runs are built from: the parts it shares with the components beside
/// it, and the upstreams and keys only it uses.
pub struct Parts {
    pub store: Arc<dyn SessionsStore>,
    pub log: Log,
    pub catalog: Catalog,
    pub uploads: Uploads,
    pub memory: Option<crate::upstream::Memory>,
    pub blobs: Option<Arc<dyn BlobStore>>,
    pub token_key: Option<TokenKey>,
    pub models: Option<crate::upstream::Models>,
}

impl Runs {
    pub fn new(p: Parts) -> Self {
        Runs {
            runners: Runners::new(p.store.clone()),
            store: p.store,
            log: p.log,
            catalog: p.catalog,
            uploads: p.uploads,
            memory: p.memory,
            blobs: p.blobs,
            token_key: p.token_key,
            unmounted: Arc::new(Bounded::new(UNMOUNTED_CACHE)),
            work_queued: Arc::new(Notify::new()),
            pollers: Arc::default(),
            models: p.models,
            screens: Arc::new(Bounded::new(UNMOUNTED_CACHE)),
        }
    }

    /// Embedded start-up: the previous process's runner is gone, so its
    /// leases are released at once instead of waiting for them to expire.
    pub async fn release_orphaned_leases(&self) -> Result<u64> {
        let n = self.store.expire_all_leases().await?;
        if n > 0 {
            self.log.work.notify_waiters();
        }
        Ok(n)
    }

    /// Claims the oldest claimable Run, waiting up to `wait` for one. While
    /// it waits, a Run admitted on this replica is handed to it directly
    /// (see `handoff.rs`).
    pub async fn claim(&self, claimant: impl Into<Claimant>, wait: Duration) -> Result<Option<WorkItem>> {
        let claimant = claimant.into();
        let item = self.claim_for(&claimant, wait).await?;
        let Claimant::SelfHosted(runner) = &claimant else { return Ok(item) };
        let Some(item) = item else { return Ok(None) };
        // A Runner revoked while its claim waited takes nothing: the Run
        // goes back in the queue.
        if self.store.get_runner(&runner.id).await?.is_none_or(|r| r.status != RunnerStatus::Active) {
            self.log.requeue(&item.lease).await?;
            return Err(Error::new(Code::InvalidKey, "the runner credential is unknown or revoked"));
        }
        Ok(Some(item))
    }

    async fn claim_for(&self, claimant: &Claimant, wait: Duration) -> Result<Option<WorkItem>> {
        let (runner_id, placement) = (claimant.runner_id(), claimant.placement());
        let deadline = tokio::time::Instant::now() + wait.min(MAX_CLAIM_WAIT);
        loop {
            // Register interest before looking, so a Run queued between the
            // look and the wait still wakes us.
            let notified = self.log.work.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(w) = self.try_claim(runner_id, &placement).await? {
                return Ok(Some(w));
            }
            let (ticket, mut handed) = self.log.parked.park(runner_id, &placement);
            // Expired leases need no notification: poll at least once a second.
            let nap = tokio::time::Instant::now() + Duration::from_secs(1);
            tokio::select! {
                biased;
                handed_run = &mut handed => match handed_run {
                    Ok((session, run)) => match self.prepare_handed(session, run).await {
                        Some(item) => return Ok(Some(item)),
                        None => continue,
                    },
                    // Taken for a commit that did not admit after all.
                    Err(_) => continue,
                },
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline.min(nap)) => {}
            }
            if !self.log.parked.unpark(ticket) {
                // A hand-off took this claim: its Run (or its end) is a
                // commit away.
                if let Ok(Ok((session, run))) = tokio::time::timeout(HANDOFF_WAIT, handed).await
                    && let Some(item) = self.prepare_handed(session, run).await
                {
                    return Ok(Some(item));
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    async fn try_claim(&self, runner_id: &str, placement: &str) -> Result<Option<WorkItem>> {
        for candidate in self.store.claimable_runs(placement, now_ms(), 16).await? {
            let lease_ms = self.log.lease_ms;
            let claimed = self
                .log
                .transact(&candidate.session_id, |d| {
                    let now = d.now_ms;
                    // The Session's sandbox has one owner while any thread runs.
                    if d.owner_other_than(runner_id, &candidate.id) {
                        return Ok(None);
                    }
                    d.focus_run(&candidate.id);
                    let Some(run) = d.run.clone().filter(|r| r.id == candidate.id) else { return Ok(None) };
                    let claimable = run.status == RunStatus::Queued || (run.status == RunStatus::Running && run.lease_expires_ms < now);
                    if !claimable || d.session.status == SessionStatus::Terminated {
                        return Ok(None);
                    }
                    d.claim_guard = Some(ClaimGuard { run_id: run.id.clone(), generation: run.generation, now_ms: now });
                    Ok(d.claim_run(runner_id, lease_ms))
                })
                .await;
            let (run, session) = match claimed {
                Ok((Some(run), session, _)) => (run, session),
                Ok((None, _, _)) => continue,
                Err(e) if e.code == Code::NotFound => continue,
                Err(e) => return Err(e),
            };
            return self.work_item(session, run, CLAIM_TAIL).await.map(Some);
        }
        Ok(None)
    }

    /// What a runner needs for a Run just claimed for it: the tools its
    /// Session may use, its lease, and the `tail` newest events of the log.
    ///
    /// A child thread's Run gets its own view of the log, its member's
    /// tools and instructions, and `send_message`; a coordinator's primary
    /// also `spawn_agent` (`thread_tools.rs`).
    pub(crate) async fn work_item(&self, session: Session, run: Run, tail: i64) -> Result<WorkItem> {
        let child = run.thread_id.as_ref().and_then(|t| session.threads.iter().find(|c| &c.id == t)).cloned();
        let view = child.as_ref().map_or(View::PrimaryOwn, |c| View::Child(c.id.clone()));
        // A view skips other threads' seqs: a wider window finds the tail.
        let window = if session.threads.is_empty() { tail } else { tail * 4 };
        // Three independent reads, at once: a claimed Run waits for all of
        // them before its runner can start, so their round trips overlap
        // (queued together on SQLite's one connection, in parallel on a
        // PostgreSQL pool) instead of adding up.
        let (mut tail, (tools, own_instructions), sandbox) = tokio::try_join!(
            self.store.list_events(&session.id, &view, (session.last_seq - window).max(0), window, &[]),
            self.thread_tools(&session, &run),
            self.sandbox_for(&session, &run.id),
        )?;
        let keep = tail.len().saturating_sub(CLAIM_TAIL as usize);
        tail.drain(..keep);
        let capability = self.mint_capability(&session, &run, &tools)?;
        let instructions = with_skills(&own_instructions, &sandbox.skills);
        Ok(WorkItem { lease: Lease::of(&run), session, run, tools, tail, capability, sandbox, instructions })
    }

    /// The tools and instructions of `run`'s thread: the primary's are the
    /// Session's (and, for a coordinator, both platform tools); a child's
    /// its own AgentVersion's — a `self` child narrowed as the Session is —
    /// and `send_message` (`thread_tools.rs`).
    pub(crate) async fn thread_tools(&self, session: &Session, run: &Run) -> Result<(Vec<ToolDecl>, String)> {
        let child = run.thread_id.as_ref().and_then(|t| session.threads.iter().find(|c| &c.id == t));
        let itself = child.is_some_and(|c| c.agent.agent_id == session.agent_id.as_str() && c.agent.version == session.pins.agent_version);
        let (mut tools, instructions) = match child {
            Some(c) if !itself => {
                let v = self.catalog.pinned_version(&AgentId::parse("agent_id", &c.agent.agent_id)?, c.agent.version).await?;
                v.map(|v| (v.definition.tools, v.definition.instructions)).unwrap_or_default()
            }
            _ => (self.run_tools(session).await?, session.selection.instructions.clone()),
        };
        let coordinator = self
            .catalog
            .pinned_version(&session.agent_id, session.pins.agent_version)
            .await?
            .is_some_and(|v| v.definition.multiagent.is_some());
        tools.extend(crate::thread_tools::platform_tools(coordinator, child.is_some()));
        Ok((tools, instructions))
    }

    /// The tools a Session's Runs may use: its pinned version's, less those
    /// the Session narrowed away.
    pub(crate) async fn run_tools(&self, session: &Session) -> Result<Vec<ToolDecl>> {
        let version = self.catalog.pinned_version(&session.agent_id, session.pins.agent_version).await?;
        Ok(version
            .map(|v| {
                v.definition
                    .tools
                    .into_iter()
                    .filter(|t| {
                        t.names()
                            .iter()
                            .all(|n| !v.definition.session_variable.tools.allowed.contains(n) || session.selection.tools.contains(n))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The work item of a Run handed to this claim. If it cannot be
    /// prepared, or the claim is dropped while it is (its runner left), the
    /// Run goes back in the queue rather than waiting out its lease.
    async fn prepare_handed(&self, session: Session, run: Run) -> Option<WorkItem> {
        let unless_given = Requeue::armed(self.log.clone(), Lease::of(&run));
        match self.work_item(session, run, HANDOFF_TAIL).await {
            Ok(item) => {
                unless_given.disarm();
                Some(item)
            }
            Err(e) => {
                tracing::warn!(error = %e, "a handed-off run could not be prepared; queueing it again");
                None
            }
        }
    }

    /// Revokes a Runner and puts every Run it held back in the queue.
    pub async fn revoke_runner(&self, id: &str) -> Result<Runner> {
        let (runner, held) = self.runners.revoke(id).await?;
        for (run_id, session_id) in held {
            self.log.queue_again(&session_id, |r| r.id == run_id && r.status == RunStatus::Running).await?;
        }
        Ok(runner)
    }

    /// Whether a runner-plane Session's Run waits for a Runner of its pool
    /// (queued, or its lease lapsed).
    pub async fn queued_for_pool(&self, s: &Session) -> Result<bool> {
        if !matches!(s.pins.execution, Execution::Runner { .. })
            || !matches!(s.status, SessionStatus::Running | SessionStatus::Rescheduling)
        {
            return Ok(false);
        }
        let run = match self.log.cached_active_run(&s.id) {
            Some(r) => Some(r),
            None => self.store.active_run(&s.id).await?,
        };
        Ok(run.is_some_and(|r| r.status == RunStatus::Queued || (r.status == RunStatus::Running && r.lease_expires_ms < now_ms())))
    }

    /// A Runner hands a Run back (it is stopping): the Run goes back in the
    /// queue at once instead of waiting for its lease to lapse.
    pub async fn release(&self, lease: &Lease) -> Result<()> {
        self.log.requeue(lease).await
    }

    /// Extends a held lease. `Ok(false)` tells the runner to stop: the lease
    /// moved to someone else or the Run ended.
    pub async fn heartbeat(&self, lease: &Lease) -> Result<bool> {
        let now = now_ms();
        self.store.extend_lease(&lease.run_id, &lease.lease_id, lease.generation, now, now + self.log.lease_ms).await
    }

    /// Reads the log as the lease's thread sees it: a child its own view,
    /// the primary its own events (not the cross-posts).
    ///
    /// With `wait_ms`, an empty read waits (up to 20 s) for the next event:
    /// how a Run of an external_tools Session waits for its work item's
    /// holder, which such a wait keeps queued (api.md §17.13).
    pub async fn read_for_run(&self, lease: &Lease, after_seq: i64, limit: u32, wait_ms: u32) -> Result<Vec<Event>> {
        let (session_id, view) = self.view_of(lease).await?;
        let limit = i64::from(limit.clamp(1, 1000));
        // Subscribed before reading: nothing committed between is missed.
        let mut rx = (wait_ms > 0).then(|| self.log.hub.subscribe(&session_id));
        let events = self.store.list_events(&session_id, &view, after_seq, limit, &[]).await?;
        let Some(rx) = rx.as_mut().filter(|_| events.is_empty()) else { return Ok(events) };
        self.ensure_work(&self.log.session(session_id.as_str()).await?).await?;
        let wait = std::time::Duration::from_millis(u64::from(wait_ms.min(MAX_READ_WAIT_MS)));
        let _ = tokio::time::timeout(wait, async {
            loop {
                match rx.recv().await {
                    Ok(crate::live::Item::Event(e)) if e.seq > after_seq => return,
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        })
        .await;
        self.store.list_events(&session_id, &view, after_seq, limit, &[]).await
    }

    /// The lease's Session and the view of its Run's thread.
    async fn view_of(&self, lease: &Lease) -> Result<(SessionId, View)> {
        let session_id = self.log.session_of(lease).await?;
        let thread = match self.log.cached_run(session_id.as_str(), &lease.run_id) {
            Some(r) => r.thread_id,
            None => self.log.run(&lease.run_id).await?.thread_id,
        };
        Ok((session_id, thread.map_or(View::PrimaryOwn, View::Child)))
    }

    /// Appends the Run's own events (model spans, agent output, ...). Usage
    /// in `span.model_request_end` is projected onto the Run and Session.
    pub async fn append_for_run(&self, lease: &Lease, events: Vec<RunEvent>) -> Result<Appended> {
        if events.is_empty() {
            return Err(Error::invalid_field("events", format!("append 1 to {MAX_APPEND} events at a time")));
        }
        let events = check_run_events(events)?;
        let session_id = self.log.session_to_write(lease).await?;
        let events = self.screened(&session_id, events).await?;
        let (seqs, session, _) = self.log.transact(&session_id, |d| append_run_events(d, lease, &events)).await?;
        Ok(Appended { seqs, budget_reached: session.budget.as_ref().is_some_and(|b| !b.open()) })
    }

    /// Fans preview chunks out to live subscribers; nothing is stored.
    pub async fn publish_delta(&self, lease: &Lease, event_type: &str, preview_id: &str, start: bool, chunks: &[String]) -> Result<()> {
        if !EventType::PREVIEWED.contains(&event_type) {
            return Err(Error::invalid_field("event_type", "previews exist for agent.message and agent.thinking"));
        }
        if chunks.len() > 1024 || chunks.iter().map(String::len).sum::<usize>() > 64 * 1024 {
            return Err(Error::invalid_field("chunks", "at most 1024 chunks and 64 KiB per call"));
        }
        let (session_id, view) = self.view_of(lease).await?;
        // A screened Session's text is shown only once its verdict is in.
        if self.screen_of(&session_id).await?.is_some() {
            return Ok(());
        }
        let thread_id = match view {
            View::Child(t) => t,
            _ => String::new(),
        };
        let delta = |kind: &'static str, text: &str| Delta {
            kind,
            event_type: event_type.into(),
            preview_id: preview_id.into(),
            text: text.into(),
            run_id: lease.run_id.to_string(),
            thread_id: thread_id.clone(),
        };
        if start {
            self.log.hub.publish(&session_id, Item::Delta(delta("event_start", "")));
        }
        for text in chunks.iter().filter(|t| !t.is_empty()) {
            self.log.hub.publish(&session_id, Item::Delta(delta("event_delta", text)));
        }
        Ok(())
    }

    /// Settles the Run. Input the runner never saw (a `user.message` after
    /// `last_seen_seq`) starts the next Run at once, so nothing is dropped.
    pub async fn complete(&self, lease: &Lease, stop_reason: StopReason, last_seen_seq: i64, events: Vec<RunEvent>) -> Result<()> {
        let events = check_run_events(events)?;
        if matches!(stop_reason, StopReason::Terminated) {
            return Err(Error::invalid_field(
                "stop_reason",
                "stop_reason.type must be end_turn, requires_action, retries_exhausted or budget_reached",
            ));
        }
        let kind = stop_reason.kind();
        let session_id = self.log.session_to_write(lease).await?;
        let events = self.screened(&session_id, events).await?;
        let (settled, _, _) = self
            .log
            .transact(&session_id, |d| {
                append_run_events(d, lease, &events)?;
                let run_id = held(d, lease)?.id.clone();
                let cause = json!({"kind": "run", "id": run_id});
                let mut stop = stop_reason.clone();
                if kind == "requires_action" {
                    stop = requires_action(&d.events)?;
                }
                // Admission is closed: the Session pauses at its cap (a wait
                // for tool results or approvals outranks the pause).
                if kind != "requires_action" && kind != "retries_exhausted" && d.admission_closed() {
                    d.pause_for_budget(cause);
                    return Ok("budget_reached");
                }
                if kind == "budget_reached" {
                    // The Budget re-opened while the runner was stopping: go on.
                    d.complete_run(StopReason::EndTurn, cause.clone());
                    let trigger = d.session.last_seq + d.events.len() as i64;
                    d.admit_run(trigger, cause);
                    return Ok("end_turn");
                }
                let input_waiting = d.session.last_user_message_seq > last_seen_seq;
                // An Outcome's Run is graded before the Session idles.
                if d.start_grading(kind, input_waiting, cause.clone()) {
                    return Ok("end_turn");
                }
                d.complete_run(stop, cause.clone());
                d.outcome_after_run(kind, cause.clone());
                if kind == "end_turn" && input_waiting {
                    let trigger = d.session.last_user_message_seq;
                    d.admit_run(trigger, cause);
                }
                Ok(match kind {
                    "requires_action" => "requires_action",
                    "retries_exhausted" => "retries_exhausted",
                    _ => "end_turn",
                })
            })
            .await?;
        metrics::counter!("checkfu_runs_completed_total", "stop_reason" => settled).increment(1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::with_skills;
    use crate::model::WorkSkill;
    use serde_json::json;

    fn skill(name: &str, description: &str, path: &str) -> WorkSkill {
        WorkSkill { name: name.into(), description: description.into(), path: path.into() }
    }

    #[test]
    fn the_model_is_told_each_mounted_skill() {
        assert_eq!(with_skills("Be brief.", &[]), "Be brief.", "no skills, no section");
        let told = with_skills("Be brief.", &[skill("greeting", "Says hello", "skills/greeting/SKILL.md")]);
        assert!(told.starts_with("Be brief.\n\n"), "{told}");
        assert!(told.ends_with("\n- greeting (skills/greeting/SKILL.md): Says hello"), "{told}");
        assert!(with_skills("", &[skill("a", "d", "p")]).starts_with("Skills are mounted"));
    }
    #[test]
    fn only_an_agent_message_proposes_its_id() {
        let id = checkfu_core::id::EventId::mint().to_string();
        let msg = ("agent.message".to_string(), json!({"content": []}), id.clone());
        let checked = super::check_run_events(vec![msg]).expect("an agent.message may");
        assert_eq!(checked[0].2.as_ref().map(|e| e.to_string()), Some(id.clone()));
        let other = ("span.model_request_end".to_string(), json!({}), id);
        assert!(super::check_run_events(vec![other]).is_err(), "nothing else names its id");
        let bad = ("agent.message".to_string(), json!({}), "prv_1".to_string());
        assert!(super::check_run_events(vec![bad]).is_err(), "an evt_ id");
        let none = ("agent.message".to_string(), json!({}), String::new());
        assert!(super::check_run_events(vec![none]).expect("minted by the service")[0].2.is_none());
    }
}
