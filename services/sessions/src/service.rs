//! The sessions service's composition, and a Session's own life: creation,
//! input, selection, title and metadata, archiving. Every state change is a
//! [`Draft`] decided from a fresh read and committed atomically with its
//! events by the log (`log/commit.rs`); a lost race is retried from a new
//! read.

use crate::approvals::Approvals;
use crate::budget::Budgets;
use crate::catalog::Catalog;
use crate::draft::Draft;
use crate::input::Input;
use crate::log::Log;
use crate::model::*;
use crate::outcomes::Outcomes;
use crate::runs::Runs;
use crate::store::{SessionFilter, SessionsStore, View};
use crate::threads::Threads;
use crate::uploads::Uploads;
use checkfu_core::events::EventType;
use checkfu_core::id::{DeploymentId, PrincipalId, RunId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result, sha256_hex};
use serde_json::{Value, json};
use std::sync::Arc;

pub use crate::log::DEFAULT_LEASE_MS;
const MAX_TITLE: usize = 500;
const MAX_METADATA_BYTES: usize = 16 * 1024;

/// The sessions service: its components, and the Session's own life
/// (creation, input, selection, archiving), which is the one thing that
/// uses several of them. Below: the log, the catalog, the uploads and the
/// Runs; above them: threads, outcomes, approvals and budgets. Each holds
/// only what it needs, and none knows this struct. Built by
/// [`Builder`](crate::builder::Builder).
#[derive(Clone)]
pub struct SessionsService {
    pub(crate) store: Arc<dyn SessionsStore>,
    /// The Sessions' rows and event log, committed and streamed.
    pub log: Log,
    /// Agents, their versions, SandboxProfiles and Deployments.
    pub catalog: Catalog,
    /// Files and skills people upload, and what Sessions are given of them.
    pub uploads: Uploads,
    /// Runs: claims and leases, the runner protocol, work items.
    pub runs: Runs,
    /// SessionThreads and multiagent's platform tools.
    pub threads: Threads,
    /// Outcomes' gradings.
    pub outcomes: Outcomes,
    /// The Session's side of ActionApprovals.
    pub approvals: Approvals,
    /// Session-scoped Budgets.
    pub budgets: Budgets,
}

/// What a create made: the Session, the events it began with and the
/// memory mounts it pinned — or, when a caller-minted id named a Session
/// that exists, that Session with no events (and no mounts named here).
#[derive(Debug)]
pub struct Created {
    pub session: Session,
    pub events: Vec<Event>,
    pub mounts: Vec<MemoryMount>,
}

impl Created {
    fn existing(session: Session) -> Created {
        Created { session, events: vec![], mounts: vec![] }
    }
}

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
    /// The screen every `agent.message` is held for (an Automation's
    /// child, api.md §18.8).
    pub delivery_screen: Option<checkfu_core::delivery_screen::DeliveryScreen>,
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
    /// Readiness: the store answers.
    pub async fn ready(&self) -> bool {
        self.store.get_session(&SessionId::mint()).await.is_ok()
    }

    pub async fn list_sessions(&self, f: &SessionFilter, page: &PageRequest) -> Result<Vec<Session>> {
        if !f.status.is_empty() {
            SessionStatus::parse("status", &f.status)?;
        }
        self.store.list_sessions(f, page).await
    }

    pub async fn create_session(&self, req: NewSession) -> Result<Created> {
        let deployment_id = DeploymentId::parse("agent_deployment_id", &req.deployment_id)?;
        let principal_id = PrincipalId::parse("principal_id", &req.principal_id)?;
        let id = match &req.id {
            Some(id) => {
                let id = SessionId::parse("session_id", id)?;
                if let Some(existing) = self.existing(&id, &principal_id).await? {
                    return Ok(Created::existing(existing));
                }
                id
            }
            None => SessionId::mint(),
        };
        check_title(&req.title)?;
        check_vault_ids(&req.connection_vault_ids)?;
        if let Some(screen) = &req.delivery_screen {
            screen.check("delivery_screen")?;
        }
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
            Some(r) => self.catalog.deployment_at(&deployment_id, r).await?,
        }
        .ok_or_else(|| Error::not_found("agent_deployment", &deployment_id))?;
        let version = self
            .catalog
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
            delivery_screen: req.delivery_screen.clone(),
            created_ms: now,
            updated_ms: now,
            version: 1,
        };
        let mut d = Draft::new(session, None, now);
        d.push(
            EventType::SessionCreated,
            None,
            crate::draft::system(),
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
        let files = self.uploads.files_for(&d.session.environment_id, &blocks).await?;
        self.uploads.give_files(&d.session.id, &files).await?;
        // Mounts are pinned (and their access checked) before the Session
        // exists, so its first Run always finds them.
        let mounts = self.runs.pin_mounts(&d.session.id, &d.session.environment_id, &d.session.principal_id, req.memory.clone()).await?;
        self.store.insert_mounts(&d.session.id, &mounts).await?;
        let events = match self.store.insert_session(&d.session, &d.events, &d.runs).await {
            Ok(events) => events,
            // A create with the caller's id that raced another: the first won.
            Err(e) if req.id.is_some() => match self.existing(&d.session.id, &d.session.principal_id).await? {
                Some(existing) => return Ok(Created::existing(existing)),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        let mut session = d.session;
        session.last_seq = events.len() as i64;
        self.log.created(&session, d.run.clone(), &events, &d.runs);
        // A worker attaches as soon as it exists (its Runs keep it queued).
        if let Err(e) = self.runs.ensure_work(&session).await {
            tracing::warn!(error = %e, session_id = %session.id, "queueing the work item failed; the first tool call queues it");
        }
        Ok(Created { session, events, mounts })
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

    /// Appends one user event. Returns the persisted event and whether it
    /// was a replay of an identical settle event accepted earlier.
    pub async fn append_user_event(&self, session_id: &str, input: Input) -> Result<(Event, bool)> {
        let session_id = &SessionId::parse("id", session_id)?;
        if let Some(first) = self.duplicate_settle(session_id, &input).await? {
            return Ok((first, true));
        }
        if input.event_type == EventType::UserToolConfirmation
            && let Some(e) = self.approvals.confirm_in_session(session_id, &input).await?
        {
            return Ok((e, false));
        }
        if input.event_type == EventType::UserMessage {
            let blocks = file_blocks(&input.payload["content"])?;
            if !blocks.is_empty() {
                let s = self.log.session(session_id).await?;
                let files = self.uploads.files_for(&s.environment_id, &blocks).await?;
                self.uploads.give_files(&s.id, &files).await?;
            }
        }
        let ((id, dropped), _, events) = self
            .log
            .transact(session_id, |d| {
                let before = d.session.all_waiting_approvals();
                let id = d.apply(&input)?;
                d.unfocus();
                let after = d.session.all_waiting_approvals();
                Ok((id, before.into_iter().filter(|a| !after.contains(a)).collect::<Vec<_>>()))
            })
            .await?;
        // An interrupt ended the wait: nobody should approve those calls now.
        self.approvals.withdraw_approvals(&dropped, &input.authored_by).await;
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
        let primary = crate::model::primary_of(session_id);
        let named = input.thread_id.as_deref().map(|t| (t != primary).then(|| t.to_string()));
        // An accepted answer ends its wait: while one is open, this answers it.
        let waiting = self
            .log
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
            .log
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
        self.approvals.withdraw_approvals(&pending, actor).await;
        if let Err(e) = self.runs.stop_session_work(&s.id).await {
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
        let current = self.log.session(session_id).await?;
        let version = self
            .catalog
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
            .log
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
            .log
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

    pub async fn run(&self, id: &str) -> Result<Run> {
        self.log.run(&RunId::parse("id", id)?).await
    }

    pub async fn list_runs(&self, session_id: &str, page: &PageRequest) -> Result<Vec<Run>> {
        let session_id = self.log.session(session_id).await?.id;
        self.store.list_runs(&session_id, page).await
    }
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
