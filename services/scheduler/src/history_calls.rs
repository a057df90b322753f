//! Running history steps (api.md §18.7): a selection lists, oldest first,
//! the Sessions of the Automation's Environment its service Principal may
//! read — all of them with `read` on the Environment, else its own — that
//! were created after the frontier's position, are not `running`, are of
//! the chosen Agents, and were not started or continued by this
//! Automation; a record moves the frontier by compare-and-set.

use crate::firing::Firing;
use crate::history_record::{HistoryAnswer, HistoryWork};
use crate::model::{Automation, Moved, Readiness};
use crate::service::SchedulerService;
use checkfu_core::id::FiringId;
use checkfu_core::time::now_ms;
use checkfu_proto::sessions::v1 as ss;
use futures_util::future::BoxFuture;

/// How many pages of Sessions one selection reads at most (running ones
/// and the Automation's own are skipped, so a page may add none).
const MAX_PAGES: usize = 50;

impl SchedulerService {
    /// Runs the history steps `f`'s program waits for that this replica is
    /// not already running (`in_flight.rs`), each saving its answer.
    pub(crate) fn run_history_steps<'a>(&'a self, f: &'a Firing, a: &'a Automation) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(p) = f.program.as_ref() else { return };
            let work = p.history_work();
            let work = self.take_in_flight(f, a, work, |w: &HistoryWork| (w.step_id(), 1), Readiness::admits).await;
            for w in work {
                let (svc, firing, a) = (self.clone(), f.id.clone(), a.clone());
                let (step, saved) = ((w.step_id().to_string(), 1), w.clone());
                let ask = async move {
                    Some(match &w {
                        HistoryWork::Select { frontier, agents, limit, .. } => svc.select(&a, frontier, agents, *limit).await,
                        HistoryWork::Record { frontier, base, through, .. } => svc.record(&a, &firing, frontier, base, through).await,
                    })
                };
                self.answer_later(f.id.clone(), step, "a history step's answer", ask, move |_, p, answer: &HistoryAnswer, now| {
                    p.history_answered(&saved, answer.clone(), now);
                });
            }
        })
    }

    /// An Automation's frontiers by name (its Environment too, for the
    /// caller's check); readable after it is deleted.
    pub async fn frontiers(&self, automation_id: &str) -> checkfu_core::Result<(Vec<crate::model::Frontier>, String)> {
        let id = checkfu_core::id::AutomationId::parse("id", automation_id)?;
        let a = self.store.get_automation(&id).await?.ok_or_else(|| checkfu_core::Error::not_found("automation", &id))?;
        Ok((self.store.frontiers(id.as_str()).await?, a.environment_id.to_string()))
    }

    async fn select(&self, a: &Automation, frontier: &str, agents: &[String], limit: i64) -> HistoryAnswer {
        match self.selection(a, frontier, agents, limit).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(automation_id = %a.id, frontier, error = %e.message, "a history selection could not be made");
                HistoryAnswer::Failed("history_unavailable".into())
            }
        }
    }

    async fn selection(&self, a: &Automation, frontier: &str, agents: &[String], limit: i64) -> checkfu_core::Result<HistoryAnswer> {
        let base = self.store.frontier(a.id.as_str(), frontier).await?.map(|f| f.position).unwrap_or_default();
        let svc = a.service_principal_id.to_string();
        let everyone = self.allowed(&svc, "read", "environment", &a.environment_id, &a.environment_id).await?;
        let mut chosen = vec![];
        // Oldest first, starting after the frontier's Session.
        let mut page = if base.is_empty() { String::new() } else { checkfu_core::page::encode_token(&base) };
        for _ in 0..MAX_PAGES {
            let req = ss::ListSessionsRequest {
                environment_ids: vec![a.environment_id.to_string()],
                limit: 100,
                page: page.clone(),
                principal_id: if everyone { String::new() } else { svc.clone() },
                ascending: true,
                ..Default::default()
            };
            let listed = self.sessions.clone().list_sessions(req).await?.into_inner();
            for s in &listed.data {
                if s.status == "running" || (!agents.is_empty() && !agents.contains(&s.agent_id)) {
                    continue;
                }
                if self.store.automations_of_session(&s.id).await?.iter().any(|id| id == a.id.as_str()) {
                    continue;
                }
                chosen.push(s.id.clone());
                if chosen.len() as i64 >= limit {
                    return Ok(HistoryAnswer::Selected { base, session_ids: chosen });
                }
            }
            if listed.next_page.is_empty() {
                break;
            }
            page = listed.next_page;
        }
        Ok(HistoryAnswer::Selected { base, session_ids: chosen })
    }

    async fn record(&self, a: &Automation, firing: &FiringId, frontier: &str, base: &str, through: &str) -> HistoryAnswer {
        if through == base {
            return HistoryAnswer::Moved;
        }
        match self.store.advance_frontier(a.id.as_str(), frontier, base, through, firing.as_str(), now_ms()).await {
            Ok(Moved::Moved | Moved::Already) => HistoryAnswer::Moved,
            Ok(Moved::Since) => HistoryAnswer::Failed("frontier_moved".into()),
            Err(e) => {
                tracing::warn!(automation_id = %a.id, frontier, error = %e.message, "a frontier could not be moved");
                HistoryAnswer::Failed("history_unavailable".into())
            }
        }
    }
}
