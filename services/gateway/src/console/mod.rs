//! The web console: its assets, served at `/console/` from the binary, and
//! the browser's sign-in. A person pastes an API key once; the gateway
//! answers a console session as an `HttpOnly` cookie, and every `/v1` route
//! then accepts that cookie in place of the key, with the same
//! authorization (see `auth.rs`). Requests that change anything must also
//! carry the CSRF token (`csrf.rs`). docs/console.md is the contract.

pub mod assets;
pub mod cookies;
pub mod csrf;
pub mod wire;

pub use assets::router;
