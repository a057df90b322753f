//! The capability gateway's domain types. Wire strings become these once,
//! at the gRPC boundary.

mod connection;
mod credential;
mod tool_source;

pub use connection::*;
pub use credential::*;
pub use tool_source::*;
