//! Dreams (api.md §13.5): a curation pass over a store and some Sessions
//! whose output is a new store — copy-on-write, so inputs never change.
//! This file is the API's side (create, read, cancel, archive); `run.rs`
//! is the worker that carries a Dream out; `curate.rs` the deterministic
//! pass; `model.rs` the types.
//!
//! Access: creating or cancelling needs `manage` on the store's
//! Environment; reading needs `read` on the input store.

pub mod curate;
pub mod model;
pub mod run;

use crate::model::StoreStatus;
use crate::service::{MemoryService, archived};
use checkfu_core::id::{DreamId, MemoryStoreId, RoutingProfileId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;
use model::*;
use serde_json::json;

/// A Dream as asked for.
#[derive(Debug, Clone, Default)]
pub struct NewDream {
    pub memory_store_id: String,
    pub session_ids: Vec<String>,
    pub model_routing_profile_id: String,
    pub instructions: String,
    pub review: bool,
}

impl MemoryService {
    pub async fn create_dream(&self, n: NewDream, actor: &str) -> Result<Dream> {
        self.available()?;
        MemoryStoreId::check("memory_store_id", &n.memory_store_id)?;
        if n.session_ids.len() > MAX_SESSIONS {
            return Err(Error::invalid_field("session_ids", format!("a Dream reads at most {MAX_SESSIONS} Sessions")));
        }
        for (i, id) in n.session_ids.iter().enumerate() {
            SessionId::check(&format!("session_ids[{i}]"), id)?;
            if n.session_ids[..i].contains(id) {
                return Err(Error::invalid_field(&format!("session_ids[{i}]"), format!("{id} is listed twice")));
            }
        }
        if n.instructions.len() > MAX_INSTRUCTIONS_BYTES {
            return Err(Error::invalid_field("instructions", format!("instructions hold at most {MAX_INSTRUCTIONS_BYTES} bytes")));
        }
        let profile = Some(n.model_routing_profile_id).filter(|p| !p.is_empty());
        if let Some(p) = &profile {
            RoutingProfileId::check("model_routing_profile_id", p)?;
        }
        let store = self.store(&n.memory_store_id).await?;
        self.require_manage(actor, &store.environment_id).await?;
        if store.status == StoreStatus::Archived {
            return Err(archived(&store));
        }
        for (i, id) in n.session_ids.iter().enumerate() {
            let field = format!("session_ids[{i}]");
            let s = match self.sessions.clone().get_session(ss::GetByIdRequest { id: id.clone() }).await {
                Ok(s) => s.into_inner(),
                Err(e) if e.code() == tonic::Code::NotFound => {
                    return Err(Error::invalid_field(&field, format!("no Session {id}")));
                }
                Err(e) => return Err(e.into()),
            };
            if s.environment_id != store.environment_id.as_str() {
                return Err(Error::invalid_field(&field, format!("Session {id} belongs to another environment than the store")));
            }
            if s.status == "running" {
                return Err(Error::conflict(format!("Session {id} is running: dream over it once it settles"))
                    .with_reason("session_running")
                    .with_details(json!({"session_id": id})));
            }
        }
        if let Some(p) = &profile {
            let found = self.models.clone().get_routing_profile(mg::GetRoutingProfileRequest { id: p.clone() }).await;
            let ok = match found {
                Ok(r) => r.into_inner().environment_id == store.environment_id.as_str(),
                Err(e) if e.code() == tonic::Code::NotFound => false,
                Err(e) => return Err(e.into()),
            };
            if !ok {
                return Err(Error::invalid_field(
                    "model_routing_profile_id",
                    format!("no model routing profile {p} in the store's environment"),
                ));
            }
        }
        let now = now_ms();
        let d = Dream {
            id: DreamId::mint().to_string(),
            environment_id: store.environment_id.to_string(),
            status: DreamStatus::Pending,
            mode: if profile.is_some() { DreamMode::Model } else { DreamMode::Deterministic },
            input_store_id: store.id.to_string(),
            input_store_version: store.head_version,
            session_ids: n.session_ids,
            routing_profile_id: profile,
            instructions: n.instructions,
            review: n.review,
            output_store_id: MemoryStoreId::mint().to_string(),
            output_proposal_id: None,
            stats: DreamStats::default(),
            usage: DreamUsage::default(),
            error: None,
            created_by: actor.into(),
            created_ms: now,
            started_ms: 0,
            ended_ms: 0,
            archived_ms: 0,
            lease_holder: String::new(),
            lease_expires_ms: 0,
            version: 1,
        };
        self.db.insert_dream(&d).await?;
        self.audit(actor, "dream.created", &d.input_store_id, json!({"dream_id": d.id, "mode": d.mode, "session_ids": d.session_ids}))
            .await;
        self.dreams_wake.notify_one();
        Ok(d)
    }

    async fn dream(&self, id: &str) -> Result<Dream> {
        DreamId::check("id", id)?;
        self.db.get_dream(id).await?.ok_or_else(|| Error::not_found("dream", id))
    }

    async fn may_read(&self, d: &Dream, actor: &str) -> Result<bool> {
        self.allowed(actor, "read", "memory_store", &d.input_store_id, &d.environment_id).await
    }

    /// The Dream, if `actor` may read its input store (403 else).
    pub async fn get_dream(&self, id: &str, actor: &str) -> Result<Dream> {
        self.available()?;
        let d = self.dream(id).await?;
        if !self.may_read(&d, actor).await? {
            return Err(Self::denied(actor, "read", "memory_store", &d.input_store_id));
        }
        Ok(d)
    }

    /// Newest first, those whose input store `actor` may read.
    pub async fn list_dreams(&self, f: DreamFilter, limit: u32, page: &str, actor: &str) -> Result<(Vec<Dream>, String)> {
        self.available()?;
        let page = PageRequest::standard(limit, page)?;
        let rows = self.db.list_dreams(&f, &page).await?;
        let (rows, next) = page.finish(rows, |d| d.id.as_str());
        let mut out = Vec::with_capacity(rows.len());
        for d in rows {
            if self.may_read(&d, actor).await? {
                out.push(d);
            }
        }
        Ok((out, next))
    }

    /// `pending`/`running` → `canceled`; a repeat answers the same; a
    /// finished Dream → 409.
    pub async fn cancel_dream(&self, id: &str, actor: &str) -> Result<Dream> {
        self.change_dream(id, actor, |d| match d.status {
            DreamStatus::Canceled => Ok(None),
            DreamStatus::Pending | DreamStatus::Running => {
                let now = now_ms();
                Ok(Some(Dream {
                    status: DreamStatus::Canceled,
                    ended_ms: now,
                    lease_holder: String::new(),
                    lease_expires_ms: 0,
                    ..d.clone()
                }))
            }
            other => Err(Error::conflict(format!("dream {} is {}: only a pending or running Dream is canceled", d.id, other.as_str()))
                .with_reason("dream_finished")),
        })
        .await
    }

    /// Hides a finished Dream from default lists; its output is untouched.
    pub async fn archive_dream(&self, id: &str, actor: &str) -> Result<Dream> {
        self.change_dream(id, actor, |d| {
            if !d.status.terminal() {
                return Err(
                    Error::conflict(format!("dream {} is {}: cancel it first", d.id, d.status.as_str())).with_reason("dream_not_finished")
                );
            }
            Ok((d.archived_ms == 0).then(|| Dream { archived_ms: now_ms(), ..d.clone() }))
        })
        .await
    }

    /// Applies `change` (`None`: nothing to do) under `manage`, retrying
    /// when the worker moved the Dream meanwhile.
    async fn change_dream(&self, id: &str, actor: &str, change: impl Fn(&Dream) -> Result<Option<Dream>>) -> Result<Dream> {
        self.available()?;
        let mut d = self.dream(id).await?;
        self.require_manage(actor, &d.environment_id).await?;
        for _ in 0..8 {
            let Some(next) = change(&d)? else { return Ok(d) };
            let next = Dream { version: d.version + 1, ..next };
            if self.db.update_dream(&next, d.version).await? {
                let action = if next.status != d.status { "dream.canceled" } else { "dream.archived" };
                self.audit(actor, action, &d.input_store_id, json!({"dream_id": d.id})).await;
                return Ok(next);
            }
            d = self.dream(id).await?;
        }
        Err(Error::new(Code::Conflict, format!("dream {id} kept changing; try again")))
    }
}
