//! The model gateway: routing profiles, provider adapters (the scripted model
//! embedded), usage and cost metering. Provider credentials live only here.

pub mod grpc;
pub mod model;
pub mod pricing;
pub mod providers;
pub mod service;
pub mod store;

use checkfu_core::Result;
use checkfu_proto::modelgateway::v1::model_gateway_service_server::ModelGatewayServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::ModelGatewayService;

static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite/model_gateway");
static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres/model_gateway");

pub const MIGRATIONS: Migrations = Migrations { sqlite: &SQLITE, postgres: &POSTGRES };

pub async fn open(location: &Location) -> Result<ModelGatewayService> {
    let db = Db::open(location, "model_gateway", &MIGRATIONS).await?;
    // Provider keys come from the gateway's configuration (its environment,
    // in Kubernetes a Secret); they never leave this service.
    let keys = service::ProviderKeys {
        openai: std::env::var("CHECKFU_OPENAI_API_KEY").ok(),
        anthropic: std::env::var("CHECKFU_ANTHROPIC_API_KEY").ok(),
    };
    Ok(ModelGatewayService::new(Arc::new(store::SqlRoutingStore::new(db)), keys))
}

pub fn server(svc: ModelGatewayService) -> ModelGatewayServiceServer<grpc::ModelGatewayGrpc> {
    ModelGatewayServiceServer::new(grpc::ModelGatewayGrpc { svc })
}
