//! A check's stderr, reduced to its last few KiB: where panics of checks that do not use the Rust SDK's hook
//! (other languages' runtimes, plain Rust) end up, so that a trap can say why it happened.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi_io::bytes::Bytes;
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{OutputStream, StreamResult};

/// How many trailing bytes of stderr are kept: all of them are quoted when the check traps.
pub(crate) const STDERR_TAIL_BYTES: usize = 2 << 10;

/// The last [`STDERR_TAIL_BYTES`] bytes written to a check's stderr; older bytes are discarded as new ones
/// arrive, so a check that writes without end costs the host a fixed amount of memory.
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    bytes: Arc<Mutex<VecDeque<u8>>>,
}

impl StderrTail {
    /// What the check wrote last, as text (invalid UTF-8 replaced), trimmed; `None` when it wrote nothing.
    pub fn text(&self) -> Option<String> {
        let bytes = self.lock();
        let (front, back) = bytes.as_slices();
        let text = String::from_utf8_lossy(&[front, back].concat()).into_owned();
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    /// Forgets what was written (a reused instance starts each evaluation with an empty tail).
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn append(&self, data: &[u8]) {
        let mut bytes = self.lock();
        let data = &data[data.len().saturating_sub(STDERR_TAIL_BYTES)..];
        let overflow = (bytes.len() + data.len()).saturating_sub(STDERR_TAIL_BYTES);
        bytes.drain(..overflow);
        bytes.extend(data);
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<u8>> {
        // Bytes only: a panicking writer leaves nothing inconsistent behind.
        self.bytes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for StderrTail {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always ready: whatever is written is kept or pushes older bytes out.
        Ok(STDERR_TAIL_BYTES)
    }
}

#[wasmtime_wasi_io::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for StderrTail {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(data);
        std::task::Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_bytes() {
        let tail = StderrTail::default();
        assert_eq!(tail.text(), None);
        tail.append(b"  \n");
        assert_eq!(tail.text(), None, "whitespace only is nothing");
        tail.append(&vec![b'a'; STDERR_TAIL_BYTES]);
        tail.append(b"panicked at src/lib.rs: boom\n");
        let text = tail.text().unwrap();
        assert_eq!(
            text.len(),
            STDERR_TAIL_BYTES - 1,
            "trailing newline trimmed"
        );
        assert!(text.ends_with("panicked at src/lib.rs: boom"));
        tail.append(&vec![b'z'; 3 * STDERR_TAIL_BYTES]);
        assert_eq!(tail.text().unwrap(), "z".repeat(STDERR_TAIL_BYTES));
    }
}
