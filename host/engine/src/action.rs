//! From check outcomes to the controller's action: a pure function, table-tested.
//!
//! | outcome(s) | action | failure count |
//! | --- | --- | --- |
//! | no checks, or every check proceeds | [`Action::Proceed`] (re-check after the shortest delay any check gave) | reset |
//! | some check does not proceed; some check gave a delay | [`Action::Requeue`] after the shortest delay, clamped | reset |
//! | some check does not proceed; no delay given | [`Action::AwaitChange`] | reset |
//! | some check failed in a way retrying may fix (error, timeout, memory, trap) | [`Action::Backoff`] after 5 ms · 2ⁿ, at most 1000 s | +1 |
//! | otherwise some check is invalid (component, result or configuration) | [`Action::Stop`]: wait for the object or the check to change | kept |
//!
//! Errors decide over "not proceed"; retryable failures decide over invalid checks (another check may
//! recover). This mirrors controller-runtime: a requeue-after is not a failure and resets the backoff.

use crate::outcome::{CheckOutcome, FailureKind};
use std::time::Duration;

/// The shortest delay honoured; a check asking for less gets this, so that no check can hot-loop the controller.
pub const MIN_REQUEUE: Duration = Duration::from_secs(1);
/// The longest delay honoured; the object is re-checked at least this often while it waits.
pub const MAX_REQUEUE: Duration = Duration::from_secs(24 * 3600);
/// First backoff delay after a failure (controller-runtime's default).
pub const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// Longest backoff delay (controller-runtime's default).
pub const BACKOFF_MAX: Duration = Duration::from_secs(1000);

/// What the controller does with the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Reconcile now; if `recheck_after` is set, evaluate again after it even if nothing changes.
    Proceed {
        /// When a proceeding check asked to be evaluated again.
        recheck_after: Option<Duration>,
    },
    /// Do not reconcile; evaluate again after the delay.
    Requeue(Duration),
    /// Do not reconcile; evaluate again when the object or a check changes.
    AwaitChange,
    /// A check failed; evaluate again after this backoff delay.
    Backoff(Duration),
    /// A check is unusable; do not retry until the object or a check changes.
    Stop,
}

impl Action {
    /// The short name used in JSON output: `proceed`, `requeue`, `await-change`, `backoff`, `stop`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Proceed { .. } => "proceed",
            Self::Requeue(_) => "requeue",
            Self::AwaitChange => "await-change",
            Self::Backoff(_) => "backoff",
            Self::Stop => "stop",
        }
    }

    /// The delay after which the object is evaluated again, if any.
    pub fn delay(self) -> Option<Duration> {
        match self {
            Self::Proceed { recheck_after } => recheck_after,
            Self::Requeue(delay) | Self::Backoff(delay) => Some(delay),
            Self::AwaitChange | Self::Stop => None,
        }
    }
}

/// An action and the object's consecutive-failure count after it (the input of the next backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// Consecutive failures including this evaluation; 0 after any non-failure.
    pub failures: u32,
}

/// Combines the outcomes of every check of a kind on one object, given the object's failure count so far.
pub fn decide<'a>(
    outcomes: impl IntoIterator<Item = &'a CheckOutcome>,
    prior_failures: u32,
) -> Decision {
    let mut all_proceed = true;
    let mut shortest_delay: Option<Duration> = None;
    let mut worst_failure: Option<FailureKind> = None;
    for outcome in outcomes {
        match outcome {
            Ok(verdict) => {
                all_proceed &= verdict.proceed;
                if let Some(delay) = verdict.requeue_after {
                    shortest_delay =
                        Some(shortest_delay.map_or(delay, |shortest| shortest.min(delay)));
                }
            }
            Err(failure) => {
                let retryable = worst_failure.is_some_and(FailureKind::is_retryable);
                if !retryable {
                    worst_failure = Some(failure.kind);
                }
            }
        }
    }
    let reset = |action| Decision {
        action,
        failures: 0,
    };
    match worst_failure {
        Some(kind) if kind.is_retryable() => {
            let failures = prior_failures.saturating_add(1);
            Decision {
                action: Action::Backoff(backoff_delay(failures)),
                failures,
            }
        }
        Some(_) => Decision {
            action: Action::Stop,
            failures: prior_failures,
        },
        None if all_proceed => reset(Action::Proceed {
            recheck_after: shortest_delay.map(clamp_requeue),
        }),
        None => reset(shortest_delay.map_or(Action::AwaitChange, |delay| {
            Action::Requeue(clamp_requeue(delay))
        })),
    }
}

/// The backoff before retrying after the `failures`-th consecutive failure: 5 ms · 2^(failures−1), at most 1000 s.
pub fn backoff_delay(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(31);
    BACKOFF_BASE.saturating_mul(1 << exponent).min(BACKOFF_MAX)
}

/// Keeps a requested delay within [`MIN_REQUEUE`, `MAX_REQUEUE`].
pub fn clamp_requeue(delay: Duration) -> Duration {
    delay.clamp(MIN_REQUEUE, MAX_REQUEUE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Failure, Verdict};

    fn proceed(delay_s: Option<u64>) -> CheckOutcome {
        verdict(true, delay_s)
    }
    fn wait(delay_s: Option<u64>) -> CheckOutcome {
        verdict(false, delay_s)
    }
    fn verdict(proceed: bool, delay_s: Option<u64>) -> CheckOutcome {
        Ok(Verdict {
            proceed,
            requeue_after: delay_s.map(Duration::from_secs),
            reason: String::new(),
            message: String::new(),
            outputs: Default::default(),
        })
    }
    fn failed(kind: FailureKind) -> CheckOutcome {
        Err(Failure::new(kind, "x"))
    }
    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn every_row_of_the_semantics_table() {
        use Action::*;
        use FailureKind::*;
        let rows: Vec<(&str, Vec<CheckOutcome>, u32, Action, u32)> = vec![
            (
                "no checks: proceed",
                vec![],
                3,
                Proceed {
                    recheck_after: None,
                },
                0,
            ),
            (
                "proceed resets the failure count",
                vec![proceed(None)],
                5,
                Proceed {
                    recheck_after: None,
                },
                0,
            ),
            (
                "proceed with a re-check delay",
                vec![proceed(Some(60))],
                0,
                Proceed {
                    recheck_after: Some(S(60)),
                },
                0,
            ),
            (
                "not proceed, requeue-after d",
                vec![wait(Some(600))],
                0,
                Requeue(S(600)),
                0,
            ),
            (
                "a requeue is not a failure: it resets backoff",
                vec![wait(Some(600))],
                7,
                Requeue(S(600)),
                0,
            ),
            (
                "not proceed, no delay: await change",
                vec![wait(None)],
                2,
                AwaitChange,
                0,
            ),
            (
                "check error: first backoff is 5 ms",
                vec![failed(CheckError)],
                0,
                Backoff(Duration::from_millis(5)),
                1,
            ),
            (
                "check error: backoff doubles",
                vec![failed(CheckError)],
                3,
                Backoff(Duration::from_millis(40)),
                4,
            ),
            (
                "timeout backs off",
                vec![failed(Timeout)],
                0,
                Backoff(Duration::from_millis(5)),
                1,
            ),
            (
                "trap backs off",
                vec![failed(Trap)],
                1,
                Backoff(Duration::from_millis(10)),
                2,
            ),
            (
                "memory limit backs off",
                vec![failed(MemoryLimit)],
                0,
                Backoff(Duration::from_millis(5)),
                1,
            ),
            (
                "invalid component stops, count kept",
                vec![failed(InvalidComponent)],
                2,
                Stop,
                2,
            ),
            (
                "invalid result stops",
                vec![failed(InvalidResult)],
                0,
                Stop,
                0,
            ),
            (
                "rejected configuration stops",
                vec![failed(InvalidConfig)],
                1,
                Stop,
                1,
            ),
            (
                "all must proceed",
                vec![proceed(None), wait(None)],
                0,
                AwaitChange,
                0,
            ),
            (
                "shortest requeue wins",
                vec![wait(Some(600)), wait(Some(30)), wait(None)],
                0,
                Requeue(S(30)),
                0,
            ),
            (
                "a proceeding check's re-check counts too",
                vec![proceed(Some(20)), wait(Some(600))],
                0,
                Requeue(S(20)),
                0,
            ),
            (
                "shortest re-check when all proceed",
                vec![proceed(Some(90)), proceed(Some(60))],
                0,
                Proceed {
                    recheck_after: Some(S(60)),
                },
                0,
            ),
            (
                "errors decide over not proceed",
                vec![wait(Some(30)), failed(CheckError)],
                0,
                Backoff(Duration::from_millis(5)),
                1,
            ),
            (
                "errors decide over proceed",
                vec![proceed(None), failed(Trap)],
                0,
                Backoff(Duration::from_millis(5)),
                1,
            ),
            (
                "retryable failure decides over invalid",
                vec![failed(InvalidComponent), failed(Timeout)],
                0,
                Backoff(Duration::from_millis(5)),
                1,
            ),
            (
                "invalid decides over not proceed",
                vec![wait(Some(30)), failed(InvalidResult)],
                1,
                Stop,
                1,
            ),
            (
                "absurdly short delay is clamped up",
                vec![wait(Some(0)).map(|mut v| {
                    v.requeue_after = Some(Duration::from_millis(1));
                    v
                })],
                0,
                Requeue(MIN_REQUEUE),
                0,
            ),
            (
                "absurdly long delay is clamped down",
                vec![wait(Some(40 * 24 * 3600))],
                0,
                Requeue(MAX_REQUEUE),
                0,
            ),
            (
                "clamping applies to re-checks",
                vec![proceed(Some(365 * 24 * 3600))],
                0,
                Proceed {
                    recheck_after: Some(MAX_REQUEUE),
                },
                0,
            ),
            (
                "backoff is capped at 1000 s",
                vec![failed(CheckError)],
                40,
                Backoff(BACKOFF_MAX),
                41,
            ),
            (
                "failure count saturates",
                vec![failed(CheckError)],
                u32::MAX,
                Backoff(BACKOFF_MAX),
                u32::MAX,
            ),
        ];
        for (name, outcomes, prior, action, failures) in rows {
            assert_eq!(
                decide(&outcomes, prior),
                Decision { action, failures },
                "{name}"
            );
        }
    }

    #[test]
    fn the_backoff_schedule_is_controller_runtimes() {
        let schedule: Vec<Duration> = (1..=20).map(backoff_delay).collect();
        assert_eq!(schedule[0], Duration::from_millis(5));
        assert_eq!(schedule[1], Duration::from_millis(10));
        assert_eq!(schedule[10], Duration::from_millis(5 * 1024));
        assert_eq!(schedule[17], Duration::from_millis(5 << 17));
        assert_eq!(schedule[18], BACKOFF_MAX, "5 ms · 2^18 = 1310 s is capped");
        assert!(schedule.windows(2).all(|pair| pair[0] <= pair[1]));
    }

    #[test]
    fn action_names_and_delays() {
        assert_eq!(Action::Requeue(S(3)).as_str(), "requeue");
        assert_eq!(Action::AwaitChange.as_str(), "await-change");
        assert_eq!(Action::Stop.delay(), None);
        assert_eq!(Action::Backoff(S(2)).delay(), Some(S(2)));
        assert_eq!(
            Action::Proceed {
                recheck_after: None
            }
            .as_str(),
            "proceed"
        );
    }
}
