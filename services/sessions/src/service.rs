//! Sessions: creation, input, the event log and its live stream. Every state
//! change is a [`Draft`] decided from a fresh read and committed atomically
//! with its events; a lost race is retried from a new read.

use crate::handoff::{Parked, Waiting};
use crate::input::{Draft, Input};
use crate::live::{Hub, Item};
use crate::model::*;
use crate::store::{Change, SessionFilter, SessionsStore, View};
use checkfu_core::cache::Bounded;
use checkfu_core::events::EventType;
use checkfu_core::id::{AgentId, DeploymentId, PrincipalId, RunId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result, sha256_hex};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::{Notify, mpsc};

/// How long a claimed Run's lease lasts without a heartbeat.
pub const DEFAULT_LEASE_MS: i64 = 15_000;
const COMMIT_ATTEMPTS: usize = 64;
const MAX_TITLE: usize = 500;
const MAX_METADATA_BYTES: usize = 16 * 1024;

#[derive(Clone)]
pub struct SessionsService {
    pub(crate) store: Arc<dyn SessionsStore>,
    pub(crate) hub: Arc<Hub>,
    /// Woken whenever a Run becomes claimable.
    pub(crate) work: Arc<Notify>,
    /// Claims waiting for work on this replica, for hand-offs.
    pub(crate) parked: Arc<Parked>,
    pub(crate) lease_ms: i64,
    /// The last committed state of recently changed Sessions. A change is
    /// decided from it and committed with a compare-and-set on `version`,
    /// so a stale entry only costs a retry from a fresh read.
    snapshots: Arc<Bounded<SessionId, Snapshot>>,
    /// Published versions are immutable, so they are cached once read.
    versions: Arc<Bounded<(String, i64), AgentVersion>>,
    /// SandboxProfile revisions are immutable too.
    pub(crate) revisions: Arc<Bounded<(String, i64), SandboxRevision>>,
    /// Governance, for ActionApproval outcomes.
    pub(crate) governance: Option<crate::upstream::Governance>,
    /// The capability gateway, which resolves ToolSource declarations at
    /// publication.
    pub(crate) tool_sources: Option<crate::upstream::ToolSources>,
    /// The memory service, for the Session's mounts of MemoryStores.
    pub(crate) memory: Option<crate::upstream::Memory>,
    /// The model gateway, for Outcomes' graders.
    pub(crate) models: Option<crate::upstream::Models>,
    /// Sessions known to mount no MemoryStore. Mounts are fixed when a
    /// Session is created, so a claim asks the store about them once.
    pub(crate) unmounted: Arc<Bounded<SessionId, ()>>,
    /// Woken after each commit, so the outbox relay publishes at once.
    outbox_wake: Option<Arc<Notify>>,
    /// Signs capability tokens (`capability.rs`); from the installation key.
    pub(crate) token_key: Option<checkfu_core::capability::TokenKey>,
    /// Session files and workspace snapshots (`files.rs`).
    pub(crate) blobs: Option<Arc<dyn checkfu_blobs::BlobStore>>,
    /// Files and skills: switched off or not, and how long Files live.
    pub(crate) uploads: crate::uploads::UploadSettings,
    /// SandboxProfiles may allow every public host (`allowed_hosts:["*"]`).
    pub(crate) unrestricted_network: bool,
    /// Woken whenever a work item is queued (api.md §17.13).
    pub(crate) work_queued: Arc<Notify>,
    /// Who polled for work recently, on this replica.
    pub(crate) pollers: Arc<crate::work::Pollers>,
}

/// A Session as last committed here: its primary's active Run and its
/// child threads' active Runs.
type Snapshot = (Session, Option<Run>, Vec<Run>);

/// Versions kept in memory; beyond this the cache starts over.
const VERSION_CACHE: usize = 4096;
/// Session snapshots kept in memory; beyond this the cache starts over.
const SNAPSHOT_CACHE: usize = 10_000;

/// What a caller asked for when creating a Session, already shape-checked.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    pub deployment_id: String,
    pub principal_id: String,
    pub title: String,
    pub metadata: Value,
    pub instructions: Option<String>,
    pub tools: Option<Vec<String>>,
    pub skills: Option<Vec<String>>,
    pub initial_events: Vec<Input>,
    /// Files given to the Session from the start (`resources`).
    pub resources: Vec<String>,
    /// MemoryStores mounted from the start (`resources`).
    pub memory: Vec<MountRequest>,
    /// A revision of the deployment to run instead of its current one.
    pub deployment_revision: Option<i64>,
    /// `(limit, metric)` of a session-scoped Budget.
    pub budget: Option<(i64, String)>,
    /// A caller-minted id: creating it again answers the Session made the
    /// first time (for the same Principal) instead of a second one.
    pub id: Option<String>,
    /// ConnectionVaults named at creation (the gateway checked the caller
    /// may read each and that none is archived).
    pub connection_vault_ids: Vec<String>,
}

/// Narrows `allowed` (the release's variable set) to `requested`, refusing
/// anything outside it: a selection can only narrow.
fn narrow(field: &str, requested: Option<&Vec<String>>, allowed: &[String]) -> Result<Vec<String>> {
    match requested {
        None => Ok(allowed.to_vec()),
        Some(req) => {
            for r in req {
                if !allowed.contains(r) {
                    return Err(Error::invalid_field(field, format!("{r:?} is not in the release's session_variable.{field}.allowed set")));
                }
            }
            let mut v = req.clone();
            v.sort();
            v.dedup();
            Ok(v)
        }
    }
}

/// The Session's selection and the digests pinning it. With no narrowing and
/// no extra instructions the release digest is the agent release's own.
fn selection(
    def: &AgentDefinition,
    release: &str,
    tools: Option<&Vec<String>>,
    skills: Option<&Vec<String>>,
    extra: Option<&str>,
) -> Result<Selection> {
    let tools_sel = narrow("tools", tools, &def.session_variable.tools.allowed)?;
    let skills_sel = narrow("skills", skills, &def.session_variable.skills.allowed)?;
    let mut instructions = def.instructions.clone();
    if let Some(x) = extra.filter(|x| !x.is_empty()) {
        if x.len() > MAX_INSTRUCTIONS_BYTES {
            return Err(Error::invalid_field("instructions", "instructions are limited to 64 KiB"));
        }
        if !instructions.is_empty() {
            instructions.push_str("\n\n");
        }
        instructions.push_str(x);
    }
    let narrowed = tools_sel != def.session_variable.tools.allowed || skills_sel != def.session_variable.skills.allowed;
    let release_sha256 = if narrowed || extra.is_some_and(|x| !x.is_empty()) {
        sha256_hex(json!({"release": release, "tools": tools_sel, "skills": skills_sel, "instructions": extra}).to_string())
    } else {
        release.to_string()
    };
    Ok(Selection { instructions_sha256: sha256_hex(&instructions), instructions, tools: tools_sel, skills: skills_sel, release_sha256 })
}

impl SessionsService {
    pub fn new(store: Arc<dyn SessionsStore>) -> Self {
        SessionsService {
            store,
            hub: Arc::new(Hub::default()),
            work: Arc::new(Notify::new()),
            parked: Arc::new(Parked::default()),
            lease_ms: DEFAULT_LEASE_MS,
            versions: Arc::new(Bounded::new(VERSION_CACHE)),
            revisions: Arc::new(Bounded::new(VERSION_CACHE)),
            snapshots: Arc::new(Bounded::new(SNAPSHOT_CACHE)),
            unmounted: Arc::new(Bounded::new(SNAPSHOT_CACHE)),
            governance: None,
            tool_sources: None,
            memory: None,
            models: None,
            outbox_wake: None,
            token_key: None,
            blobs: None,
            uploads: crate::uploads::UploadSettings::default(),
            unrestricted_network: false,
            work_queued: Arc::new(Notify::new()),
            pollers: Arc::default(),
        }
    }

    /// Whether Files and skills are offered, and how long Files live.
    pub fn with_upload_settings(mut self, settings: crate::uploads::UploadSettings) -> Self {
        self.uploads = settings;
        self
    }

    /// Keeps session files and workspace snapshots in `blobs`.
    /// Lets SandboxProfiles allow every public host (an installation setting).
    pub fn with_unrestricted_network(mut self, allowed: bool) -> Self {
        self.unrestricted_network = allowed;
        self
    }

    pub fn with_blobs(mut self, blobs: Arc<dyn checkfu_blobs::BlobStore>) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Signs capability tokens with `key` (derived from the installation key).
    pub fn with_token_key(mut self, key: checkfu_core::capability::TokenKey) -> Self {
        self.token_key = Some(key);
        self
    }

    /// Shares live events and previews with the other sessions replicas
    /// through `fanout` (Redis pub/sub in production).
    pub async fn with_fanout(mut self, fanout: Arc<dyn checkfu_ephemeral::Fanout>) -> Result<Self> {
        self.hub = Hub::shared(fanout).await?;
        Ok(self)
    }

    pub fn with_outbox_wake(mut self, wake: Arc<Notify>) -> Self {
        self.outbox_wake = Some(wake);
        self
    }

    pub fn with_governance(mut self, transport: checkfu_proto::transport::Transport) -> Self {
        self.governance = Some(crate::upstream::Governance::new(transport));
        self
    }

    pub fn with_tool_sources(mut self, transport: checkfu_proto::transport::Transport) -> Self {
        self.tool_sources = Some(crate::upstream::ToolSources::new(transport));
        self
    }

    pub fn with_memory(mut self, transport: checkfu_proto::transport::Transport) -> Self {
        self.memory = Some(crate::upstream::Memory::new(transport));
        self
    }

    pub fn with_models(mut self, transport: checkfu_proto::transport::Transport) -> Self {
        self.models = Some(crate::upstream::Models::new(transport));
        self
    }

    pub fn with_lease_ms(mut self, ms: i64) -> Self {
        self.lease_ms = ms;
        self
    }

    /// A published agent version, from memory when seen before.
    pub(crate) async fn pinned_version(&self, agent_id: &AgentId, version: i64) -> Result<Option<AgentVersion>> {
        let key = (agent_id.to_string(), version);
        if let Some(v) = self.versions.get(&key) {
            return Ok(Some(v));
        }
        let found = self.store.get_agent_version(agent_id, version).await?;
        if let Some(v) = &found {
            self.versions.insert(key, v.clone());
        }
        Ok(found)
    }

    /// Readiness: the store answers.
    pub async fn ready(&self) -> bool {
        self.store.get_session(&SessionId::mint()).await.is_ok()
    }

    /// Embedded start-up: the previous process's runner is gone, so its
    /// leases are released at once instead of waiting for them to expire.
    pub async fn release_orphaned_leases(&self) -> Result<u64> {
        let n = self.store.expire_all_leases().await?;
        if n > 0 {
            self.work.notify_waiters();
        }
        Ok(n)
    }

    pub async fn session(&self, id: &str) -> Result<Session> {
        let id = SessionId::parse("id", id)?;
        self.store.get_session(&id).await?.ok_or_else(|| Error::not_found("session", &id))
    }

    pub async fn list_sessions(&self, f: &SessionFilter, page: &PageRequest) -> Result<Vec<Session>> {
        if !f.status.is_empty() {
            SessionStatus::parse("status", &f.status)?;
        }
        self.store.list_sessions(f, page).await
    }

    pub async fn create_session(&self, req: NewSession) -> Result<(Session, Vec<Event>)> {
        let deployment_id = DeploymentId::parse("agent_deployment_id", &req.deployment_id)?;
        let principal_id = PrincipalId::parse("principal_id", &req.principal_id)?;
        let id = match &req.id {
            Some(id) => {
                let id = SessionId::parse("session_id", id)?;
                if let Some(existing) = self.existing(&id, &principal_id).await? {
                    return Ok((existing, vec![]));
                }
                id
            }
            None => SessionId::mint(),
        };
        check_title(&req.title)?;
        check_vault_ids(&req.connection_vault_ids)?;
        let metadata = if req.metadata.is_null() { json!({}) } else { req.metadata.clone() };
        check_session_metadata(&metadata)?;
        if req.initial_events.len() > MAX_INITIAL_EVENTS {
            return Err(Error::invalid_field("initial_events", "at most 50 initial events"));
        }
        for (i, e) in req.initial_events.iter().enumerate() {
            if e.event_type == EventType::UserDefineOutcome && i != 0 {
                return Err(Error::invalid_field("initial_events", "user.define_outcome may only be the first initial event"));
            }
        }
        let dep = match req.deployment_revision {
            None => self.store.get_deployment(&deployment_id).await?,
            Some(r) => self.store.get_deployment_at(&deployment_id, r).await?,
        }
        .ok_or_else(|| Error::not_found("agent_deployment", &deployment_id))?;
        let version = self
            .pinned_version(&dep.agent_id, dep.pins.agent_version)
            .await?
            .ok_or_else(|| Error::internal("the deployment pins an agent version that does not exist"))?;
        let sel =
            selection(&version.definition, &dep.pins.release_sha256, req.tools.as_ref(), req.skills.as_ref(), req.instructions.as_deref())?;
        let now = now_ms();
        let budget = match &req.budget {
            Some((limit, metric)) => Some(crate::model::Budget::new(*limit, metric, now, "budget.")?),
            None => None,
        };
        let session = Session {
            id,
            environment_id: dep.environment_id.clone(),
            agent_id: dep.agent_id.clone(),
            deployment_id: dep.id.clone(),
            deployment_revision: dep.revision,
            principal_id,
            status: SessionStatus::Idle,
            stop_reason: None,
            title: req.title.clone(),
            metadata,
            budget,
            usage: Usage::default(),
            selection: sel,
            pins: dep.pins.clone(),
            last_seq: 0,
            last_user_message_seq: 0,
            outcome: None,
            threads: vec![],
            connection_vault_ids: req.connection_vault_ids.clone(),
            created_ms: now,
            updated_ms: now,
            version: 1,
        };
        let mut d = Draft::new(session, None, now);
        d.push(
            EventType::SessionCreated,
            None,
            crate::input::system(),
            json!({"kind": "principal", "id": req.principal_id}),
            json!({"agent_deployment_id": dep.id, "deployment_revision": dep.revision, "principal_id": req.principal_id}),
        );
        for e in &req.initial_events {
            d.apply(e)?;
        }
        // The Session holds its copies of the Files before any Run can start.
        let mut blocks = vec![];
        for (i, r) in req.resources.iter().enumerate() {
            blocks.push(FileBlock { file_id: checkfu_core::id::FileId::parse(&format!("resources[{i}].file_id"), r)?, image: false });
        }
        for e in req.initial_events.iter().filter(|e| e.event_type == EventType::UserMessage) {
            blocks.extend(file_blocks(&e.payload["content"])?);
        }
        let files = self.files_for(&d.session.environment_id, &blocks).await?;
        self.give_files(&d.session.id, &files).await?;
        // Mounts are pinned (and their access checked) before the Session
        // exists, so its first Run always finds them.
        let mounts = self.pin_mounts(&d.session.id, &d.session.environment_id, &d.session.principal_id, req.memory.clone()).await?;
        self.store.insert_mounts(&d.session.id, &mounts).await?;
        let events = match self.store.insert_session(&d.session, &d.events, &d.runs).await {
            Ok(events) => events,
            // A create with the caller's id that raced another: the first won.
            Err(e) if req.id.is_some() => match self.existing(&d.session.id, &d.session.principal_id).await? {
                Some(existing) => return Ok((existing, vec![])),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        let mut session = d.session;
        session.last_seq = events.len() as i64;
        self.remember(session.clone(), d.run.clone(), vec![]);
        self.after_commit(&session.id, &events, queues(&d.runs));
        // A worker attaches as soon as it exists (its Runs keep it queued).
        if let Err(e) = self.ensure_work(&session).await {
            tracing::warn!(error = %e, session_id = %session.id, "queueing the work item failed; the first tool call queues it");
        }
        Ok((session, events))
    }

    /// The Session a caller-minted id already names, if it is `principal`'s
    /// (another's → 409).
    async fn existing(&self, id: &SessionId, principal: &PrincipalId) -> Result<Option<Session>> {
        match self.store.get_session(id).await? {
            Some(s) if &s.principal_id == principal => Ok(Some(s)),
            Some(_) => Err(Error::conflict(format!("session {id} already exists"))),
            None => Ok(None),
        }
    }

    /// Publishes committed events and wakes runners when work appeared.
    pub(crate) fn after_commit(&self, session_id: &str, events: &[Event], queued: bool) {
        if let Some(w) = &self.outbox_wake {
            w.notify_one();
        }
        for e in events {
            self.hub.publish(session_id, Item::Event(e.clone()));
        }
        if events.iter().any(|e| e.event_type == EventType::OutcomeEvaluationStarted.as_str()) {
            self.spawn_grading(session_id);
        }
        if queued {
            self.work.notify_waiters();
        }
    }

    /// Reads the Session, lets `decide` change it, and commits the result;
    /// retried from a fresh read when another writer got there first.
    ///
    /// A Run the change admits goes straight to a claim waiting on this
    /// replica, if there is one (`handoff.rs`).
    pub(crate) async fn transact<T>(
        &self,
        session_id: &SessionId,
        decide: impl Fn(&mut Draft) -> Result<T>,
    ) -> Result<(T, Session, Vec<Event>)> {
        // Kept across retries; dropped unused, its claim looks again.
        let mut handing: Option<Waiting> = None;
        for attempt in 0..COMMIT_ATTEMPTS {
            let cached = if attempt == 0 { self.snapshots.get(session_id) } else { None };
            let (session, run, child_runs) = match cached {
                Some(snapshot) => snapshot,
                None => {
                    let session = self.session(session_id).await?;
                    let children = if session.threads.is_empty() { vec![] } else { self.store.child_runs(session_id).await? };
                    (session, self.store.active_run(session_id).await?, children)
                }
            };
            let expected_version = session.version;
            let outcome_before = session.outcome.clone();
            let mut d = Draft::new(session, run, now_ms());
            d.child_runs = child_runs;
            let out = decide(&mut d);
            d.unfocus();
            let out = out?;
            if d.events.is_empty() && d.runs.is_empty() {
                return Ok((out, d.session, vec![]));
            }
            let handed = self.claim_for_waiting(&mut d, &mut handing);
            d.session.updated_ms = d.now_ms;
            let active = (d.run.clone(), d.child_runs.clone());
            let outcome_changed = d.session.outcome != outcome_before;
            let change = Change {
                expected_version,
                session: d.session,
                events: d.events,
                runs: d.runs,
                claim_guard: d.claim_guard,
                flush: d.flush,
                outcome_changed,
            };
            let queued = queues(&change.runs);
            if let Some((session, events)) = self.store.commit(change).await? {
                self.remember(session.clone(), active.0, active.1);
                self.after_commit(session_id, &events, queued);
                if let (Some(to), Some(run)) = (handing.take(), handed) {
                    self.deliver(to, session.clone(), run);
                }
                return Ok((out, session, events));
            }
            self.snapshots.remove(session_id);
            tokio::task::yield_now().await;
        }
        Err(Error::unavailable("the session is too busy to change right now; retry"))
    }

    /// Claims a Run the draft admits for the oldest claim waiting here.
    fn claim_for_waiting(&self, d: &mut Draft, handing: &mut Option<Waiting>) -> Option<Run> {
        let admitted = d.admitted.clone()?;
        let placement = d.run.iter().chain(&d.child_runs).find(|r| r.id == admitted && r.status == RunStatus::Queued)?.placement.clone();
        if handing.is_none() {
            *handing = self.parked.take(&placement);
        }
        let runner_id = handing.as_ref()?.runner_id.clone();
        if d.owner_other_than(&runner_id, &admitted) {
            return None;
        }
        d.focus_run(&admitted);
        let run = d.claim_run(&runner_id, self.lease_ms);
        d.unfocus();
        run
    }

    /// The active Run of a recently changed Session, as last committed here.
    pub(crate) fn cached_active_run(&self, session_id: &str) -> Option<Run> {
        self.snapshots.get(session_id).and_then(|(_, run, _)| run)
    }

    /// A recently changed Session's active Run `run_id` (of any thread), as
    /// last committed here.
    pub(crate) fn cached_run(&self, session_id: &str, run_id: &RunId) -> Option<Run> {
        let (_, run, children) = self.snapshots.get(session_id)?;
        run.into_iter().chain(children).find(|r| &r.id == run_id)
    }

    /// A recently changed Session and its primary's active Run, as last
    /// committed here.
    pub(crate) fn cached_state(&self, session_id: &str) -> Option<(Session, Option<Run>)> {
        self.snapshots.get(session_id).map(|(s, run, _)| (s, run))
    }

    fn remember(&self, session: Session, run: Option<Run>, child_runs: Vec<Run>) {
        self.snapshots.insert(session.id.clone(), (session, run, child_runs));
    }

    /// Appends one user event. Returns the persisted event and whether it
    /// was a replay of an identical settle event accepted earlier.
    pub async fn append_user_event(&self, session_id: &str, input: Input) -> Result<(Event, bool)> {
        let session_id = &SessionId::parse("id", session_id)?;
        if let Some(first) = self.duplicate_settle(session_id, &input).await? {
            return Ok((first, true));
        }
        if input.event_type == EventType::UserToolConfirmation
            && let Some(e) = self.confirm_in_session(session_id, &input).await?
        {
            return Ok((e, false));
        }
        if input.event_type == EventType::UserMessage {
            let blocks = file_blocks(&input.payload["content"])?;
            if !blocks.is_empty() {
                let s = self.session(session_id).await?;
                let files = self.files_for(&s.environment_id, &blocks).await?;
                self.give_files(&s.id, &files).await?;
            }
        }
        let ((id, dropped), _, events) = self
            .transact(session_id, |d| {
                let before = d.session.all_waiting_approvals();
                let id = d.apply(&input)?;
                d.unfocus();
                let after = d.session.all_waiting_approvals();
                Ok((id, before.into_iter().filter(|a| !after.contains(a)).collect::<Vec<_>>()))
            })
            .await?;
        // An interrupt ended the wait: nobody should approve those calls now.
        self.withdraw_approvals(&dropped, &input.authored_by).await;
        let e = events.into_iter().find(|e| e.id == id).ok_or_else(|| Error::internal("appended event missing from the commit"))?;
        Ok((e, false))
    }

    /// An exact duplicate of an accepted settle event returns the first one.
    async fn duplicate_settle(&self, session_id: &SessionId, input: &Input) -> Result<Option<Event>> {
        let key = match input.event_type {
            EventType::UserToolConfirmation => "tool_use_id",
            EventType::UserCustomToolResult => "custom_tool_use_id",
            _ => return Ok(None),
        };
        let id = input.payload.get(key).cloned().unwrap_or(Value::Null);
        // Threads may reuse a tool use id: only answers in the thread the
        // input names (any, when it names none) are its replays.
        let primary = crate::threads::primary_of(session_id);
        let named = input.thread_id.as_deref().map(|t| (t != primary).then(|| t.to_string()));
        // An accepted answer ends its wait: while one is open, this answers it.
        let waiting = self
            .session(session_id.as_str())
            .await?
            .thread_waits()
            .into_iter()
            .any(|(t, ids)| named.as_ref().is_none_or(|n| n == &t) && ids.iter().any(|w| Some(w.as_str()) == id.as_str()));
        if waiting {
            return Ok(None);
        }
        let earlier = self.store.list_events(session_id, &View::All, 0, i64::MAX, &[input.event_type.as_str().to_string()]).await?;
        let mut same: Vec<Event> =
            earlier.into_iter().filter(|e| e.payload.get(key) == Some(&id) && named.as_ref().is_none_or(|t| &e.thread_id == t)).collect();
        if let Some(i) = same.iter().position(|e| e.payload == input.payload) {
            return Ok(Some(same.swap_remove(i)));
        }
        match same.first() {
            Some(first) => Err(Error::conflict(format!("a different {} for {id} was already accepted", input.event_type))
                .with_details(json!({"event_id": first.id}))),
            None => Ok(None),
        }
    }

    pub async fn archive(&self, session_id: &str, actor: &str) -> Result<Session> {
        let session_id = SessionId::parse("id", session_id)?;
        let caused_by = json!({"kind": "principal", "id": actor});
        let (pending, s, _) = self
            .transact(&session_id, |d| {
                if d.session.status == SessionStatus::Terminated {
                    return Ok(vec![]);
                }
                let pending = d.session.all_waiting_approvals();
                d.archive_outcome(caused_by.clone());
                d.terminate_children(caused_by.clone());
                d.terminate(caused_by.clone());
                Ok(pending)
            })
            .await?;
        // Nobody should approve calls of a Session that is gone.
        self.withdraw_approvals(&pending, actor).await;
        if let Err(e) = self.stop_session_work(&s.id).await {
            tracing::warn!(error = %e, session_id = %s.id, "stopping the work item failed; its holder sees the Session terminated");
        }
        Ok(s)
    }

    /// Changes an idle Session's tool/skill selection, narrowing only; the
    /// caller has re-checked the principal's current permissions.
    pub async fn update_selection(
        &self,
        session_id: &str,
        tools: Option<Vec<String>>,
        skills: Option<Vec<String>>,
        actor: &str,
    ) -> Result<Session> {
        let current = self.session(session_id).await?;
        let version = self
            .pinned_version(&current.agent_id, current.pins.agent_version)
            .await?
            .ok_or_else(|| Error::internal("the session pins an agent version that does not exist"))?;
        let extra = current
            .selection
            .instructions
            .strip_prefix(version.definition.instructions.as_str())
            .map(|x| x.trim_start_matches("\n\n").to_string());
        let caused_by = json!({"kind": "principal", "id": actor});
        let ((), s, _) = self
            .transact(&current.id, |d| {
                if d.session.status != SessionStatus::Idle {
                    return Err(Error::conflict("the selection can only change while the session is idle"));
                }
                let tools = tools.clone().or_else(|| Some(d.session.selection.tools.clone()));
                let skills = skills.clone().or_else(|| Some(d.session.selection.skills.clone()));
                let next =
                    selection(&version.definition, &d.session.pins.release_sha256, tools.as_ref(), skills.as_ref(), extra.as_deref())?;
                let before = d.session.selection.release_sha256.clone();
                let payload = json!({
                    "tools": next.tools,
                    "skills": next.skills,
                    "release_sha256_before": before,
                    "release_sha256_after": next.release_sha256,
                });
                d.session.selection = next;
                d.push(EventType::SessionUpdated, None, Value::String(actor.to_string()), caused_by.clone(), payload);
                Ok(())
            })
            .await?;
        Ok(s)
    }

    /// Changes a Session's title or metadata (each kept when `None`),
    /// recorded as `session.updated` by `actor`.
    pub async fn update_session(&self, session_id: &str, title: Option<String>, metadata: Option<Value>, actor: &str) -> Result<Session> {
        let id = SessionId::parse("id", session_id)?;
        if let Some(t) = &title {
            check_title(t)?;
        }
        if let Some(m) = &metadata {
            check_session_metadata(m)?;
        }
        let caused_by = json!({"kind": "principal", "id": actor});
        let ((), s, _) = self
            .transact(&id, |d| {
                if d.session.status == SessionStatus::Terminated {
                    return Err(Error::conflict("the session is terminated"));
                }
                let mut payload = json!({});
                if let Some(t) = &title {
                    d.session.title = t.clone();
                    payload["title"] = json!(t);
                }
                if let Some(m) = &metadata {
                    d.session.metadata = m.clone();
                    payload["metadata"] = m.clone();
                }
                d.push(EventType::SessionUpdated, None, Value::String(actor.to_string()), caused_by.clone(), payload);
                Ok(())
            })
            .await?;
        Ok(s)
    }

    /// A page of one view of the log: `view` is `""` (the primary view),
    /// `"all"` or a thread's id (api.md §15.2).
    pub async fn list_events(
        &self,
        session_id: &str,
        view: &str,
        after_seq: i64,
        limit: u32,
        types: &[String],
    ) -> Result<(Vec<Event>, bool)> {
        let s = self.session(session_id).await?;
        let view = match view {
            "" => View::Primary,
            "all" => View::All,
            t if t == crate::threads::primary_of(&s.id) => View::Primary,
            t if s.threads.iter().any(|c| c.id == t) => View::Child(t.to_string()),
            t => return Err(Error::not_found("session_thread", t)),
        };
        let session_id = s.id;
        if !(0..=1000).contains(&limit) {
            return Err(Error::invalid_field("limit", "limit must be between 1 and 1000"));
        }
        if after_seq < 0 {
            return Err(Error::invalid_field("after_seq", "after_seq must not be negative"));
        }
        let limit = if limit == 0 { 100 } else { i64::from(limit) };
        let mut rows = self.store.list_events(&session_id, &view, after_seq, limit + 1, types).await?;
        let more = rows.len() as i64 > limit;
        rows.truncate(limit as usize);
        Ok((rows, more))
    }

    /// Streams persisted events after `after_seq`, then live ones, with no gap
    /// and no duplicate; previews of `delta_types` are interleaved.
    pub async fn subscribe(&self, session_id: &str, after_seq: i64, delta_types: Vec<String>, out: mpsc::Sender<Item>) -> Result<()> {
        let feed = self.open_feed(session_id).await?;
        self.follow(feed, Some(after_seq), delta_types, out).await
    }

    /// Subscribes to a Session's live items on this replica. Previews are
    /// never replayed, so a stream's caller is answered only once this is
    /// done: a turn started after the answer shows all its previews.
    pub async fn open_feed(&self, session_id: &str) -> Result<Feed> {
        // The position is read before subscribing: every event committed
        // after the subscription is past it, so a live-only follower sends
        // each one. (Read after, it could already count an event the hub has
        // yet to deliver, and that event would be dropped as old.)
        let session = self.session(session_id).await?;
        let rx = self.hub.subscribe(&session.id);
        Ok(Feed { session_id: session.id, opened_at: session.last_seq, rx })
    }

    /// Sends `feed`'s items to `out`: persisted events after `after_seq`
    /// first (`None`: only events committed after the feed opened), then
    /// live ones, with no gap and no duplicate; previews of `delta_types`
    /// interleaved.
    pub async fn follow(&self, feed: Feed, after_seq: Option<i64>, delta_types: Vec<String>, out: mpsc::Sender<Item>) -> Result<()> {
        let Feed { session_id, opened_at, mut rx } = feed;
        let session_id = &session_id;
        // Subscribed first, then the log is replayed: nothing falls between.
        let mut cursor = match after_seq {
            Some(after) => self.replay(session_id, after.max(0), &out).await?,
            None => opened_at,
        };
        loop {
            let item = tokio::select! {
                r = rx.recv() => r,
                () = out.closed() => return Ok(()),
            };
            match item {
                Ok(Item::Event(e)) => {
                    if e.seq <= cursor {
                        continue;
                    }
                    if e.seq > cursor + 1 {
                        cursor = self.replay(session_id, cursor, &out).await?;
                        if e.seq <= cursor {
                            continue;
                        }
                    }
                    cursor = e.seq;
                    if out.send(Item::Event(e)).await.is_err() {
                        return Ok(());
                    }
                }
                Ok(Item::Delta(d)) => {
                    if delta_types.contains(&d.event_type) && out.send(Item::Delta(d)).await.is_err() {
                        return Ok(());
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    cursor = self.replay(session_id, cursor, &out).await?;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
            }
        }
    }

    async fn replay(&self, session_id: &SessionId, mut cursor: i64, out: &mpsc::Sender<Item>) -> Result<i64> {
        loop {
            let batch = self.store.list_events(session_id, &View::All, cursor, 500, &[]).await?;
            let n = batch.len();
            for e in batch {
                cursor = e.seq;
                if out.send(Item::Event(e)).await.is_err() {
                    return Ok(cursor);
                }
            }
            if n < 500 {
                return Ok(cursor);
            }
        }
    }

    pub async fn run(&self, id: &str) -> Result<Run> {
        let id = RunId::parse("id", id)?;
        self.store.get_run(&id).await?.ok_or_else(|| Error::not_found("run", &id))
    }

    pub async fn list_runs(&self, session_id: &str, page: &PageRequest) -> Result<Vec<Run>> {
        let session_id = self.session(session_id).await?.id;
        self.store.list_runs(&session_id, page).await
    }
}

/// A Session's live items on this replica, from the moment it was opened
/// ([`SessionsService::open_feed`]).
pub struct Feed {
    session_id: SessionId,
    /// The Session's last seq just before the subscription.
    opened_at: i64,
    rx: tokio::sync::broadcast::Receiver<Item>,
}

/// Whether a write leaves a Run waiting for a runner.
/// Runs `sweep` every `every` until `stop`; a failed sweep is logged and
/// tried again next time.
pub(crate) async fn every<F, Fut, T>(every: std::time::Duration, stop: tokio_util::sync::CancellationToken, what: &str, sweep: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = sweep().await {
            tracing::warn!(error = %e, "{what} sweep failed; retrying");
        }
    }
}

fn queues(runs: &[Run]) -> bool {
    runs.iter().any(|r| r.status == RunStatus::Queued)
}

/// Vaults one Session may name.
const MAX_SESSION_VAULTS: usize = 20;

fn check_vault_ids(ids: &[String]) -> Result<()> {
    if ids.len() > MAX_SESSION_VAULTS {
        return Err(Error::invalid_field("connection_vault_ids", format!("at most {MAX_SESSION_VAULTS} connection vaults")));
    }
    for (i, id) in ids.iter().enumerate() {
        checkfu_core::id::VaultId::check(&format!("connection_vault_ids[{i}]"), id)?;
    }
    Ok(())
}

fn check_title(title: &str) -> Result<()> {
    if title.len() > MAX_TITLE {
        return Err(Error::invalid_field("title", "title is limited to 500 bytes"));
    }
    Ok(())
}

fn check_session_metadata(metadata: &Value) -> Result<()> {
    if !metadata.is_object() || metadata.to_string().len() > MAX_METADATA_BYTES {
        return Err(Error::invalid_field("metadata", "metadata must be an object of at most 16 KiB"));
    }
    Ok(())
}
