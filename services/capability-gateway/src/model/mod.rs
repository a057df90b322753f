//! The capability gateway's domain types. Wire strings become these once,
//! at the gRPC boundary.

mod connection;
mod credential;

pub use connection::*;
pub use credential::*;
