//! The operator's error type: what can stop it from starting. Failures of a check are not errors here (they
//! are classified outcomes, recorded on the object), and neither are API errors while reconciling (they are
//! retried and counted).

/// Why the operator could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The WebAssembly engine could not be set up.
    #[error(transparent)]
    Engine(#[from] preflight_engine::Error),
    /// Leader election could not start (for example, no permission on Leases).
    #[error("leader election: {0}")]
    LeaderElection(String),
    /// The health and metrics endpoints could not be served.
    #[error("cannot serve on {address}: {source}")]
    Serve {
        /// The address.
        address: std::net::SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A label selector the operator was started with is one the API server cannot read.
    #[error("the {name} {selector:?} is not a label selector the API server reads: {problem}")]
    Selector {
        /// Which selector: `check selector` or `watch selector`.
        name: &'static str,
        /// The selector as given.
        selector: String,
        /// What the API server answered.
        problem: String,
    },
}
