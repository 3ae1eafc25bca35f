//! Which `preflight` binary a benchmark runs as a child process.

use std::ffi::OsString;

/// This build's `preflight`, or the one `BENCH_PREFLIGHT` names: the image's statically linked binary, say,
/// to measure what a cluster runs.
pub fn preflight() -> OsString {
    std::env::var_os("BENCH_PREFLIGHT").unwrap_or_else(|| env!("CARGO_BIN_EXE_preflight").into())
}
