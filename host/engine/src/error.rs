//! The crate's error type: what can go wrong loading a check or setting up the engine.
//!
//! Failures of a check while it runs are not errors of the host: they are [`crate::Failure`] values.

/// An error of the host itself, or a component that cannot be loaded as a check.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a usable preflight check; the message says what is wrong and how to fix it.
    #[error("invalid check component: {0}")]
    InvalidComponent(String),
    /// The wasmtime engine could not be configured (for example, a pool larger than the address space).
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    /// A capability grant cannot be honoured (for example, a CA bundle that holds no certificate).
    #[error("invalid grant: {0}")]
    Grant(String),
    /// The compiled-check cache directory could not be used.
    #[error("compiled-check cache {path}: {source}")]
    Cache {
        /// The directory or file that failed.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}
