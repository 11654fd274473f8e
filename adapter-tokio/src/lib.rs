//! # baton-tokio: baton's failover engine, driven with reqwest on tokio
//!
//! WIP docs.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod body;
mod classify;
mod client;
mod driver;
mod error;
#[cfg(feature = "tracing")]
mod events;
#[cfg(feature = "middleware")]
mod middleware;
mod response;

pub use classify::FailureCause;
pub use client::{Client, ClientBuilder, RequestBuilder};
pub use error::{AttemptError, AttemptTimeout, BoxError, BuildError, Error, InvalidRequest};
#[cfg(feature = "middleware")]
pub use middleware::BatonMiddleware;
pub use response::Response;

pub use baton_core;
pub use baton_core::{CallOptions, Endpoint, Permission, Policy, PolicyBuilder, Report};
pub use reqwest;
