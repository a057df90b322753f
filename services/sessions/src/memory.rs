//! A Session's mounts of MemoryStores (api.md §13.4): pinned when the
//! Session is created, materialised into `memory/<mount_name>/` of its
//! sandbox (the pinned version plus the Session's own changes — never later
//! changes by others), and written back when a Run settles. The memory
//! service decides access (for the Session's Principal) at every step;
//! this side keeps what each mount shows and records the events.

use crate::draft::system;
use crate::model::Lease;
use crate::model::*;
use crate::runs::Runs;
use checkfu_core::events::EventType;
use checkfu_core::id::{RunId, SessionId};
use checkfu_core::{Error, Result};
use checkfu_proto::memory::v1 as mpb;
use serde_json::{Value, json};

/// The largest document a writeback carries (the store's limit).
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// One change a runner reports in a mount: a path relative to the mount
/// folder, and its new text (`None`: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub content: Option<String>,
}

impl Runs {
    fn memory(&self) -> Result<crate::upstream::Memory> {
        self.memory.clone().ok_or_else(|| Error::unavailable("this installation has no memory service"))
    }

    /// Checks and pins each requested mount for a Session about to be
    /// created (its Principal needs `read`, and `write` for read-write).
    pub(crate) async fn pin_mounts(
        &self,
        session_id: &SessionId,
        environment_id: &str,
        principal_id: &str,
        mut requests: Vec<MountRequest>,
    ) -> Result<Vec<MemoryMount>> {
        if requests.is_empty() {
            return Ok(vec![]);
        }
        check_mounts(&mut requests)?;
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            let req = mpb::MountRequest {
                store_id: r.store_id.clone(),
                access: r.access.clone(),
                principal_id: principal_id.into(),
                environment_id: environment_id.into(),
                session_id: session_id.to_string(),
            };
            let pinned = self.memory()?.mount(req).await.map_err(Error::from)?.into_inner();
            out.push(MemoryMount {
                mount_name: r.mount_name,
                store_id: r.store_id,
                access: r.access,
                store_version: pinned.store_version,
                ..Default::default()
            });
        }
        Ok(out)
    }

    /// The MemoryStores the Session mounts (its `resources` of kind
    /// `memory_store`).
    pub async fn memory_resources(&self, session_id: &SessionId) -> Result<Vec<MemoryMount>> {
        self.store.mounts(session_id).await
    }

    /// What a runner mounts for a Run just claimed: each file of each
    /// mount the Principal may still read, and the folders it may change.
    /// When the sandbox is `fresh` (it materialises now), each mount is
    /// recorded as `memory.accessed {operation:"mount"}`.
    pub(crate) async fn memory_mounts(&self, session: &Session, run_id: &RunId, fresh: bool) -> Result<(Vec<WorkMount>, Vec<String>)> {
        if self.unmounted.get(&session.id).is_some() {
            return Ok((vec![], vec![]));
        }
        let mounts = self.store.mounts(&session.id).await?;
        if mounts.is_empty() {
            self.unmounted.insert(session.id.clone(), ());
            return Ok((vec![], vec![]));
        }
        let (mut files, mut writable, mut events) = (vec![], vec![], vec![]);
        for mut m in mounts {
            let req = mpb::MaterializeRequest {
                store_id: m.store_id.clone(),
                at_version: m.store_version,
                access: m.access.clone(),
                principal_id: session.principal_id.to_string(),
                session_id: session.id.to_string(),
                run_id: run_id.to_string(),
                check_only: m.materialized,
            };
            let got = self.memory()?.materialize(req).await.map_err(Error::from)?.into_inner();
            if !got.refused.is_empty() {
                tracing::info!(session_id = %session.id, store_id = %m.store_id, refused = %got.refused, "a memory mount is left out of the sandbox");
                continue;
            }
            if !m.materialized {
                m.files = got
                    .files
                    .iter()
                    .map(|f| (f.path.clone(), MountedFile { sha256: f.sha256.clone(), size_bytes: f.size_bytes }))
                    .collect();
                m.base = got.files.iter().map(|f| (f.path.clone(), f.sha256.clone())).collect();
                m.materialized = true;
                self.store.put_mount_state(&session.id, &m).await?;
            }
            for (path, f) in &m.files {
                files.push(WorkMount {
                    path: format!("{}{path}", m.folder()),
                    sha256: f.sha256.clone(),
                    size_bytes: f.size_bytes,
                    source: "memory",
                    file_id: None,
                    media_type: None,
                });
            }
            if m.read_write() {
                writable.push(m.folder());
            }
            if fresh {
                events.push(json!({"memory_store_id": m.store_id, "operation": "mount", "access": m.access, "mount_path": m.mount_path(),
                    "store_version": m.store_version}));
            }
        }
        if !events.is_empty() {
            self.log
                .transact(&session.id, |d| {
                    for e in &events {
                        d.push(EventType::MemoryAccessed, Some(run_id), system(), Value::Null, e.clone());
                    }
                    Ok(())
                })
                .await?;
        }
        Ok((files, writable))
    }

    /// The text of a file one of the lease's Session's mounts shows.
    pub async fn memory_content(&self, lease: &Lease, sha256: &str) -> Result<String> {
        let sid = self.log.session_of(lease).await?;
        let mounts = self.store.mounts(&sid).await?;
        if !mounts.iter().any(|m| m.files.values().any(|f| f.sha256 == sha256)) {
            return Err(Error::not_found("blob", sha256));
        }
        let req = mpb::GetContentRequest { sha256: sha256.into() };
        Ok(self.memory()?.get_content(req).await.map_err(Error::from)?.into_inner().content)
    }

    /// Writes back what a Run changed in a read-write mount, before it
    /// settles: one change set expecting what the mount last took from the
    /// store. The memory service commits it (`memory.accessed
    /// {operation:"write"}`), or turns it into a proposal
    /// (`memory.proposal_created`), or refuses it (`memory.writeback_refused`,
    /// and the mount forgets the changes).
    pub async fn writeback_memory(&self, lease: &Lease, mount_name: &str, changes: Vec<FileChange>, skipped: Vec<String>) -> Result<()> {
        let sid = self.log.session_of(lease).await?;
        let session = self.log.session(&sid).await?;
        let mut m = self
            .store
            .mounts(&sid)
            .await?
            .into_iter()
            .find(|m| m.mount_name == mount_name)
            .ok_or_else(|| Error::invalid_field("mount_name", format!("the Session has no memory mount {mount_name:?}")))?;
        if !m.read_write() {
            return Err(Error::invalid_field("mount_name", format!("memory mount {mount_name:?} is read-only")));
        }
        if changes.len() > 1000 || skipped.len() > 1000 {
            return Err(Error::invalid_field("changes", "a writeback carries at most 1,000 changes"));
        }
        let mut edits = vec![];
        let mut next = m.files.clone();
        for c in changes {
            let path = format!("/{}", c.path.trim_start_matches('/'));
            let expected = m.base.get(&path).cloned();
            match &c.content {
                Some(text) => {
                    if text.len() > MAX_DOCUMENT_BYTES {
                        return Err(Error::invalid_field("changes", format!("{path} is over {MAX_DOCUMENT_BYTES} bytes")));
                    }
                    let sha256 = checkfu_core::sha256_hex(text.as_bytes());
                    if next.get(&path).is_some_and(|f| f.sha256 == sha256) {
                        continue;
                    }
                    next.insert(path.clone(), MountedFile { sha256, size_bytes: text.len() as i64 });
                }
                None => {
                    if next.remove(&path).is_none() || expected.is_none() {
                        // Made and removed within the Session: nothing to say.
                        continue;
                    }
                }
            }
            edits.push(mpb::WritebackChange { path, content: c.content, expected_sha256: expected });
        }
        if edits.is_empty() && skipped.is_empty() {
            return Ok(());
        }
        let paths: Vec<String> = edits.iter().map(|e| e.path.clone()).collect();
        let req = mpb::WritebackRequest {
            store_id: m.store_id.clone(),
            principal_id: session.principal_id.to_string(),
            session_id: sid.to_string(),
            run_id: lease.run_id.to_string(),
            changes: edits,
        };
        let w = if req.changes.is_empty() {
            mpb::WritebackResponse { outcome: "unchanged".into(), ..Default::default() }
        } else {
            self.memory()?.writeback(req).await.map_err(Error::from)?.into_inner()
        };
        let written = |store_version: i64, changes: Value| {
            json!({"memory_store_id": m.store_id, "operation": "write", "access": m.access, "mount_path": m.mount_path(),
                "store_version": store_version, "changes": changes})
        };
        let mut event = match w.outcome.as_str() {
            "committed" => Some((EventType::MemoryAccessed, written(w.store_version, changes_of(&w)))),
            // The Session keeps seeing its changes; the store does not.
            "proposed" => Some((
                EventType::MemoryProposalCreated,
                json!({"memory_store_id": m.store_id, "memory_proposal_id": w.memory_proposal_id, "reason": w.reason,
                    "base_version": w.base_version, "paths": paths}),
            )),
            "refused" => Some((EventType::MemoryWritebackRefused, json!({"memory_store_id": m.store_id, "reason": w.reason}))),
            // Nothing to commit: only what was left out is worth saying.
            _ => (!skipped.is_empty()).then(|| (EventType::MemoryAccessed, written(w.store_version, json!([])))),
        };
        // What the store now holds is what the next writeback expects.
        if w.outcome == "committed" {
            for p in &paths {
                match next.get(p) {
                    Some(f) => m.base.insert(p.clone(), f.sha256.clone()),
                    None => m.base.remove(p),
                };
            }
        }
        // A refusal keeps nothing; every other outcome keeps the changes.
        if w.outcome != "refused" {
            m.files = next;
            if let Some((_, e)) = event.as_mut().filter(|_| !skipped.is_empty()) {
                e["skipped"] = json!(skipped);
            }
        }
        self.store.put_mount_state(&sid, &m).await?;
        if let Some((kind, payload)) = event {
            let run_id = lease.run_id.clone();
            self.log
                .transact(&sid, |d| {
                    d.push(kind, Some(&run_id), system(), Value::Null, payload.clone());
                    Ok(())
                })
                .await?;
        }
        Ok(())
    }
}

/// A committed writeback's changes as the `memory.accessed` event records
/// them: from the typed list, or a 0.1.0 memory service's JSON text.
fn changes_of(w: &mpb::WritebackResponse) -> Value {
    #[allow(deprecated)] // changes_json: a 0.1.0 memory service's
    let text = &w.changes_json;
    if w.changes.is_empty() && !text.is_empty() {
        return serde_json::from_str(text).unwrap_or(Value::Null);
    }
    let changes: Vec<Value> = w
        .changes
        .iter()
        .map(|c| json!({"path": c.path, "operation": c.operation, "sha256_before": c.sha256_before, "sha256_after": c.sha256_after}))
        .collect();
    Value::Array(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn a_commits_changes_read_the_same_typed_or_from_a_0_1_0_memory_service() {
        let text = json!([{"path": "a.md", "operation": "created", "sha256_before": null, "sha256_after": "ab"},
            {"path": "b.md", "operation": "deleted", "sha256_before": "cd", "sha256_after": null}]);
        let typed = mpb::WritebackResponse {
            changes: vec![
                mpb::VersionChange {
                    path: "a.md".into(),
                    operation: "created".into(),
                    sha256_before: None,
                    sha256_after: Some("ab".into()),
                },
                mpb::VersionChange {
                    path: "b.md".into(),
                    operation: "deleted".into(),
                    sha256_before: Some("cd".into()),
                    sha256_after: None,
                },
            ],
            changes_json: text.to_string(),
            ..Default::default()
        };
        let old = mpb::WritebackResponse { changes_json: text.to_string(), ..Default::default() };
        assert_eq!((changes_of(&typed), changes_of(&old)), (text.clone(), text));
        assert_eq!(changes_of(&mpb::WritebackResponse::default()), json!([]), "a commit of nothing lists nothing");
    }
}
