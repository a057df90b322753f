//! The Environment Work API's RPCs (api.md §17.13): wire ↔ `work.rs`.

use crate::model::*;
use crate::runs::Runs;
use checkfu_core::page::PageRequest;
use checkfu_core::time::{rfc3339, rfc3339_opt};
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as pb;

pub fn work(w: Work) -> pb::WorkItem {
    pb::WorkItem {
        id: w.id.into(),
        profile_id: w.profile_id.into(),
        environment_id: w.environment_id.into(),
        session_id: w.session_id.into(),
        state: w.state.as_str().into(),
        metadata_json: serde_json::to_string(&w.metadata).unwrap_or_else(|_| "{}".into()),
        created_at: rfc3339(w.created_ms),
        acknowledged_at: rfc3339_opt(w.acked_ms),
        started_at: rfc3339_opt(w.started_ms),
        latest_heartbeat_at: rfc3339_opt(w.heartbeat_ms),
        stop_requested_at: rfc3339_opt(w.stop_requested_ms),
        stopped_at: rfc3339_opt(w.stopped_ms),
        generation: w.generation,
        runner_id: w.runner_id.unwrap_or_default(),
    }
}

pub async fn poll(runs: &Runs, r: pb::PollWorkRequest) -> Result<pb::PollWorkResponse> {
    let found = runs.poll_work(&r.profile_id, &r.credential, r.block_ms, r.reclaim_older_than_ms, &r.worker_id).await?;
    Ok(match found {
        Some((w, token)) => pb::PollWorkResponse { work: Some(work(w)), token },
        None => pb::PollWorkResponse::default(),
    })
}

pub async fn heartbeat(runs: &Runs, r: pb::HeartbeatWorkRequest) -> Result<pb::HeartbeatWorkResponse> {
    let beat = runs.heartbeat_work(&r.profile_id, &r.work_id, &r.credential, &r.expected_last_heartbeat, r.desired_ttl_seconds).await?;
    Ok(pb::HeartbeatWorkResponse {
        last_heartbeat: rfc3339_opt(beat.item.heartbeat_ms),
        lease_extended: beat.lease_extended,
        state: beat.item.state.as_str().into(),
        ttl_seconds: beat.item.ttl_seconds,
    })
}

pub async fn list(runs: &Runs, r: pb::ListWorkRequest) -> Result<pb::ListWorkResponse> {
    let page = PageRequest::standard(r.limit, &r.page)?;
    let rows = runs.list_work(&r.profile_id, &r.credential, &page).await?;
    let (rows, next_page) = page.finish(rows, |w| w.id.as_str());
    Ok(pb::ListWorkResponse { data: rows.into_iter().map(work).collect(), next_page })
}

pub async fn stats(runs: &Runs, r: pb::WorkStatsRequest) -> Result<pb::WorkStatsResponse> {
    let (depth, pending, oldest, workers_polling) = runs.work_stats(&r.profile_id).await?;
    Ok(pb::WorkStatsResponse { depth, pending, oldest_queued_at: rfc3339_opt(oldest), workers_polling })
}

pub async fn verify(runs: &Runs, r: pb::VerifyWorkTokenRequest) -> Result<pb::WorkScope> {
    let s = runs.verify_work_token(&r.token).await?;
    let current = s.item.held_by(s.generation) && s.item.state != WorkState::Stopped;
    Ok(pb::WorkScope {
        work_id: s.item.id.into(),
        session_id: s.item.session_id.into(),
        profile_id: s.item.profile_id.into(),
        environment_id: s.item.environment_id.into(),
        runner_id: s.runner.id.into(),
        current,
        principal_id: s.runner.principal_id.into(),
        generation: s.generation,
    })
}

pub async fn send_tool_result(runs: &Runs, r: pb::SendToolResultRequest) -> Result<(Event, bool)> {
    let content = serde_json::from_str(&r.content_json).map_err(|_| Error::invalid_field("content", "content must be JSON"))?;
    runs.send_tool_result(&r.token, &r.session_id, &r.tool_use_id, content, r.is_error).await
}
