//! The conformance check in Rust (see README.md beside this crate): what it does is picked by the object's
//! `spec.behave`, so that one fixtures file drives every language's build through the same paths.

use preflight_guest::{Object, Outcome, Request};
use serde::Deserialize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, UNIX_EPOCH};

/// The part of the object this check reads.
#[derive(Debug, Default, Deserialize)]
pub struct Spec {
    /// What to do; an object without it is invalid.
    pub behave: Option<String>,
    /// For `requeue`: the delay in seconds.
    #[serde(default)]
    pub seconds: Option<u32>,
    /// For `since`: an RFC 3339 time, echoed as Unix milliseconds.
    #[serde(default)]
    pub at: Option<String>,
}

/// The check's configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Echoed in the `greeting` output.
    pub greeting: String,
}

/// Evaluations this instance has served: 1 in a fresh instance, more when the host reuses instances.
static CALLS: AtomicU32 = AtomicU32::new(0);

/// The check: one behaviour per `spec.behave`.
pub fn check(request: Request<Object<Spec>, Config>) -> Outcome {
    let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    let spec = &request.object.spec;
    let Some(behave) = spec.behave.as_deref() else {
        return Outcome::error(
            "the object does not match the check's type: spec.behave is missing",
        )
        .because("InvalidObject", "");
    };
    match behave {
        "proceed" => {
            let now = request.now.duration_since(UNIX_EPOCH).unwrap_or_default();
            Outcome::proceed()
                .because("Ready", "ready")
                .output(
                    "namespace",
                    request.target.namespace.clone().unwrap_or_default(),
                )
                .output("greeting", &request.config.greeting)
                .output("now", now.as_millis().to_string())
        }
        "requeue" => {
            let seconds = spec.seconds.unwrap_or_default();
            Outcome::requeue_after(Duration::from_secs(seconds.into()))
                .because("Waiting", format!("waiting {seconds} s"))
        }
        "since" => match preflight_guest::parse_time(spec.at.as_deref().unwrap_or_default()) {
            Ok(unix_ms) => Outcome::proceed()
                .because("Parsed", "")
                .output("at", unix_ms.to_string()),
            Err(problem) => Outcome::error(format!(
                "the object does not match the check's type: spec.at: {problem}"
            ))
            .because("InvalidObject", ""),
        },
        "block" => Outcome::block().because("Blocked", "blocked"),
        "count" => Outcome::proceed()
            .because("Counted", "")
            .output("calls", calls.to_string()),
        "error" => Outcome::error("it failed").because("Failed", ""),
        "bad-reason" => Outcome::proceed().because("not camel case", ""),
        "trap" => panic!("conformance: a trap, as asked"),
        "loop" => loop {
            std::hint::spin_loop();
        },
        other => Outcome::error(format!("unknown behaviour {other:?}")),
    }
}

preflight_guest::check!(check);
