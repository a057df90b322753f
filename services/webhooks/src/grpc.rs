//! Thin gRPC handlers: convert, call, map errors.

use crate::model::{Attempt, Delivery, Endpoint};
use crate::service::{EndpointChange, WebhooksService};
use checkfu_core::page::PageRequest;
use checkfu_core::time::rfc3339;
use checkfu_proto::webhooks::v1 as pb;
use checkfu_proto::webhooks::v1::webhooks_service_server::WebhooksService as Rpc;
use tonic::{Request, Response, Status};

pub struct WebhooksGrpc {
    pub svc: WebhooksService,
}

type R<T> = Result<Response<T>, Status>;

fn endpoint(e: Endpoint) -> pb::Endpoint {
    pb::Endpoint {
        id: e.id.into(),
        environment_id: e.environment_id.map(String::from).unwrap_or_default(),
        url: e.url,
        event_types: e.event_types,
        disabled: e.disabled,
        version: e.version,
        created_by: e.created_by,
        created_at: rfc3339(e.created_ms),
        updated_at: rfc3339(e.updated_ms),
    }
}

fn delivery(d: Delivery, history: Vec<Attempt>) -> pb::Delivery {
    pb::Delivery {
        next_attempt_at: WebhooksService::next_attempt_at(&d),
        id: d.id.into(),
        endpoint_id: d.endpoint_id.into(),
        event_id: d.event_id,
        event_type: d.event_type,
        status: d.status.as_str().into(),
        attempts: d.attempts as i32,
        last_response_code: d.last_response_code as i32,
        created_at: rfc3339(d.created_ms),
        history: history
            .into_iter()
            .map(|a| pb::Attempt {
                number: a.number as i32,
                at: rfc3339(a.at_ms),
                response_code: a.response_code as i32,
                error: a.error,
                duration_ms: a.duration_ms,
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl Rpc for WebhooksGrpc {
    async fn get_service_info(&self, _: Request<pb::GetServiceInfoRequest>) -> R<pb::ServiceInfo> {
        Ok(Response::new(pb::ServiceInfo {
            role: "webhooks".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            owns: vec!["WebhookEndpoints".into(), "webhook deliveries".into(), "delivery signing and retry schedule".into()],
            serving_behaviour: true,
        }))
    }

    async fn create_endpoint(&self, r: Request<pb::CreateEndpointRequest>) -> R<pb::EndpointWithSecret> {
        let r = r.into_inner();
        let (e, secret) = self.svc.create_endpoint(&r.environment_id, &r.url, r.event_types, &r.created_by).await?;
        Ok(Response::new(pb::EndpointWithSecret { endpoint: Some(endpoint(e)), secret }))
    }

    async fn get_endpoint(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Endpoint> {
        Ok(Response::new(endpoint(self.svc.endpoint(&r.into_inner().id).await?)))
    }

    async fn list_endpoints(&self, r: Request<pb::ListEndpointsRequest>) -> R<pb::ListEndpointsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.list_endpoints(&r.environment_ids, r.include_installation, &p).await?;
        let (rows, next_page) = p.finish(rows, |e| &e.id);
        Ok(Response::new(pb::ListEndpointsResponse { data: rows.into_iter().map(endpoint).collect(), next_page }))
    }

    async fn update_endpoint(&self, r: Request<pb::UpdateEndpointRequest>) -> R<pb::Endpoint> {
        let r = r.into_inner();
        let c = EndpointChange {
            url: r.url,
            event_types: r.set_event_types.then_some(r.event_types),
            disabled: r.disabled,
            expected_version: r.expected_version,
        };
        Ok(Response::new(endpoint(self.svc.update_endpoint(&r.id, c).await?)))
    }

    async fn delete_endpoint(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Endpoint> {
        Ok(Response::new(endpoint(self.svc.delete_endpoint(&r.into_inner().id).await?)))
    }

    async fn rotate_secret(&self, r: Request<pb::GetByIdRequest>) -> R<pb::EndpointWithSecret> {
        let (e, secret) = self.svc.rotate_secret(&r.into_inner().id).await?;
        Ok(Response::new(pb::EndpointWithSecret { endpoint: Some(endpoint(e)), secret }))
    }

    async fn list_deliveries(&self, r: Request<pb::ListDeliveriesRequest>) -> R<pb::ListDeliveriesResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.deliveries(&r.endpoint_id, &p).await?;
        let (rows, next_page) = p.finish(rows, |(d, _)| &d.id);
        Ok(Response::new(pb::ListDeliveriesResponse { data: rows.into_iter().map(|(d, h)| delivery(d, h)).collect(), next_page }))
    }
}
