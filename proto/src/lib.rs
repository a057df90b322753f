//! Wire types and tonic clients/servers for the Checkfu mesh, generated from
//! `proto/checkfu/<service>/v1/*.proto`. Services convert these into their own
//! domain types at the boundary; nothing here carries business rules.
macro_rules! package {
    ($name:ident, $pkg:literal) => {
        pub mod $name {
            // Generated: a oneof holding a large message (a firing) is as
            // prost makes it; boxing it would only change every caller.
            #[allow(clippy::large_enum_variant)]
            pub mod v1 {
                tonic::include_proto!($pkg);
            }
        }
    };
}

package!(governance, "checkfu.governance.v1");
package!(sessions, "checkfu.sessions.v1");
package!(modelgateway, "checkfu.modelgateway.v1");
package!(runner, "checkfu.runner.v1");
package!(capability, "checkfu.capability.v1");
package!(scheduler, "checkfu.scheduler.v1");
package!(webhooks, "checkfu.webhooks.v1");
package!(memory, "checkfu.memory.v1");

pub mod agent_definition;
pub mod automation_spec;
pub mod called_tool;
pub mod credential_input;
pub mod delivery_screen;
pub mod event_refs;
pub mod firing_trace;
pub mod mesh;
pub mod proposed_change;
pub mod selection;
pub mod token;
pub mod tool_declaration;
pub mod transport;
pub mod views;
