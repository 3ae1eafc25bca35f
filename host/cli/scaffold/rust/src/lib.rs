//! {{name}}: a preflight check. While the object's `spec.paused` is true, do not reconcile it: evaluate again
//! after `retryAfterSeconds` (configuration, default 60).

use preflight_guest::{Object, Outcome, Request};
use serde::Deserialize;
use std::time::Duration;

/// The part of the object this check reads; an object that does not match is an `InvalidObject` error.
#[derive(Debug, Default, Deserialize)]
pub struct Spec {
    #[serde(default)]
    pub paused: bool,
}

/// The check's configuration (the `config` key of its ConfigMap).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Config {
    pub retry_after_seconds: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self { retry_after_seconds: 60 }
    }
}

pub fn check(request: Request<Object<Spec>, Config>) -> Outcome {
    let seconds = request.config.retry_after_seconds;
    if request.object.spec.paused {
        return Outcome::requeue_after(Duration::from_secs(seconds))
            .because("Paused", format!("paused; checking again in {seconds} s"));
    }
    Outcome::proceed().because("Ready", "not paused")
}

preflight_guest::check!(check);
// The parts of the object the check reads: the host sends only these (`preflight test` checks both ways).
preflight_guest::reads!("spec.paused");
