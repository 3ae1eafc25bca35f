//! The budget of one evaluation: wall time, linear memory, and the size of what a check may return.

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
