//! The preflight engine: loads, validates, compiles and runs WebAssembly-component checks under a time,
//! memory and result-size budget, and maps their answers onto a controller's action. It knows nothing of
//! Kubernetes (a test fails the build if kube, k8s-openapi, axum, hyper, clap or prometheus-client enter its
//! dependency tree): `preflight-operator` and the `preflight` CLI build on it.
//!
//! - [`Engine`] loads a component once per digest into a [`Check`] and runs each evaluation in a fresh
//!   instance under [`Limits`], returning an [`Evaluation`] whose outcome is a [`Verdict`] or a classified
//!   [`Failure`];
//! - [`Grants`] say what a check may reach beyond its request (contract 0.2): outbound HTTP under an
//!   [`HttpPolicy`] (an [`HttpGrant`] with its response cache), and lookups through a [`ClusterLookup`]
//!   the embedder implements. Nothing is granted by default;
//! - a check may declare the parts of the object it reads: its [`Projection`] gives the caller what to send;
//! - [`action`] is the pure mapping from outcomes to the controller's action;
//! - `measure` (feature `measure`, off by default) counts throughput the same way for `preflight bench` and
//!   the engine benchmark.

#![warn(missing_docs)]

mod bindings;
mod check;
mod cluster;
mod digest;
mod disk_cache;
mod engine;
mod error;
mod failure;
mod footprint;
mod function_cache;
mod guest_state;
mod http_cache;
mod http_policy;
mod imports;
mod instance;
mod limits;
#[cfg(feature = "measure")]
pub mod measure;
mod outbound_http;
mod outcome;
mod pre_initialize;
mod projection;
mod request;
mod result;
mod reuse;
mod stderr_tail;
mod validate;

pub use check::{Check, CheckInfo};
pub use cluster::{ClusterLookup, GrantHolder, Grants, LookupFuture, ObjectKind};
pub use digest::Digest;
pub use engine::{Engine, EngineConfig};
pub use error::{Cause, ComponentProblem, Error};
pub use http_policy::{
    HttpPolicy, InjectedHeader, UrlPattern, forbidden_address, normalize_path, private_address,
};
pub use limits::{Isolation, Limits, parse_size};
pub use outbound_http::HttpGrant;
pub use outcome::{CheckOutcome, Evaluation, Failure, FailureKind, LogLevel, LogLine, Verdict};
pub use pre_initialize::INIT_EXPORT;
pub use projection::{Projection, READS_SECTION};
pub use request::{Request, Target};
pub mod action;

/// The wasmtime release the engine is built on (pinned exactly in the workspace; a test keeps this in step
/// with `Cargo.lock`).
pub const WASMTIME_VERSION: &str = "48.0.8";

/// The contract versions this engine serves, as `major.minor.x`: a check built against any patch release
/// of one of them is accepted when it imports nothing the host lacks.
pub fn contract_versions() -> Vec<String> {
    bindings::SERVED_CONTRACTS
        .iter()
        .map(|version| format!("{}.x", bindings::minor(version)))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_wasmtime_version_is_the_one_in_the_lockfile() {
        let lock = include_str!("../../../Cargo.lock");
        let pinned = format!(
            "name = \"wasmtime\"\nversion = \"{}\"",
            super::WASMTIME_VERSION
        );
        assert!(
            lock.contains(&pinned),
            "Cargo.lock has another wasmtime than {}",
            super::WASMTIME_VERSION
        );
        assert_eq!(super::contract_versions(), ["0.1.x", "0.2.x"]);
    }
}
