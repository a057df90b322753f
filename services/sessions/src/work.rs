//! The Environment Work API (api.md §17.13) on the runner core's claims,
//! leases and fencing: an external_tools Session loops on the managed
//! plane, and its sandbox tool calls wait for the holder of its work item.
//!
//! Each Session has at most one live item. A poll delivers the oldest
//! queued item (or one delivered but not acknowledged in time) under a new
//! generation with a new token; the token is the holder's capability for
//! that Session and delivery only. Heartbeats are compare-and-set on the
//! last one, so two workers never both believe they hold it; a lease that
//! lapses puts the item back in the queue (`session.status_rescheduled`)
//! and the old token's writes are refused from then on.

use crate::draft::system;
use crate::model::*;
use crate::runs::Runs;
use crate::store::View;
use checkfu_core::events::EventType;
use checkfu_core::id::{SandboxProfileId, SessionId, WorkId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::{now_ms, rfc3339};
use checkfu_core::{Code, Error, Result, sha256_hex};
use serde_json::{Value, json};
use std::time::Duration;

/// The longest a poll waits for work (CMA caps `block_ms` at 999).
const MAX_BLOCK_MS: u32 = 999;
/// Bytes a tool result's content may hold.
const MAX_RESULT_BYTES: usize = 1024 * 1024;

/// Who acts on an item: a Runner of the pool, the bearer of a delivery's
/// token, or a manager the gateway checked.
enum Actor {
    /// A Runner of the pool (its id).
    Runner(String),
    /// The bearer of a delivery's token: its item and generation.
    Token {
        work_id: WorkId,
        generation: i64,
    },
    Manager,
}

impl Actor {
    /// A token acts only while its delivery holds the item (api.md
    /// §17.13: a stale generation → 409 `work_lease_superseded`).
    fn fence(&self, w: &Work) -> Result<()> {
        match self {
            Actor::Token { generation, .. } if !w.held_by(*generation) => Err(superseded()),
            _ => Ok(()),
        }
    }
}

/// What a work token lets its bearer do.
#[derive(Debug, Clone)]
pub struct WorkScope {
    pub item: Work,
    pub runner: Runner,
    pub generation: i64,
}

/// A heartbeat's answer.
#[derive(Debug)]
pub struct Beat {
    pub item: Work,
    pub lease_extended: bool,
}

fn superseded() -> Error {
    Error::conflict("this work item was delivered again or re-queued; this delivery's token no longer holds it")
        .with_reason("work_lease_superseded")
}

fn unknown_token() -> Error {
    Error::new(Code::InvalidKey, "the work token is unknown")
}

fn not_held() -> Error {
    Error::denied("this credential does not hold that work item").with_reason("work_not_held")
}

/// The pool a profile's Runners are paired into.
pub fn pool_of(profile_id: &str) -> String {
    format!("cma:{profile_id}")
}

/// `current_state` of a 412: the lease as the server holds it.
fn lease_state(w: &Work) -> Value {
    json!({"state": w.state.as_str(), "last_heartbeat": w.heartbeat_ms.map(rfc3339), "ttl_seconds": w.ttl_seconds, "lease_extended": false})
}

fn heartbeat_refused(w: &Work, message: &str) -> Error {
    Error::new(Code::PreconditionFailed, message)
        .with_details(json!({"current_state": lease_state(w)}))
        .with_reason("heartbeat_precondition_failed")
}

impl Runs {
    /// Queues the Session's work item unless it has a live one (an
    /// external_tools Session only).
    pub async fn ensure_work(&self, s: &Session) -> Result<()> {
        if !matches!(s.pins.execution, Execution::ExternalTools { .. }) || s.status == SessionStatus::Terminated {
            return Ok(());
        }
        let fresh = Work::new(s.pins.sandbox_profile_id.clone(), s.environment_id.clone(), s.id.clone(), now_ms());
        let live = self.store.enqueue_work(&fresh).await?;
        if live.id == fresh.id {
            tracing::info!(work_id = %live.id, session_id = %s.id, "work item queued");
            self.work_queued.notify_waiters();
        }
        Ok(())
    }

    /// Stops the Session's live item (it ended).
    pub(crate) async fn stop_session_work(&self, session_id: &SessionId) -> Result<()> {
        let Some(w) = self.store.live_work(session_id).await? else { return Ok(()) };
        self.change_work(w, |w| {
            if w.state != WorkState::Stopped {
                w.stop(now_ms());
            }
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// The active Runner a credential names, if it serves `profile_id`.
    async fn pool_runner(&self, profile_id: &str, credential: &str) -> Result<Runner> {
        let runner = self.runners.authenticate(credential).await?;
        let profile = self.catalog.sandbox_profile(profile_id).await?;
        if runner.pool != pool_of(profile_id) || runner.environment_id != profile.environment_id {
            return Err(Error::denied("this Runner is not paired with that environment").with_reason("runner_not_in_pool"));
        }
        Ok(runner)
    }

    async fn actor(&self, profile_id: &str, credential: &str) -> Result<Actor> {
        if credential.is_empty() {
            return Ok(Actor::Manager);
        }
        if credential.starts_with(WORK_TOKEN_PREFIX) {
            let (item, generation, _) = self.token_item(credential).await?;
            return Ok(Actor::Token { work_id: item.id, generation });
        }
        Ok(Actor::Runner(self.pool_runner(profile_id, credential).await?.id.to_string()))
    }

    /// The item `work_id` of `profile_id`, and that `actor` may act on it.
    async fn held_item(&self, profile_id: &str, work_id: &str, credential: &str) -> Result<(Work, Actor)> {
        let actor = self.actor(profile_id, credential).await?;
        let w = self.work_of(profile_id, work_id).await?;
        let held = match &actor {
            Actor::Runner(r) => w.runner_id.as_deref() == Some(r.as_str()),
            Actor::Token { work_id, .. } => *work_id == w.id,
            Actor::Manager => true,
        };
        if !held {
            return Err(not_held());
        }
        Ok((w, actor))
    }

    /// A profile's item, or 404.
    pub async fn work_of(&self, profile_id: &str, work_id: &str) -> Result<Work> {
        let id = WorkId::parse("work_id", work_id)?;
        match self.store.get_work(&id).await? {
            Some(w) if w.profile_id.as_str() == profile_id => Ok(w),
            _ => Err(Error::not_found("work item", work_id)),
        }
    }

    /// Delivers the oldest claimable item to a Runner of the pool, waiting
    /// up to `block_ms` for one; `None` when there is none.
    pub async fn poll_work(
        &self,
        profile_id: &str,
        credential: &str,
        block_ms: u32,
        reclaim_older_than_ms: Option<i64>,
        worker_id: &str,
    ) -> Result<Option<(Work, String)>> {
        if block_ms > MAX_BLOCK_MS {
            return Err(Error::invalid_field("block_ms", "block_ms must be 1 to 999"));
        }
        let reclaim = reclaim_older_than_ms.unwrap_or(DEFAULT_RECLAIM_MS);
        if !(0..=3_600_000).contains(&reclaim) {
            return Err(Error::invalid_field("reclaim_older_than_ms", "reclaim_older_than_ms must be 0 to 3600000"));
        }
        let runner = self.pool_runner(profile_id, credential).await?;
        self.pollers.seen(profile_id, worker_id, now_ms());
        let deadline = tokio::time::Instant::now() + Duration::from_millis(u64::from(block_ms));
        loop {
            // Registered before looking, so an item queued meanwhile wakes it.
            let queued = self.work_queued.notified();
            self.sweep_work().await?;
            if let Some(found) = self.deliver_work(profile_id, &runner, reclaim).await? {
                return Ok(Some(found));
            }
            if tokio::time::timeout_at(deadline, queued).await.is_err() {
                return Ok(None);
            }
        }
    }

    async fn deliver_work(&self, profile_id: &str, runner: &Runner, reclaim_ms: i64) -> Result<Option<(Work, String)>> {
        let now = now_ms();
        for mut w in self.store.claimable_work(profile_id, now - reclaim_ms, 10).await? {
            let rev = w.rev;
            let token = checkfu_core::new_secret(WORK_TOKEN_PREFIX);
            w.rev += 1;
            w.generation += 1;
            w.runner_id = Some(runner.id.to_string());
            w.delivered_ms = Some(now);
            if self.store.deliver_work(&w, rev, &sha256_hex(&token)).await? {
                tracing::info!(work_id = %w.id, runner_id = %runner.id, generation = w.generation, "work item delivered");
                return Ok(Some((w, token)));
            }
        }
        Ok(None)
    }

    /// Writes `change` to the item with a compare-and-set, re-reading and
    /// re-deciding when another write came first.
    async fn change_work<T>(&self, mut w: Work, change: impl Fn(&mut Work) -> Result<T>) -> Result<(Work, T)> {
        for _ in 0..5 {
            let rev = w.rev;
            let out = change(&mut w)?;
            w.rev = rev + 1;
            if self.store.update_work(&w, rev).await? {
                return Ok((w, out));
            }
            w = self.store.get_work(&w.id).await?.ok_or_else(|| Error::not_found("work item", &w.id))?;
        }
        Err(Error::unavailable("the work item kept changing; try again"))
    }

    /// The holder acknowledges a delivery: the item is `starting`, its
    /// lease running.
    pub async fn ack_work(&self, profile_id: &str, work_id: &str, credential: &str) -> Result<Work> {
        let (w, actor) = self.held_item(profile_id, work_id, credential).await?;
        if matches!(actor, Actor::Manager) {
            return Err(Error::denied("only the worker the item was delivered to acknowledges it"));
        }
        let (w, ()) = self
            .change_work(w, |w| {
                actor.fence(w)?;
                if w.state != WorkState::Queued || w.delivered_ms.is_none() {
                    return Err(Error::conflict(format!("work item {} was already acknowledged ({})", w.id, w.state.as_str()))
                        .with_reason("work_already_acknowledged"));
                }
                let now = now_ms();
                w.state = WorkState::Starting;
                w.acked_ms = Some(now);
                w.lease_expires_ms = Some(now + w.ttl_seconds * 1000);
                Ok(())
            })
            .await?;
        Ok(w)
    }

    /// A heartbeat, compare-and-set on the last one: `NO_HEARTBEAT` first
    /// (the item becomes `active`), then the last answer's `last_heartbeat`.
    pub async fn heartbeat_work(
        &self,
        profile_id: &str,
        work_id: &str,
        credential: &str,
        expected: &str,
        desired_ttl_seconds: Option<i64>,
    ) -> Result<Beat> {
        let ttl = check_ttl(desired_ttl_seconds)?;
        let (w, actor) = self.held_item(profile_id, work_id, credential).await?;
        if matches!(actor, Actor::Manager) {
            return Err(Error::denied("only the holder of a work item heartbeats it"));
        }
        self.sweep_work().await?;
        let w = self.store.get_work(&w.id).await?.ok_or_else(|| Error::not_found("work item", work_id))?;
        let (w, extended) = self
            .change_work(w, |w| {
                // Stopping or stopped: the holder is told, not compared.
                if matches!(w.state, WorkState::Stopping | WorkState::Stopped) {
                    return Ok(false);
                }
                if actor.fence(w).is_err() {
                    return Err(heartbeat_refused(w, "the work item was delivered again or re-queued; this delivery no longer holds it"));
                }
                if w.state == WorkState::Queued {
                    return Err(heartbeat_refused(w, "the work item is not acknowledged by this worker"));
                }
                let matches = match w.heartbeat_ms {
                    None => expected == NO_HEARTBEAT,
                    Some(last) => expected == rfc3339(last),
                };
                if !matches {
                    return Err(heartbeat_refused(w, "expected_last_heartbeat does not match the stored heartbeat"));
                }
                let now = now_ms();
                // Each heartbeat's stamp differs from the one before.
                let stamp = w.heartbeat_ms.map_or(now, |last| now.max(last + 1));
                if w.state == WorkState::Starting {
                    w.state = WorkState::Active;
                    w.started_ms = Some(stamp);
                }
                w.heartbeat_ms = Some(stamp);
                w.ttl_seconds = ttl;
                w.lease_expires_ms = Some(now + ttl * 1000);
                Ok(true)
            })
            .await?;
        Ok(Beat { item: w, lease_extended: extended })
    }

    /// Stops an item: gracefully (`stopping`, the holder's next heartbeat
    /// says so) or at once (`force`, or nobody holds it).
    pub async fn stop_work(&self, profile_id: &str, work_id: &str, credential: &str, force: bool) -> Result<Work> {
        let (w, actor) = self.held_item(profile_id, work_id, credential).await?;
        let (w, ()) = self
            .change_work(w, |w| {
                actor.fence(w)?;
                let again = w.state == WorkState::Stopped || (w.state == WorkState::Stopping && !force);
                if again {
                    return Err(Error::conflict(format!("work item {} is already {}", w.id, w.state.as_str())).with_reason("work_stopped"));
                }
                let now = now_ms();
                w.stop_requested_ms.get_or_insert(now);
                if force || w.state == WorkState::Queued {
                    w.stop(now);
                } else {
                    w.state = WorkState::Stopping;
                }
                Ok(())
            })
            .await?;
        Ok(w)
    }

    /// Patches an item's metadata (a `null` value removes a key).
    pub async fn update_work_metadata(&self, profile_id: &str, work_id: &str, patch: &Value) -> Result<Work> {
        let w = self.work_of(profile_id, work_id).await?;
        let Some(patch) = patch.as_object() else {
            return Err(Error::invalid_field("metadata", "metadata must be an object"));
        };
        let (w, ()) = self
            .change_work(w, |w| {
                for (k, v) in patch {
                    match v {
                        Value::Null => {
                            w.metadata.remove(k);
                        }
                        Value::String(s) => {
                            w.metadata.insert(k.clone(), s.clone());
                        }
                        _ => return Err(Error::invalid_field(&format!("metadata.{k}"), "metadata values are strings or null")),
                    }
                }
                check_metadata("metadata", &w.metadata)
            })
            .await?;
        Ok(w)
    }

    pub async fn list_work(&self, profile_id: &str, credential: &str, page: &PageRequest) -> Result<Vec<Work>> {
        self.actor(profile_id, credential).await?;
        SandboxProfileId::check("environment_id", profile_id)?;
        self.store.list_work(profile_id, page).await
    }

    /// `(depth, pending, oldest queued, workers polling)`.
    pub async fn work_stats(&self, profile_id: &str) -> Result<(i64, i64, Option<i64>, i64)> {
        SandboxProfileId::check("environment_id", profile_id)?;
        let now = now_ms();
        let queued = self.store.claimable_work(profile_id, i64::MAX, 10_000).await?;
        let pending = queued.iter().filter(|w| w.delivered_ms.is_some()).count() as i64;
        let depth = queued.len() as i64 - pending;
        Ok((depth, pending, queued.iter().map(|w| w.created_ms).min(), self.pollers.count(profile_id, now)))
    }

    /// A token's item and delivery generation, with the Runner holding the
    /// item now (none while it is re-queued); refused (401) once unknown or
    /// that Runner is revoked.
    async fn token_item(&self, token: &str) -> Result<(Work, i64, Option<Runner>)> {
        if !token.starts_with(WORK_TOKEN_PREFIX) || token.len() > 200 {
            return Err(unknown_token());
        }
        let (id, generation) = self.store.work_token(&sha256_hex(token)).await?.ok_or_else(unknown_token)?;
        let item = self.store.get_work(&id).await?.ok_or_else(unknown_token)?;
        let Some(runner_id) = item.runner_id.clone() else {
            return Ok((item, generation, None));
        };
        let runner = self.runners.get(&runner_id).await.map_err(|_| unknown_token())?;
        if runner.status != RunnerStatus::Active {
            return Err(Error::new(Code::InvalidKey, "the Runner this work was delivered to is revoked"));
        }
        Ok((item, generation, Some(runner)))
    }

    /// What a work token lets its bearer do; refused once the item was
    /// delivered again, re-queued or stopped.
    pub async fn verify_work_token(&self, token: &str) -> Result<WorkScope> {
        let (item, generation, runner) = self.token_item(token).await?;
        // Re-queued after its lease lapsed: known, but no longer held.
        let Some(runner) = runner else {
            return Err(superseded());
        };
        Ok(WorkScope { item, runner, generation })
    }

    /// A `user.tool_result` from the item's holder, fenced by the token's
    /// delivery: a superseded token is refused (409), so a worker that lost
    /// its lease cannot answer for the one that holds it now.
    pub async fn send_tool_result(
        &self,
        token: &str,
        session_id: &str,
        tool_use_id: &str,
        content: Value,
        is_error: bool,
    ) -> Result<(Event, bool)> {
        let scope = self.verify_work_token(token).await?;
        if scope.item.session_id.as_str() != session_id {
            return Err(Error::denied("this work token is for another Session"));
        }
        if !scope.item.held_by(scope.generation) {
            return Err(superseded());
        }
        if !matches!(scope.item.state, WorkState::Starting | WorkState::Active | WorkState::Stopping) {
            return Err(Error::conflict("this work item is no longer held").with_reason("work_lease_superseded"));
        }
        check_result_content(&content)?;
        let payload = json!({"tool_use_id": tool_use_id, "content": content, "is_error": is_error});
        let sid = SessionId::parse("session_id", session_id)?;
        let types: Vec<String> = [EventType::AgentToolUse, EventType::AgentToolResult, EventType::PolicyDenied, EventType::UserToolResult]
            .iter()
            .map(|t| t.as_str().to_string())
            .collect();
        let log = self.store.list_events(&sid, &View::All, 0, i64::MAX, &types).await?;
        let of = |e: &&Event| e.payload.get("tool_use_id").and_then(Value::as_str) == Some(tool_use_id);
        let Some(used) = log.iter().filter(of).find(|e| e.event_type == EventType::AgentToolUse.as_str()) else {
            return Err(Error::conflict(format!("no tool use {tool_use_id:?} waits for the work holder")).with_reason("no_such_wait"));
        };
        if used.payload.get("external").and_then(Value::as_bool) != Some(true) {
            return Err(Error::conflict(format!("tool use {tool_use_id:?} is not run by the work holder")).with_reason("no_such_wait"));
        }
        if let Some(first) = log.iter().filter(of).find(|e| e.event_type == EventType::UserToolResult.as_str()) {
            if first.payload == payload {
                return Ok((first.clone(), true));
            }
            return Err(Error::conflict(format!("a different user.tool_result for {tool_use_id} was already accepted"))
                .with_details(json!({"event_id": first.id})));
        }
        if log.iter().filter(of).any(|e| e.event_type != EventType::AgentToolUse.as_str()) {
            return Err(Error::conflict(format!("tool use {tool_use_id:?} was already answered")).with_reason("no_such_wait"));
        }
        let thread = used.thread_id.clone();
        let author = Value::String(scope.runner.principal_id.to_string());
        let cause = json!({"kind": "runner", "id": scope.runner.id, "work_id": scope.item.id});
        let (id, _, events) = self
            .log
            .transact(&sid, |d| {
                if d.session.status == SessionStatus::Terminated {
                    return Err(Error::conflict("the session is terminated and accepts no events"));
                }
                d.flush = true;
                if thread.is_some() {
                    d.focus(thread.as_deref())?;
                }
                Ok(d.push(EventType::UserToolResult, None, author.clone(), cause.clone(), payload.clone()))
            })
            .await?;
        let e = events.into_iter().find(|e| e.id == id).ok_or_else(|| Error::internal("appended event missing from the commit"))?;
        Ok((e, false))
    }

    /// Puts items whose lease lapsed back in the queue, telling their
    /// Sessions (`session.status_rescheduled`); a lapsed `stopping` item
    /// just stops.
    pub async fn sweep_work(&self) -> Result<usize> {
        let mut n = 0;
        for w in self.store.lapsed_work(now_ms(), 50).await? {
            let stopping = w.state == WorkState::Stopping;
            let Ok((w, ())) = self
                .change_work(w, |w| {
                    if !w.lease_lapsed(now_ms()) {
                        return Err(Error::conflict("renewed meanwhile"));
                    }
                    if w.state == WorkState::Stopping {
                        w.stop(now_ms())
                    } else {
                        w.requeue()
                    }
                    Ok(())
                })
                .await
            else {
                continue;
            };
            n += 1;
            if stopping {
                continue;
            }
            tracing::info!(work_id = %w.id, session_id = %w.session_id, "work lease lapsed; queued again");
            self.work_queued.notify_waiters();
            let cause = json!({"kind": "work", "id": w.id});
            self.log
                .transact(&w.session_id, |d| {
                    if d.session.status == SessionStatus::Terminated {
                        return Ok(());
                    }
                    d.push(EventType::SessionStatusRescheduled, None, system(), cause.clone(), json!({"work_id": w.id}));
                    let (ty, payload) = match d.session.status {
                        SessionStatus::Idle => (EventType::SessionStatusIdle, json!({"stop_reason": d.session.stop_reason})),
                        _ => (EventType::SessionStatusRunning, json!({})),
                    };
                    d.push(ty, None, system(), cause.clone(), payload);
                    Ok(())
                })
                .await?;
        }
        Ok(n)
    }

    pub async fn run_work_sweeper(self, every: Duration, stop: tokio_util::sync::CancellationToken) {
        crate::sweeps::every(every, stop, "work", || self.sweep_work()).await
    }
}

/// A tool result's content: a string, or up to 100 content blocks, at most
/// 1 MiB in all.
fn check_result_content(content: &Value) -> Result<()> {
    let ok_shape = match content {
        Value::String(_) => true,
        Value::Array(blocks) => blocks.len() <= 100 && blocks.iter().all(|b| b.get("type").and_then(Value::as_str).is_some()),
        _ => false,
    };
    if !ok_shape {
        return Err(Error::invalid_field("content", "content must be a string or at most 100 content blocks"));
    }
    if content.to_string().len() > MAX_RESULT_BYTES {
        return Err(Error::new(Code::PayloadTooLarge, "a tool result is limited to 1 MiB"));
    }
    Ok(())
}
