//! The crate's error type: what can go wrong loading a check or setting up the engine, with its cause kept.
//!
//! Failures of a check while it runs are not errors of the host: they are [`crate::Failure`] values.
//!
//! The message of each error is a whole sentence (it reaches conditions and the CLI as is); the wasmtime
//! error behind it, when there is one, is also kept as the error's [`source`](std::error::Error::source), so
//! that an embedder can walk the chain, and [`ComponentProblem`] says which rule a component broke, so that
//! code (and metrics) can branch on it without reading the text.

/// A cause kept as an error's source (wasmtime's errors, boxed: they are `anyhow` errors).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error of the host itself, or a component that cannot be loaded as a check.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a usable preflight check; the message says what is wrong and how to fix it.
    #[error("invalid check component: {message}")]
    InvalidComponent {
        /// Which rule the component broke.
        problem: ComponentProblem,
        /// What is wrong, and how to fix it.
        message: String,
        /// wasmtime's error, when wasmtime found the problem.
        #[source]
        source: Option<Cause>,
    },
    /// The wasmtime engine could not be configured (for example, a pool larger than the address space).
    #[error("cannot configure the WebAssembly engine: {message}")]
    Engine {
        /// What failed.
        message: String,
        /// wasmtime's error.
        #[source]
        source: Cause,
    },
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

/// Which rule a component that is not a usable check broke, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ComponentProblem {
    /// The bytes are not a WebAssembly component (another file, or a core module).
    Encoding,
    /// wasmtime cannot compile it.
    Compile,
    /// It is not built for a contract version this host serves, or its exports do not match that contract.
    Contract,
    /// It imports what the host does not provide to a check of its contract version.
    Imports,
    /// Its `preflight-reads` declaration is malformed.
    ReadsSection,
    /// It cannot be pre-initialised (`preflight snapshot`): it does not export the initialisation, or its
    /// initialisation failed.
    Initialization,
}

impl ComponentProblem {
    /// A short name for logs and metric labels: `encoding`, `compile`, `contract`, `imports`,
    /// `reads-section`, `initialization`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Encoding => "encoding",
            Self::Compile => "compile",
            Self::Contract => "contract",
            Self::Imports => "imports",
            Self::ReadsSection => "reads-section",
            Self::Initialization => "initialization",
        }
    }
}

impl Error {
    /// A component that breaks `problem`, as `message` says.
    pub(crate) fn invalid(problem: ComponentProblem, message: String) -> Self {
        Self::InvalidComponent {
            problem,
            message,
            source: None,
        }
    }

    /// A component that breaks `problem`, found by wasmtime: its error is quoted after `context` and kept
    /// as the source.
    pub(crate) fn invalid_because(
        problem: ComponentProblem,
        context: &str,
        error: wasmtime::Error,
    ) -> Self {
        Self::InvalidComponent {
            problem,
            message: format!("{context}: {error:#}"),
            source: Some(error.into()),
        }
    }

    /// The engine could not be set up: `context`, then wasmtime's error, kept as the source.
    pub(crate) fn engine(context: &str, error: wasmtime::Error) -> Self {
        Self::Engine {
            message: format!("{context}: {error:#}"),
            source: error.into(),
        }
    }

    /// Which rule the component broke, when the error is an invalid component.
    pub fn component_problem(&self) -> Option<ComponentProblem> {
        match self {
            Self::InvalidComponent { problem, .. } => Some(*problem),
            _ => None,
        }
    }
}
