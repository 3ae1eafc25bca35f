//! The per-evaluation state of a store: the memory budget, the check's log lines and stderr, and the
//! WASI context (a wall clock that reads the request's time).

use crate::bindings::v0_1::{self as bindings, Level};
use crate::stderr_tail::StderrTail;
use std::fmt;
use std::time::{Duration, SystemTime};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{HostWallClock, WasiCtx, WasiCtxView, WasiView};

/// How many bytes of log lines one evaluation may keep; further lines are counted and dropped.
pub(crate) const LOG_BYTES_CAP: usize = 16 << 10;
/// Largest table a check may grow (elements).
const TABLE_ELEMENTS_CAP: usize = 100_000;

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

/// The check asked for more memory than its budget. Raised from the limiter, so it traps the guest.
#[derive(Debug, thiserror::Error)]
#[error("the check asked for {desired} bytes of linear memory; its limit is {limit} bytes")]
pub(crate) struct MemoryLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

/// The check asked for a table larger than the host allows.
#[derive(Debug, thiserror::Error)]
#[error("the check asked for a table of {desired} elements; the limit is {TABLE_ELEMENTS_CAP}")]
pub(crate) struct TableLimitExceeded {
    pub desired: usize,
}

/// Data of one store: created for one evaluation, dropped with it.
pub(crate) struct GuestState {
    memory_limit: usize,
    /// The request's time: what `wasi:clocks/wall-clock` reads, so that an evaluation replays exactly.
    now: SystemTime,
    /// Built on first use: most Rust checks never touch WASI, and building it costs more than an instance.
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    pub logs: Vec<LogLine>,
    pub logs_dropped: usize,
    log_bytes: usize,
    pub stderr: StderrTail,
}

impl GuestState {
    pub fn new(memory_limit: usize, now: SystemTime) -> Self {
        Self {
            memory_limit,
            now,
            wasi: None,
            table: ResourceTable::new(),
            logs: Vec::new(),
            logs_dropped: 0,
            log_bytes: 0,
            stderr: StderrTail::default(),
        }
    }

    /// The last line logged at error level: usually why a check trapped (the Rust SDK logs panics there).
    pub fn last_error_line(&self) -> Option<&str> {
        self.logs
            .iter()
            .rev()
            .find(|line| line.level == LogLevel::Error)
            .map(|line| line.message.as_str())
    }
}

impl wasmtime::ResourceLimiter for GuestState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded {
                desired,
                limit: self.memory_limit,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > TABLE_ELEMENTS_CAP {
            return Err(wasmtime::Error::new(TableLimitExceeded { desired }));
        }
        Ok(true)
    }
}

impl bindings::preflight::check::log::Host for GuestState {
    fn log(&mut self, level: Level, message: String) {
        if self.log_bytes + message.len() > LOG_BYTES_CAP {
            self.logs_dropped += 1;
            return;
        }
        self.log_bytes += message.len();
        let level = match level {
            Level::Trace => LogLevel::Trace,
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        self.logs.push(LogLine { level, message });
    }
}

impl bindings::preflight::check::types::Host for GuestState {}

impl WasiView for GuestState {
    /// The context is locked down: no preopens, no environment, no arguments, closed stdin, discarded
    /// stdout, stderr kept only in a small tail (quoted when the check traps), sockets that deny every
    /// address (and are not linked anyway), and a wall clock stopped at the request's time.
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let (now, stderr) = (self.now, &self.stderr);
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(|| {
                WasiCtx::builder()
                    .wall_clock(StoppedWallClock(now))
                    .stderr(stderr.clone())
                    .build()
            }),
            table: &mut self.table,
        }
    }
}

/// A wall clock that always reads one instant: the request's `now`. A check that asks the clock for the
/// date (as most languages' date libraries do) sees the same time as the request carries, so an
/// evaluation replayed with `--now` is exact. Durations are measured with the monotonic clock, which is real.
struct StoppedWallClock(SystemTime);

impl HostWallClock for StoppedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        self.0
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
    }
}
