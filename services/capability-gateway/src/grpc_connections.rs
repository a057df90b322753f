//! Thin gRPC handlers for Connections: convert, call, map errors. The read
//! form of a credential is built here, from its clear fields only.

use crate::connections::{Capability, ConnectionChange, NewConnection, ReachService};
use crate::model::*;
use checkfu_core::Error;
use checkfu_core::page::PageRequest;
use checkfu_core::time::{rfc3339, rfc3339_opt};
use checkfu_proto::capability::v1 as pb;
use checkfu_proto::capability::v1::connections_service_server::ConnectionsService as Rpc;
use tonic::{Request, Response, Status};

pub struct ConnectionsGrpc {
    pub svc: ReachService,
}

type R<T> = Result<Response<T>, Status>;

impl ConnectionsGrpc {
    fn view(&self, c: Connection) -> pb::Connection {
        let credential = c.credential.as_ref().map(|k| pb::CredentialView {
            r#type: k.meta.kind.clone(),
            header: k.meta.header.clone().unwrap_or_default(),
            token_endpoint: k.meta.token_endpoint.clone().unwrap_or_default(),
            client_id: k.meta.client_id.clone().unwrap_or_default(),
            scope: k.meta.scope.clone().unwrap_or_default(),
            state: self.svc.state_of(k).as_str().into(),
            created_at: rfc3339(k.created_ms),
            rotated_at: rfc3339_opt(k.rotated_ms),
            last_used_at: rfc3339_opt(k.last_used_ms),
            token_endpoint_auth: k.meta.token_endpoint_auth.clone().unwrap_or_default(),
        });
        pb::Connection {
            id: c.id.to_string(),
            environment_id: c.environment_id.to_string(),
            name: c.name,
            description: c.description,
            metadata_json: c.metadata.to_string(),
            kind: c.kind.as_str().into(),
            url: c.url,
            owner_kind: c.owner.kind().into(),
            owner_id: c.owner.id().into(),
            credential,
            status: c.status.as_str().into(),
            created_by: c.created_by,
            created_at: rfc3339(c.created_ms),
            updated_at: rfc3339(c.updated_ms),
            revoked_at: rfc3339_opt(c.revoked_ms),
            version: c.version,
        }
    }
}

/// A request's credential: the typed one, else a 0.1.0 caller's JSON text;
/// `None` when neither is given.
fn credential(typed: Option<pb::CredentialInput>, json: &str) -> Result<Option<CredentialFields>, Status> {
    if let Some(c) = typed {
        return Ok(Some(c.into()));
    }
    if json.is_empty() {
        return Ok(None);
    }
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|_| Error::invalid_field("credential", "credential must be a JSON object"))?;
    Ok(Some(pb::CredentialInput::from_json(&v)?.into()))
}

impl From<pb::CredentialInput> for CredentialFields {
    fn from(c: pb::CredentialInput) -> Self {
        CredentialFields {
            kind: c.r#type,
            token: c.token,
            header: c.header,
            value: c.value,
            token_endpoint: c.token_endpoint,
            client_id: c.client_id,
            client_secret: c.client_secret,
            token_endpoint_auth: c.token_endpoint_auth,
            refresh_token: c.refresh_token,
            scope: c.scope,
            unknown: c.unknown_fields,
        }
    }
}

// Writes `limits_json` for 0.1.0 readers too.
#[allow(deprecated)]
fn capability(c: Capability) -> pb::Capability {
    pb::Capability {
        limits: limits(&c.limits),
        limits_json: c.limits.to_string(),
        name: c.name,
        available: c.reason.is_none(),
        reason: c.reason.unwrap_or_default(),
        preview: c.preview,
    }
}

/// A feature's limits, typed: each a number, a word, a list of words or a
/// `{min, max}` range (the test below checks every feature's fit).
fn limits(v: &serde_json::Value) -> std::collections::HashMap<String, pb::FeatureLimit> {
    use pb::feature_limit::Value as L;
    use serde_json::Value;
    let one = |v: &Value| -> Option<L> {
        Some(match v {
            Value::Number(n) => L::Number(n.as_i64()?),
            Value::String(s) => L::Text(s.clone()),
            Value::Array(a) => {
                L::Texts(pb::FeatureLimitTexts { values: a.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<_>>()? })
            }
            Value::Object(o) if o.len() == 2 => {
                L::Range(pb::FeatureLimitRange { min: o.get("min")?.as_i64()?, max: o.get("max")?.as_i64()? })
            }
            _ => return None,
        })
    };
    let fields = v.as_object().into_iter().flatten();
    fields.filter_map(|(k, v)| Some((k.clone(), pb::FeatureLimit { value: Some(one(v)?) }))).collect()
}

#[tonic::async_trait]
impl Rpc for ConnectionsGrpc {
    async fn create_connection(&self, r: Request<pb::CreateConnectionRequest>) -> R<pb::Connection> {
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 caller's credential_json
        let n = NewConnection {
            environment_id: r.environment_id,
            name: r.name,
            description: r.description,
            metadata_json: r.metadata_json,
            kind: r.kind,
            url: r.url,
            owner_kind: r.owner_kind,
            owner_id: r.owner_id,
            credential: credential(r.credential, &r.credential_json)?,
        };
        Ok(Response::new(self.view(self.svc.create(n, &r.actor_id).await?)))
    }

    async fn get_connection(&self, r: Request<pb::GetConnectionRequest>) -> R<pb::Connection> {
        Ok(Response::new(self.view(self.svc.get(&r.into_inner().id).await?)))
    }

    async fn list_connections(&self, r: Request<pb::ListConnectionsRequest>) -> R<pb::ListConnectionsResponse> {
        let r = r.into_inner();
        let page = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.list(&r.environment_ids, &r.kind, &r.status, &page).await?;
        let (rows, next_page) = page.finish(rows, |c| &c.id);
        Ok(Response::new(pb::ListConnectionsResponse { data: rows.into_iter().map(|c| self.view(c)).collect(), next_page }))
    }

    async fn update_connection(&self, r: Request<pb::UpdateConnectionRequest>) -> R<pb::Connection> {
        let r = r.into_inner();
        let ch = ConnectionChange {
            name: r.name,
            description: r.description,
            metadata_json: r.metadata_json,
            disabled: r.disabled,
            expected_version: r.expected_version,
        };
        Ok(Response::new(self.view(self.svc.update(&r.id, ch, &r.actor_id).await?)))
    }

    async fn revoke_connection(&self, r: Request<pb::ConnectionActorRequest>) -> R<pb::Connection> {
        let r = r.into_inner();
        Ok(Response::new(self.view(self.svc.revoke(&r.id, &r.actor_id).await?)))
    }

    async fn set_credential(&self, r: Request<pb::SetCredentialRequest>) -> R<pb::Connection> {
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 caller's credential_json
        let fields = credential(r.credential, &r.credential_json)?.unwrap_or_default();
        Ok(Response::new(self.view(self.svc.set_credential(&r.id, &fields, &r.actor_id).await?)))
    }

    async fn delete_credential(&self, r: Request<pb::ConnectionActorRequest>) -> R<pb::Connection> {
        let r = r.into_inner();
        Ok(Response::new(self.view(self.svc.delete_credential(&r.id, &r.actor_id).await?)))
    }

    async fn list_capabilities(&self, _: Request<pb::ListCapabilitiesRequest>) -> R<pb::ListCapabilitiesResponse> {
        Ok(Response::new(pb::ListCapabilitiesResponse { data: self.svc.capabilities().into_iter().map(capability).collect() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_features_limits_fit_the_typed_form() {
        for name in checkfu_core::features::ALL {
            let Some((_, v, _)) = crate::connections::feature(name) else { continue };
            let typed = limits(&v);
            assert_eq!(typed.len(), v.as_object().map_or(0, |o| o.len()), "{name}: a limit of another shape would be dropped");
        }
        let typed = limits(&serde_json::json!({"expires_in_seconds": {"min": 1, "max": 2}, "transports": ["http"]}));
        assert!(matches!(
            typed["expires_in_seconds"].value,
            Some(pb::feature_limit::Value::Range(pb::FeatureLimitRange { min: 1, max: 2 }))
        ));
    }
}
