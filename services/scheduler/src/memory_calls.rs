//! Running Memory steps (api.md §18.7) through the memory service, as the
//! Automation's service Principal — whose `read` and `write` the memory
//! service checks on every call — and readiness `memory`.
//!
//! A write goes to the memory service's `AutomationWrite`: the §13.2
//! compare-and-set recorded `via:"automation"` (a MemoryProposal on a store
//! reviewed by proposal), keyed `<firing>/<step>` so that sending it again
//! after a crash answers what the first send did.

use crate::firing::Firing;
use crate::memory_access::{MemoryAnswer, MemoryWork};
use crate::model::{Automation, Check, Readiness, Target};
use crate::service::SchedulerService;
use checkfu_core::Code;
use checkfu_core::id::FiringId;
use checkfu_proto::memory::v1 as mem;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

impl SchedulerService {
    /// Sends the Memory steps `f`'s program waits for that this replica is
    /// not already sending (`in_flight.rs`), each saving its answer.
    pub(crate) fn run_memory_steps<'a>(&'a self, f: &'a Firing, a: &'a Automation) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(p) = f.program.as_ref() else { return };
            let work = p.memory_work(&f.event);
            let work = self.take_in_flight(f, a, work, |w: &MemoryWork| (w.step_id.as_str(), w.attempt), Readiness::admits_calls).await;
            for w in work {
                let (svc, firing, principal) = (self.clone(), f.id.clone(), a.service_principal_id.to_string());
                let (step, saved) = ((w.step_id.clone(), w.attempt), w.clone());
                let ask = async move { Some(svc.send_memory(&firing, &principal, &w).await) };
                self.answer_later(f.id.clone(), step, "a Memory step's answer", ask, move |_, p, answer: &MemoryAnswer, now| {
                    p.memory_answered(&saved, answer.clone(), now);
                });
            }
        })
    }

    /// One Memory step's call, its answer or the reason it failed.
    async fn send_memory(&self, firing: &FiringId, principal: &str, w: &MemoryWork) -> MemoryAnswer {
        let answer = match &w.write {
            None => {
                let req = mem::ReadDocumentRequest {
                    store_id: w.store.clone(),
                    path: w.path.clone(),
                    at_version: w.at_version,
                    actor_id: principal.into(),
                };
                self.memory.clone().read_document(req).await
            }
            Some((content, expected)) => {
                let req = mem::AutomationWriteRequest {
                    store_id: w.store.clone(),
                    path: w.path.clone(),
                    content: content.clone(),
                    expect_absent: expected.is_none(),
                    expected_sha256: expected.clone(),
                    actor_id: principal.into(),
                    firing_id: firing.to_string(),
                    step_id: w.step_id.clone(),
                };
                self.memory.clone().automation_write(req).await
            }
        };
        match answer.map(|a| a.into_inner().resource) {
            Ok(Some(mem::answer::Resource::Document(d))) => {
                MemoryAnswer::Document { store_version: d.store_version, document: document(d.document.unwrap_or_default()) }
            }
            Ok(Some(mem::answer::Resource::Proposal(p))) => MemoryAnswer::Proposed { memory_proposal_id: p.id },
            Ok(_) => MemoryAnswer::Failed("memory_unavailable".into()),
            Err(s) => MemoryAnswer::Failed(refusal(s).into()),
        }
    }

    /// Readiness `memory`: every store a Memory step names exists and is
    /// active, and the service Principal holds `read` on it, and `write`
    /// where a step writes.
    pub(crate) async fn memory_stores(&self, a: &Automation) -> Check {
        let Target::Steps(t) = &a.target else { return Check::pass("memory") };
        let svc = a.service_principal_id.to_string();
        for (store, writes) in t.memory_stores() {
            // Read as the service Principal: the memory service checks its
            // `read`.
            let req = mem::ActorRequest { id: store.clone(), actor_id: svc.clone(), note: String::new() };
            match self.memory.clone().get_store(req).await.map(|r| r.into_inner().resource) {
                Ok(Some(mem::answer::Resource::Store(s))) if s.environment_id != a.environment_id.as_str() => {
                    return Check::fail("memory", format!("the memory store {store} is in another Environment"), Some(store));
                }
                Ok(Some(mem::answer::Resource::Store(s))) if s.status == "active" => {}
                Ok(_) => return Check::fail("memory", format!("the memory store {store} is archived"), Some(store)),
                Err(s) if s.code() == tonic::Code::NotFound => {
                    return Check::fail("memory", format!("the memory store {store} does not exist"), Some(store));
                }
                Err(s) if s.code() == tonic::Code::PermissionDenied => {
                    return Check::fail("memory", format!("{svc} lacks read on memory store {store}"), Some(store));
                }
                Err(s) => return Check::unknown("memory", s.message()),
            }
            if writes {
                match self.allowed(&svc, "write", "memory_store", &store, &a.environment_id).await {
                    Ok(true) => {}
                    Ok(false) => return Check::fail("memory", format!("{svc} lacks write on memory store {store}"), Some(store)),
                    Err(s) => return Check::unknown("memory", s.message()),
                }
            }
        }
        Check::pass("memory")
    }
}

/// The step's reason for a refusal.
fn refusal(s: tonic::Status) -> &'static str {
    let e = checkfu_core::Error::from(s);
    let detail = |k: &str| e.details.get(k).and_then(Value::as_str).map(String::from);
    match (e.code, detail("reason").as_deref(), detail("resource").as_deref()) {
        (Code::NotFound, _, Some("memory_document")) => "memory_document_not_found",
        (Code::NotFound, _, _) => "memory_store_not_found",
        (Code::PermissionDenied, _, _) => "permission_denied",
        (_, Some("sha_mismatch"), _) => "memory_sha_mismatch",
        (_, Some("store_archived"), _) => "memory_store_archived",
        (Code::Invalid | Code::Conflict | Code::PayloadTooLarge, _, _) => "memory_write_refused",
        _ => "memory_unavailable",
    }
}

/// A document as the API shows it.
fn document(d: mem::MemoryDocument) -> Value {
    json!({"path": d.path, "content": d.content, "content_sha256": d.content_sha256, "size_bytes": d.size_bytes,
        "updated_at": d.updated_at, "updated_in_version": d.updated_in_version})
}
