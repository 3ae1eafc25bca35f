//! Logging to the host. Lines land in the host's logs tagged with the check and the object; the host caps
//! how much one evaluation may log. Natively (unit tests, benchmarks) lines go to stderr.

use crate::bindings::preflight::check::log::Level;

/// Logs at trace level.
pub fn trace(message: &str) {
    emit(Level::Trace, message);
}

/// Logs at debug level.
pub fn debug(message: &str) {
    emit(Level::Debug, message);
}

/// Logs at info level.
pub fn info(message: &str) {
    emit(Level::Info, message);
}

/// Logs at warn level.
pub fn warn(message: &str) {
    emit(Level::Warn, message);
}

/// Logs at error level. The host quotes the last error line when a check traps.
pub fn error(message: &str) {
    emit(Level::Error, message);
}

#[cfg(target_arch = "wasm32")]
fn emit(level: Level, message: &str) {
    crate::bindings::preflight::check::log::log(level, message);
}

#[cfg(not(target_arch = "wasm32"))]
fn emit(level: Level, message: &str) {
    eprintln!("[{level:?}] {message}");
}
