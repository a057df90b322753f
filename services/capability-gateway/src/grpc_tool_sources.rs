//! Thin gRPC handlers for ToolSources: convert, call, map errors.

use crate::connections::ReachService;
use crate::model::*;
use crate::tool_sources::{NewToolSource, ToolSourceChange};
use checkfu_core::id::ToolSourceId;
use checkfu_core::page::PageRequest;
use checkfu_core::time::{rfc3339, rfc3339_opt};
use checkfu_proto::capability::v1 as pb;
use checkfu_proto::capability::v1::tool_sources_service_server::ToolSourcesService as Rpc;
use tonic::{Request, Response, Status};

pub struct ToolSourcesGrpc {
    pub svc: ReachService,
}

type R<T> = Result<Response<T>, Status>;

pub fn view(t: ToolSource) -> pb::ToolSource {
    let tools = t
        .tools
        .iter()
        .map(|x| pb::SourceTool {
            name: x.name.clone(),
            description: x.description.clone(),
            input_schema_json: x.input_schema.to_string(),
            annotations_json: x.annotations.to_string(),
            enabled: t.enabled(&x.name),
            offered: t.offers(&x.name),
        })
        .collect();
    pb::ToolSource {
        id: t.id.to_string(),
        environment_id: t.environment_id.to_string(),
        name: t.name,
        description: t.description,
        connection_id: t.connection_id.to_string(),
        transport: "streamable_http".into(),
        default_enabled: t.default_enabled,
        call_timeout_seconds: t.call_timeout_seconds,
        sync_interval_seconds: t.sync_interval_seconds,
        tools,
        sync_status: t.sync_status.map(|s| s.as_str().to_string()).unwrap_or_default(),
        sync_error_type: t.sync_error.as_ref().map(|e| e.kind.clone()).unwrap_or_default(),
        sync_error_message: t.sync_error.map(|e| e.message).unwrap_or_default(),
        synced_at: rfc3339_opt(t.synced_ms),
        status: t.status.as_str().into(),
        created_by: t.created_by,
        created_at: rfc3339(t.created_ms),
        updated_at: rfc3339(t.updated_ms),
        version: t.version,
    }
}

#[tonic::async_trait]
impl Rpc for ToolSourcesGrpc {
    async fn create_tool_source(&self, r: Request<pb::CreateToolSourceRequest>) -> R<pb::ToolSource> {
        let r = r.into_inner();
        let n = NewToolSource {
            environment_id: r.environment_id,
            name: r.name,
            description: r.description,
            connection_id: r.connection_id,
            transport: r.transport,
            default_enabled: r.default_enabled,
            call_timeout_seconds: r.call_timeout_seconds,
            sync_interval_seconds: r.sync_interval_seconds,
        };
        Ok(Response::new(view(self.svc.create_tool_source(n, &r.actor_id).await?)))
    }

    async fn get_tool_source(&self, r: Request<pb::GetToolSourceRequest>) -> R<pb::ToolSource> {
        Ok(Response::new(view(self.svc.tool_source(&r.into_inner().id).await?)))
    }

    async fn list_tool_sources(&self, r: Request<pb::ListToolSourcesRequest>) -> R<pb::ListToolSourcesResponse> {
        let r = r.into_inner();
        let page = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.list_tool_sources(&r.environment_ids, &page).await?;
        let (rows, next_page) = page.finish(rows, |t| &t.id);
        Ok(Response::new(pb::ListToolSourcesResponse { data: rows.into_iter().map(view).collect(), next_page }))
    }

    async fn update_tool_source(&self, r: Request<pb::UpdateToolSourceRequest>) -> R<pb::ToolSource> {
        let r = r.into_inner();
        let ch = ToolSourceChange {
            name: r.name,
            description: r.description,
            call_timeout_seconds: r.call_timeout_seconds,
            sync_interval_seconds: r.sync_interval_seconds,
            expected_version: r.expected_version,
        };
        Ok(Response::new(view(self.svc.update_tool_source(&r.id, ch, &r.actor_id).await?)))
    }

    async fn archive_tool_source(&self, r: Request<pb::ToolSourceActorRequest>) -> R<pb::ToolSource> {
        let r = r.into_inner();
        Ok(Response::new(view(self.svc.archive_tool_source(&r.id, &r.actor_id).await?)))
    }

    async fn sync_tool_source(&self, r: Request<pb::ToolSourceActorRequest>) -> R<pb::ToolSource> {
        let r = r.into_inner();
        let id = ToolSourceId::parse("id", &r.id)?;
        Ok(Response::new(view(self.svc.sync(&id, &r.actor_id).await?)))
    }

    async fn set_tool(&self, r: Request<pb::SetToolRequest>) -> R<pb::ToolSource> {
        let r = r.into_inner();
        Ok(Response::new(view(self.svc.set_tool(&r.id, &r.tool, r.enabled, &r.actor_id).await?)))
    }

    async fn resolve_for_publication(&self, r: Request<pb::ResolveForPublicationRequest>) -> R<pb::ResolveForPublicationResponse> {
        let r = r.into_inner();
        let connection_id = self.svc.resolve_for_publication(&r.environment_id, &r.tool_source_id, &r.tools).await?;
        Ok(Response::new(pb::ResolveForPublicationResponse { connection_id: connection_id.to_string() }))
    }
}
