//! Public response shapes (docs/api.md), built from the services' wire types.
//! They derive the OpenAPI schemas, so the document and the JSON cannot
//! drift apart. JSON documents services carry as strings are inlined. One
//! file per area; everything is re-exported here, so a view is
//! `views::Session` wherever it is used.

mod catalog;
mod common;
mod governance;
mod identity;
mod sessions;
mod webhooks;

pub use catalog::*;
pub use common::*;
pub use governance::*;
pub use identity::*;
pub use sessions::*;
pub use webhooks::*;
