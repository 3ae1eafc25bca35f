//! What stopped a check, named: its time, its memory, an oversized result, or a trap (with what it last said).
//! Also the two ways a call is cut off that the names come from: the deadline and the host-call budget.

use crate::guest_state::{GuestState, LOG_BYTES_CAP, MemoryLimitExceeded, TableLimitExceeded};
use crate::limits::Limits;
use crate::outcome::{Failure, FailureKind};
use std::time::{Duration, Instant};
use wasmtime::Trap;

/// The check ran out of time. Raised from the epoch callback, so it traps the guest.
#[derive(Debug, thiserror::Error)]
#[error("the check ran longer than its {0:?} time limit")]
pub(crate) struct DeadlineExceeded(pub Duration);

/// `run`, cut off at `deadline` (the epoch callback only fires while wasm runs; this also ends host calls,
/// and dropping the future unwinds the guest's stack and frees its slot).
pub(crate) async fn within<T>(
    deadline: Instant,
    limits: &Limits,
    run: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    tokio::time::timeout_at(deadline.into(), run)
        .await
        .unwrap_or_else(|_| {
            Err(wasmtime::Error::new(DeadlineExceeded(
                limits.effective_timeout(),
            )))
        })
}

/// How many bytes a check may pass to the host in one call (its result, a log line, a write to stderr):
/// wasmtime copies them into host memory before the host sees them, so this bounds what a huge result costs
/// the host. Above the result cap, so that a result just over it is refused with its exact size.
pub(crate) fn hostcall_budget(limits: &Limits) -> usize {
    limits
        .max_result_bytes
        .saturating_mul(2)
        .max(LOG_BYTES_CAP)
        .saturating_add(HOSTCALL_OVERHEAD_BYTES)
}

/// Room in the host-call budget for what is not text: the record's fields, lengths and alignment.
const HOSTCALL_OVERHEAD_BYTES: usize = 4 << 10;

/// How wasmtime says that a guest passed more than the host-call budget (its error type is private).
const HOSTCALL_BUDGET_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// Names what stopped a check: its time, its memory, an oversized result, or a trap (quoting the last error
/// it logged and the end of its stderr, where language runtimes print panics).
pub(crate) fn classify(error: &wasmtime::Error, state: &GuestState, limits: &Limits) -> Failure {
    if let Some(deadline) = error.downcast_ref::<DeadlineExceeded>() {
        return Failure::new(FailureKind::Timeout, deadline.to_string());
    }
    if error
        .chain()
        .any(|cause| cause.to_string().contains(HOSTCALL_BUDGET_EXHAUSTED))
    {
        return Failure::new(
            FailureKind::InvalidResult,
            format!(
                "the check passed more than {} bytes to the host in one call (its result or a log \
                 line), refused before the copy; the limit is {} bytes of reason, message and error",
                hostcall_budget(limits),
                limits.max_result_bytes
            ),
        );
    }
    if let Some(memory) = error.downcast_ref::<MemoryLimitExceeded>() {
        return Failure::new(FailureKind::MemoryLimit, memory.to_string());
    }
    if let Some(table) = error.downcast_ref::<TableLimitExceeded>() {
        return Failure::new(FailureKind::MemoryLimit, table.to_string());
    }
    let what = if let Some(trap) = error.downcast_ref::<Trap>() {
        format!("the check trapped: {trap}")
    } else if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        format!(
            "the check exited with status {} instead of returning a result",
            exit.0
        )
    } else {
        format!("the check failed: {error:#}")
    };
    let mut message = what;
    if let Some(line) = state.last_error_line() {
        message += &format!("; it last logged: {line}");
    }
    if let Some(stderr) = state.stderr.text() {
        message += &format!("; its stderr ended with: {stderr}");
    }
    Failure::new(FailureKind::Trap, message)
}
