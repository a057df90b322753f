//! Clients of the services the sessions role calls.

use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::transport::Transport;

/// Governance: ActionApprovals' outcomes, and their withdrawal.
pub type Governance = GovernanceServiceClient<Transport>;

/// The capability gateway: resolving a version's ToolSource declarations.
pub type ToolSources = checkfu_proto::capability::v1::tool_sources_service_client::ToolSourcesServiceClient<Transport>;

/// The memory service: a Session's mounts of MemoryStores.
pub type Memory = checkfu_proto::memory::v1::memory_service_client::MemoryServiceClient<Transport>;

/// The model gateway: an Outcome's grader.
pub type Models = checkfu_proto::modelgateway::v1::model_gateway_service_client::ModelGatewayServiceClient<Transport>;
