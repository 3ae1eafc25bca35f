//! How a failed watch is reported. Watches end and resume all the time; when the API server no longer holds
//! the version a watch resumes from (410 Gone, "too old resource version", as after the API server restarts),
//! kube's watcher lists again at once: routine, so logged at info. Anything else (no access, no API server)
//! is an error, retried with backoff.

use kube::runtime::watcher;
use tracing::{error, info};

/// Logs a failure of the watch on `watching` (e.g. "check ConfigMaps") at the level it deserves.
pub(crate) fn report(failure: &watcher::Error, watching: &str) {
    if is_expired(failure) {
        info!(error = %failure, "watching {watching}: the API server expired the watch; listing again");
    } else {
        error!(error = %failure, "watching {watching}");
    }
}

/// Whether the API server expired the watch (410 Gone), which the watcher answers by listing again.
pub(crate) fn is_expired(failure: &watcher::Error) -> bool {
    matches!(failure, watcher::Error::WatchError(status) if status.code == 410)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn only_a_gone_watch_counts_as_expired() {
        let status = |code| Box::new(Status::failure("a failure", "Reason").with_code(code));
        let cases = [
            (watcher::Error::WatchError(status(410)), true),
            (watcher::Error::WatchError(status(403)), false),
            (watcher::Error::WatchError(status(500)), false),
            (watcher::Error::NoResourceVersion, false),
        ];
        for (failure, expired) in cases {
            assert_eq!(is_expired(&failure), expired, "{failure}");
        }
    }
}
