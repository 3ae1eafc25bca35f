//! Tasks tied to their owner's life.

/// Aborts a task when dropped: a helper task (the parts watcher of the check watcher, the share counter of
/// a kind's controller) ends with what it serves.
pub(crate) struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
