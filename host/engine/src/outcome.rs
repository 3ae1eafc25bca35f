//! What an evaluation produced: the check's verdict, or a classified failure.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The answer of a check that ran and decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The object may be reconciled now.
    pub proceed: bool,
    /// Evaluate again after this delay; `None` when the check gave none (or 0).
    pub requeue_after: Option<Duration>,
    /// Machine-readable reason (UpperCamelCase), possibly empty.
    pub reason: String,
    /// Human-readable message, possibly empty.
    pub message: String,
    /// Keys and values to record on the object (contract 0.2); empty for 0.1 checks.
    pub outputs: BTreeMap<String, String>,
}

impl Verdict {
    /// The reason for a status condition: the check's own, or `Proceed` / `NotReady` when it gave none.
    /// The operator and the CLI both show this one.
    pub fn condition_reason(&self) -> &str {
        match (self.reason.as_str(), self.proceed) {
            ("", true) => "Proceed",
            ("", false) => "NotReady",
            (reason, _) => reason,
        }
    }
}

/// How an evaluation failed. The first four are retried with backoff; the last three wait for a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The check returned an error: it could not decide.
    CheckError,
    /// The check ran past its time budget.
    Timeout,
    /// The check tried to grow its memory past the cap.
    MemoryLimit,
    /// The check trapped (a panic, an out-of-bounds access, a stack overflow, ...).
    Trap,
    /// The component cannot be used as a check (bad bytes, wrong world or version, unsupported imports).
    InvalidComponent,
    /// The check returned something the contract forbids (too large, an invalid reason, contradictions).
    InvalidResult,
    /// The check's `validate-config` rejected its configuration.
    InvalidConfig,
}

impl FailureKind {
    /// The short name used in JSON output and metrics: `check`, `timeout`, `memory`, `trap`,
    /// `invalid-component`, `invalid-result`, `invalid-config`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CheckError => "check",
            Self::Timeout => "timeout",
            Self::MemoryLimit => "memory",
            Self::Trap => "trap",
            Self::InvalidComponent => "invalid-component",
            Self::InvalidResult => "invalid-result",
            Self::InvalidConfig => "invalid-config",
        }
    }

    /// The condition reason used when the check gave none.
    pub fn default_reason(self) -> &'static str {
        match self {
            Self::CheckError => "CheckError",
            Self::Timeout => "CheckTimeout",
            Self::MemoryLimit => "CheckMemoryLimit",
            Self::Trap => "CheckTrapped",
            Self::InvalidComponent => "InvalidCheck",
            Self::InvalidResult => "InvalidCheckResult",
            Self::InvalidConfig => "InvalidCheckConfig",
        }
    }

    /// Whether trying again may help. An invalid check or result stays invalid until the check changes.
    pub fn is_retryable(self) -> bool {
        !matches!(
            self,
            Self::InvalidComponent | Self::InvalidResult | Self::InvalidConfig
        )
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed evaluation: what kind of failure, the condition reason, and a precise message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The classification.
    pub kind: FailureKind,
    /// The condition reason: the check's own for [`FailureKind::CheckError`] when it gave one.
    pub reason: String,
    /// What went wrong, for humans.
    pub message: String,
}

impl Failure {
    /// A failure of `kind` with its default reason.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            reason: kind.default_reason().to_owned(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.kind, self.message)
    }
}

/// The outcome of one check on one object.
pub type CheckOutcome = Result<Verdict, Failure>;

/// One evaluation: its outcome, how long it took, and what the check logged.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The verdict or the failure.
    pub outcome: CheckOutcome,
    /// Wall time from the start of instantiation to the end of the call.
    pub duration: Duration,
    /// Lines the check logged, up to the host's cap.
    pub logs: Vec<LogLine>,
    /// Lines dropped because the cap was reached.
    pub logs_dropped: usize,
    /// Outbound requests and lookups the host refused or could not complete, each naming its destination
    /// (the check itself sees only an error code).
    pub refusals: Vec<String>,
}

/// Severity of a check's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Trace.
    Trace,
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Warn.
    Warn,
    /// Error.
    Error,
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Trace => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
        })
    }
}

/// A line a check logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Severity.
    pub level: LogLevel,
    /// Text.
    pub message: String,
}
