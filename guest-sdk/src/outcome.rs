//! What a check answers: proceed, requeue after a delay, block until something changes, or error.

use std::fmt::Display;
use std::time::Duration;

/// The decision of a check, built with [`Outcome::proceed`], [`Outcome::requeue_after`],
/// [`Outcome::block`] or [`Outcome::error`], optionally refined with [`Outcome::because`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub(crate) proceed: bool,
    pub(crate) requeue_after: Option<Duration>,
    pub(crate) error: Option<String>,
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) outputs: Vec<(String, String)>,
}

impl Outcome {
    /// The object may be reconciled now.
    pub fn proceed() -> Self {
        Self::new(true, None, None)
    }

    /// Do not reconcile now; evaluate again after `delay` ("not now, retry in 10 minutes").
    pub fn requeue_after(delay: Duration) -> Self {
        Self::new(false, Some(delay), None)
    }

    /// Do not reconcile; evaluate again only when the object or the check changes.
    pub fn block() -> Self {
        Self::new(false, None, None)
    }

    /// The check could not decide. The host retries with exponential backoff and reports `message`.
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(false, None, Some(message.into()))
    }

    /// Sets the condition's machine `reason` (UpperCamelCase, e.g. `DependencyMissing`) and human `message`.
    pub fn because(mut self, reason: impl Into<String>, message: impl Into<String>) -> Self {
        self.reason = reason.into();
        self.message = message.into();
        self
    }

    /// For a proceeding outcome: evaluate again after `delay` even if nothing changes (e.g. when a
    /// maintenance window closes). For a non-proceeding one this is the same as [`Outcome::requeue_after`].
    pub fn recheck_after(mut self, delay: Duration) -> Self {
        self.requeue_after = Some(delay);
        self
    }

    /// Adds an output: a key and value the operator records on the object when they change (by default
    /// in its `preflight.dev/outputs` annotation), e.g. the identifier of the dependency found. At most 16
    /// outputs, keys of letters, digits, `-`, `_` and `.` up to 63 characters, 4 KiB in all; a key given
    /// twice keeps its last value.
    pub fn output(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.outputs.retain(|(existing, _)| *existing != key);
        self.outputs.push((key, value.into()));
        self
    }

    /// The outputs, in the order given.
    pub fn outputs(&self) -> &[(String, String)] {
        &self.outputs
    }

    /// Whether the object may be reconciled now.
    pub fn is_proceed(&self) -> bool {
        self.proceed
    }

    /// The delay after which the host evaluates again, if any.
    pub fn delay(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// The error message, if the check could not decide.
    pub fn error_message(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The condition reason.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The condition message.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn new(proceed: bool, requeue_after: Option<Duration>, error: Option<String>) -> Self {
        Self {
            proceed,
            requeue_after,
            error,
            reason: String::new(),
            message: String::new(),
            outputs: Vec::new(),
        }
    }
}

/// What a check function may return: an [`Outcome`], or a `Result` whose error becomes [`Outcome::error`].
pub trait IntoOutcome {
    /// Converts into the outcome sent to the host.
    fn into_outcome(self) -> Outcome;
}

impl IntoOutcome for Outcome {
    fn into_outcome(self) -> Outcome {
        self
    }
}

impl<E: Display> IntoOutcome for Result<Outcome, E> {
    fn into_outcome(self) -> Outcome {
        self.unwrap_or_else(|error| Outcome::error(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_the_fields_they_name() {
        let requeue = Outcome::requeue_after(Duration::from_secs(600))
            .because("DependencyMissing", "db not ready");
        assert!(!requeue.is_proceed());
        assert_eq!(requeue.delay(), Some(Duration::from_secs(600)));
        assert_eq!(
            (requeue.reason(), requeue.message()),
            ("DependencyMissing", "db not ready")
        );

        let proceed = Outcome::proceed().recheck_after(Duration::from_secs(5));
        assert!(proceed.is_proceed());
        assert_eq!(proceed.delay(), Some(Duration::from_secs(5)));

        assert_eq!(Outcome::block().delay(), None);
        assert!(!Outcome::block().is_proceed());
        assert_eq!(Outcome::error("boom").error_message(), Some("boom"));

        let found = Outcome::proceed()
            .output("databaseId", "db-1")
            .output("region", "eu")
            .output("databaseId", "db-2");
        assert_eq!(
            found.outputs(),
            [
                ("region".to_owned(), "eu".to_owned()),
                ("databaseId".to_owned(), "db-2".to_owned())
            ]
        );
    }

    #[test]
    fn an_err_result_becomes_an_error_outcome() {
        let failed: Result<Outcome, String> = Err("cannot parse".into());
        assert_eq!(failed.into_outcome().error_message(), Some("cannot parse"));
        let ok: Result<Outcome, String> = Ok(Outcome::proceed());
        assert!(ok.into_outcome().is_proceed());
    }
}
