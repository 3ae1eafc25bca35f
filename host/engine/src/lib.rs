//! The preflight engine: loads, validates, compiles and runs WebAssembly-component checks under a time,
//! memory and result-size budget, and maps their answers onto a controller's action. It knows nothing of
//! Kubernetes (a test fails the build if kube, k8s-openapi, axum, hyper, clap or prometheus-client enter its
//! dependency tree): `preflight-operator` and the `preflight` CLI build on it.
//!
//! - [`Engine`] loads a component once per digest into a [`Check`] and runs each evaluation in a fresh
//!   instance under [`Limits`], returning an [`Evaluation`] whose outcome is a [`Verdict`] or a classified
//!   [`Failure`];
//! - [`action`] is the pure mapping from outcomes to the controller's action;
//! - [`measure`] counts throughput the same way for `preflight bench` and the engine benchmark.

#![warn(missing_docs)]

mod bindings;
mod check;
mod digest;
mod disk_cache;
mod engine;
mod error;
mod guest_state;
mod imports;
mod limits;
pub mod measure;
mod outcome;
mod request;
mod stderr_tail;
mod validate;

pub use check::{Check, CheckInfo};
pub use digest::Digest;
pub use engine::{Engine, EngineConfig};
pub use error::Error;
pub use guest_state::{LogLevel, LogLine};
pub use limits::{Limits, parse_size};
pub use outcome::{CheckOutcome, Evaluation, Failure, FailureKind, Verdict};
pub use request::{Request, Target};
pub mod action;
