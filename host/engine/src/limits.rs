//! The budget of one evaluation (wall time, linear memory, the size of what a check may return) and how
//! evaluations of a check share instances.

use std::time::Duration;

/// Limits applied to every evaluation of a check. The defaults suit a check that parses one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of the whole evaluation, instantiation and host calls included (epoch interruption
    /// while wasm runs, a deadline around the call otherwise); at most [`Limits::MAX_TIMEOUT`].
    pub timeout: Duration,
    /// Cap on the check's linear memory, in bytes.
    pub memory_bytes: usize,
    /// Cap on the bytes of `reason` + `message` + `error` in the result.
    pub max_result_bytes: usize,
    /// A fresh instance per evaluation (the default), or instances reused between evaluations.
    pub isolation: Isolation,
}

/// Whether an evaluation gets an instance of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// A fresh instance per evaluation: nothing a check keeps in memory outlives its evaluation.
    #[default]
    Fresh,
    /// An instance serves up to `max_uses` evaluations of the same check (same digest) with the same
    /// configuration for objects of the same namespace, one at a time, and is retired sooner after a trap,
    /// a timeout, a memory failure or a result the host refused. What is lost: anything the check keeps in
    /// memory (globals, caches, its heap) is seen by the next evaluations of that check, configuration and
    /// namespace; other namespaces, configurations and checks never share an instance. What is gained: the
    /// language runtime's start (Go's runtime, an interpreter's snapshot) is paid once per `max_uses`.
    Reuse {
        /// Evaluations one instance serves before it is retired (at least 1).
        max_uses: u32,
    },
}

impl Isolation {
    /// Evaluations a reused instance serves when the check's ConfigMap does not say.
    pub const DEFAULT_MAX_USES: u32 = 100;
}

impl Limits {
    /// 1 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
    /// 64 MiB.
    pub const DEFAULT_MEMORY_BYTES: usize = 64 << 20;
    /// 60 s: the longest wall-clock budget honoured; longer timeouts are capped (a preflight check that
    /// needs more is doing a controller's job).
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
    /// 64 KiB: a status condition message is at most 32 KiB.
    pub const DEFAULT_MAX_RESULT_BYTES: usize = 64 << 10;

    /// The timeout honoured: `timeout`, at most [`Limits::MAX_TIMEOUT`].
    pub fn effective_timeout(&self) -> Duration {
        self.timeout.min(Self::MAX_TIMEOUT)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Self::DEFAULT_TIMEOUT,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            max_result_bytes: Self::DEFAULT_MAX_RESULT_BYTES,
            isolation: Isolation::Fresh,
        }
    }
}

/// Parses sizes such as `64MiB`, `512KiB`, `1000000` (bytes).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let size: bytesize::ByteSize = text
        .parse()
        .map_err(|error| format!("invalid size {text:?}: {error}"))?;
    usize::try_from(size.as_u64()).map_err(|_| format!("size {text:?} is too large"))
}
