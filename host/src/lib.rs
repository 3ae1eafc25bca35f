//! Preflight: run WebAssembly-component checks before a Kubernetes operator reconciles.
//!
//! The crate is layered so that each layer knows only the one below it:
//! - the **engine** ([`Engine`], [`Check`], [`Limits`], [`Evaluation`]) loads, validates, compiles and runs
//!   components under a time, memory and result-size budget, and knows nothing of Kubernetes;
//! - the **mapping** ([`action`]) is a pure function from check outcomes to the controller's action;
//! - the **operator** ([`operator`]) gates Kubernetes objects with checks shipped in ConfigMaps, and offers
//!   the same gate as a library ([`operator::Gate`]) to operators written with kube-rs;
//! - the **CLI** (`preflight run | inspect | bench | operator`) drives the engine on a laptop or in a cluster.

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
pub mod operator;
