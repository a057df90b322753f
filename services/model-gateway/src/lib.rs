//! The model gateway: routing profiles, provider adapters (the scripted model
//! embedded), usage and cost metering. Provider credentials live only here.

pub mod endpoints;
pub mod grpc;
pub mod model;
pub mod pricing;
pub mod providers;
pub mod qualifications;
pub mod service;
pub mod store;
pub mod tasks;

use checkfu_core::Result;
use checkfu_proto::modelgateway::v1::model_gateway_service_server::ModelGatewayServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::ModelGatewayService;

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/model_gateway":
    "0001_init",
    "0002_evaluator_qualifications",
);

/// Opens the gateway with the installation's endpoints (and their keys,
/// which never leave this service).
pub async fn open(location: &Location, endpoints: endpoints::Endpoints) -> Result<ModelGatewayService> {
    let db = Db::open(location, "model_gateway", &MIGRATIONS).await?;
    let stores = service::Stores {
        routing: Arc::new(store::SqlRoutingStore::new(db.clone())),
        qualifications: Arc::new(store::SqlQualificationStore::new(db)),
    };
    Ok(ModelGatewayService::new(stores, endpoints))
}

/// The tonic server for this role; every `Generate` must carry a capability
/// token signed with `tokens`.
pub fn server(svc: ModelGatewayService, tokens: checkfu_core::capability::TokenKey) -> ModelGatewayServiceServer<grpc::ModelGatewayGrpc> {
    ModelGatewayServiceServer::new(grpc::ModelGatewayGrpc { svc, tokens: checkfu_proto::token::Verifier::new(tokens) })
}
