//! Reconcile only inside a maintenance window; outside it, requeue until the window opens.
//!
//! The window is daily, in UTC, optionally limited to some days of the week (the day the window starts).
//! An object may carry its own window in the annotation `preflight.dev/maintenance-window`
//! (`"22:00-02:00"`), which overrides the configured one. Configuration:
//!
//! ```json
//! { "start": "22:00", "end": "02:00", "days": ["Sat", "Sun"] }
//! ```
//!
//! Inside the window the check proceeds and asks to be evaluated again when the window closes.

use preflight_guest::{Object, Outcome, Request};
use serde::Deserialize;
use std::time::{Duration, SystemTime};

/// The annotation with which an object overrides the configured window.
pub const WINDOW_ANNOTATION: &str = "preflight.dev/maintenance-window";

const DAY: u64 = 24 * 3600;
const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// The check's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Opening time, `HH:MM` UTC.
    pub start: String,
    /// Closing time, `HH:MM` UTC; earlier than `start` means the window spans midnight.
    pub end: String,
    /// Days on which the window opens (`Mon` … `Sun`); empty means every day.
    pub days: Vec<String>,
}

/// A parsed window: seconds after midnight UTC, and the weekdays (0 = Monday) on which it opens.
#[derive(Debug, PartialEq, Eq)]
struct Window {
    start: u64,
    length: u64,
    days: Vec<u64>,
}

/// The check.
pub fn check(request: Request<Object, Config>) -> Outcome {
    let annotation = request.object.metadata.annotations.get(WINDOW_ANNOTATION);
    let window = match annotation {
        Some(value) => value
            .split_once('-')
            .ok_or_else(|| {
                format!("annotation {WINDOW_ANNOTATION} must look like 22:00-02:00, got {value:?}")
            })
            .and_then(|(start, end)| Window::parse(start, end, &request.config.days)),
        None => Window::parse(
            &request.config.start,
            &request.config.end,
            &request.config.days,
        ),
    };
    let window = match window {
        Ok(window) => window,
        Err(problem) => return Outcome::error(problem).because("InvalidMaintenanceWindow", ""),
    };
    let now = request
        .now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let description = window.describe();
    match window.position(now) {
        Position::Open { closes_in } => Outcome::proceed()
            .recheck_after(Duration::from_secs(closes_in))
            .because(
                "MaintenanceWindowOpen",
                format!("inside the maintenance window {description}"),
            ),
        Position::Closed { opens_in } => Outcome::requeue_after(Duration::from_secs(opens_in))
            .because(
                "MaintenanceWindowClosed",
                format!("outside the maintenance window {description}"),
            ),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Position {
    Open { closes_in: u64 },
    Closed { opens_in: u64 },
}

impl Window {
    fn parse(start: &str, end: &str, days: &[String]) -> Result<Self, String> {
        let start = parse_clock(start)?;
        let end = parse_clock(end)?;
        let length = if end > start {
            end - start
        } else {
            end + DAY - start
        };
        let days = days
            .iter()
            .map(|day| {
                DAY_NAMES
                    .iter()
                    .position(|name| name.eq_ignore_ascii_case(day))
                    .map(|index| index as u64)
                    .ok_or_else(|| {
                        format!("unknown day {day:?}: use one of {}", DAY_NAMES.join(", "))
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            start,
            length,
            days,
        })
    }

    /// Where `now` (Unix seconds) falls: inside a window (and when it closes) or outside (and when the next opens).
    fn position(&self, now: u64) -> Position {
        let today = now / DAY;
        // A window that opened yesterday may still be open; the next one may be up to a week away.
        for day in today.saturating_sub(1)..=today + 7 {
            if !self.opens_on(day) {
                continue;
            }
            let opens = day * DAY + self.start;
            let closes = opens + self.length;
            if now < opens {
                return Position::Closed {
                    opens_in: opens - now,
                };
            }
            if now < closes {
                return Position::Open {
                    closes_in: closes - now,
                };
            }
        }
        unreachable!("a window that opens on at least one weekday opens within eight days")
    }

    fn opens_on(&self, day_since_epoch: u64) -> bool {
        // 1970-01-01 was a Thursday (index 3 with Monday = 0).
        self.days.is_empty() || self.days.contains(&((day_since_epoch + 3) % 7))
    }

    fn describe(&self) -> String {
        let end = (self.start + self.length) % DAY;
        let days = if self.days.is_empty() {
            "daily".to_owned()
        } else {
            self.days
                .iter()
                .map(|day| DAY_NAMES[*day as usize])
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{}-{} UTC ({days})",
            format_clock(self.start),
            format_clock(end)
        )
    }
}

fn parse_clock(text: &str) -> Result<u64, String> {
    let invalid = || format!("invalid time {text:?}: use HH:MM (UTC)");
    let (hours, minutes) = text.trim().split_once(':').ok_or_else(invalid)?;
    let hours: u64 = hours.parse().map_err(|_| invalid())?;
    let minutes: u64 = minutes.parse().map_err(|_| invalid())?;
    if hours > 23 || minutes > 59 {
        return Err(invalid());
    }
    Ok(hours * 3600 + minutes * 60)
}

fn format_clock(seconds: u64) -> String {
    format!("{:02}:{:02}", seconds / 3600, seconds % 3600 / 60)
}

preflight_guest::check!(check);
preflight_guest::reads!("metadata.annotations[preflight.dev/maintenance-window]");

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_guest::testing::evaluate;

    // 2026-12-05 is a Saturday.
    const SATURDAY_MIDNIGHT: u64 = 1_796_428_800;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    const OBJECT: &str = r#"{"metadata":{"name":"a"},"spec":{}}"#;

    #[test]
    fn the_fixture_day_is_a_saturday() {
        assert_eq!((SATURDAY_MIDNIGHT / DAY + 3) % 7, 5);
    }

    #[test]
    fn outside_the_window_requeues_until_it_opens() {
        let outcome = evaluate(
            check,
            OBJECT,
            r#"{"start":"22:00","end":"02:00"}"#,
            at(SATURDAY_MIDNIGHT + 12 * 3600),
        );
        assert!(!outcome.is_proceed());
        assert_eq!(outcome.delay(), Some(Duration::from_secs(10 * 3600)));
        assert_eq!(
            outcome.message(),
            "outside the maintenance window 22:00-02:00 UTC (daily)"
        );
    }

    #[test]
    fn inside_a_window_that_spans_midnight_proceeds_until_it_closes() {
        let outcome = evaluate(
            check,
            OBJECT,
            r#"{"start":"22:00","end":"02:00"}"#,
            at(SATURDAY_MIDNIGHT + 3600),
        );
        assert!(outcome.is_proceed());
        assert_eq!(outcome.delay(), Some(Duration::from_secs(3600)));
    }

    #[test]
    fn weekday_limits_push_the_next_opening_to_the_right_day() {
        let config = r#"{"start":"01:00","end":"03:00","days":["Mon"]}"#;
        let outcome = evaluate(check, OBJECT, config, at(SATURDAY_MIDNIGHT + 2 * 3600));
        assert_eq!(outcome.delay(), Some(Duration::from_secs(2 * DAY - 3600)));
    }

    #[test]
    fn the_object_annotation_overrides_the_configuration() {
        let object = r#"{"metadata":{"name":"a","annotations":{"preflight.dev/maintenance-window":"11:00-13:00"}},"spec":{}}"#;
        let outcome = evaluate(
            check,
            object,
            r#"{"start":"22:00","end":"02:00"}"#,
            at(SATURDAY_MIDNIGHT + 12 * 3600),
        );
        assert!(outcome.is_proceed());
        assert_eq!(outcome.delay(), Some(Duration::from_secs(3600)));
    }

    #[test]
    fn a_malformed_window_is_an_error_that_says_what_is_wrong() {
        let outcome = evaluate(
            check,
            OBJECT,
            r#"{"start":"25:00","end":"02:00"}"#,
            at(SATURDAY_MIDNIGHT),
        );
        assert!(
            outcome
                .error_message()
                .unwrap()
                .contains("invalid time \"25:00\"")
        );
        let outcome = evaluate(
            check,
            OBJECT,
            r#"{"start":"01:00","end":"02:00","days":["Caturday"]}"#,
            at(0),
        );
        assert!(outcome.error_message().unwrap().contains("unknown day"));
    }
}
