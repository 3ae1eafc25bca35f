//! Do not reconcile until the dependency an object names is available; retry in N minutes, with jitter.
//!
//! This is the case kubebuilder-declarative-pattern users asked for: "don't reconcile now, retry in 10
//! minutes". The object names its dependencies in `spec.dependsOn`; the check's configuration lists the
//! dependencies that are available. Configuration (all optional but `available`):
//!
//! ```json
//! { "available": ["postgres-main"], "retryAfterSeconds": 600, "jitterPercent": 10 }
//! ```
//!
//! The jitter is derived from the object's identity, so objects waiting on the same dependency spread their
//! retries while each object keeps a stable schedule (and a stable condition message).

use preflight_guest::{Object, Outcome, Request};
use serde::Deserialize;
use std::time::Duration;

/// The part of the object's spec this check reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// Names of the dependencies the object needs before it can be reconciled.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// The check's configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Config {
    /// Dependencies that are available now.
    pub available: Vec<String>,
    /// How long to wait before checking again.
    pub retry_after_seconds: u32,
    /// Up to this percentage of `retry_after_seconds` is added, per object.
    pub jitter_percent: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            available: Vec::new(),
            retry_after_seconds: 600,
            jitter_percent: 10,
        }
    }
}

/// The check: proceed when every dependency is available, otherwise requeue after the configured delay.
pub fn check(request: Request<Object<Spec>, Config>) -> Outcome {
    let config = &request.config;
    let missing: Vec<&str> = request
        .object
        .spec
        .depends_on
        .iter()
        .filter(|name| !config.available.contains(name))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return Outcome::proceed()
            .because("DependenciesAvailable", "all dependencies are available");
    }
    let delay = preflight_guest::with_jitter(
        Duration::from_secs(config.retry_after_seconds.into()),
        config.jitter_percent,
        &request.target,
    );
    preflight_guest::debug(&format!(
        "{} is waiting for {}",
        request.target.name,
        missing.join(", ")
    ));
    Outcome::requeue_after(delay).because(
        "DependencyMissing",
        format!(
            "waiting for {}; checking again every {} s",
            missing.join(", "),
            config.retry_after_seconds
        ),
    )
}

preflight_guest::check!(check);
preflight_guest::reads!("spec.dependsOn");

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_guest::testing::evaluate;
    use std::time::SystemTime;

    fn object(name: &str, depends_on: &str) -> String {
        format!(
            r#"{{"apiVersion":"example.com/v1","kind":"App","metadata":{{"name":"{name}","namespace":"default"}},"spec":{{"dependsOn":{depends_on}}}}}"#
        )
    }

    #[test]
    fn proceeds_when_every_dependency_is_available() {
        let outcome = evaluate(
            check,
            &object("a", r#"["db"]"#),
            r#"{"available":["db","cache"]}"#,
            SystemTime::now(),
        );
        assert!(outcome.is_proceed());
        assert_eq!(outcome.delay(), None);
    }

    #[test]
    fn a_typed_object_gives_the_same_verdicts_with_no_json() {
        let typed = |depends_on: &[&str]| Object {
            api_version: "example.com/v1".to_owned(),
            kind: "App".to_owned(),
            metadata: Default::default(),
            spec: Spec {
                depends_on: depends_on.iter().map(|name| name.to_string()).collect(),
            },
        };
        let config = Config {
            available: vec!["db".to_owned()],
            ..Config::default()
        };
        let target = preflight_guest::Target {
            group: "example.com".to_owned(),
            version: "v1".to_owned(),
            kind: "App".to_owned(),
            namespace: Some("default".to_owned()),
            name: "a".to_owned(),
        };
        let call = |object| {
            preflight_guest::testing::call(
                check,
                object,
                config.clone(),
                target.clone(),
                SystemTime::now(),
            )
        };
        assert!(call(typed(&["db"])).is_proceed());
        let waiting = call(typed(&["db", "queue"]));
        assert_eq!(waiting.reason(), "DependencyMissing");
        assert!(waiting.message().contains("queue"));
    }

    #[test]
    fn requeues_with_bounded_stable_jitter_when_a_dependency_is_missing() {
        let config = r#"{"available":["db"],"retryAfterSeconds":60,"jitterPercent":50}"#;
        let first = evaluate(
            check,
            &object("a", r#"["db","queue"]"#),
            config,
            SystemTime::now(),
        );
        assert!(!first.is_proceed());
        assert_eq!(first.reason(), "DependencyMissing");
        assert!(first.message().contains("queue"));
        let delay = first.delay().expect("a missing dependency requeues");
        assert!(
            delay >= Duration::from_secs(60) && delay < Duration::from_secs(90),
            "{delay:?}"
        );
        let again = evaluate(
            check,
            &object("a", r#"["db","queue"]"#),
            config,
            SystemTime::now(),
        );
        assert_eq!(
            again.delay(),
            Some(delay),
            "the same object keeps its schedule"
        );
        let delays: std::collections::BTreeSet<_> = (0..20)
            .map(|i| {
                evaluate(
                    check,
                    &object(&format!("app-{i}"), r#"["queue"]"#),
                    config,
                    SystemTime::now(),
                )
                .delay()
            })
            .collect();
        assert!(
            delays.len() > 10,
            "objects spread their retries: {delays:?}"
        );
    }

    #[test]
    fn an_object_without_the_expected_shape_is_an_error() {
        let outcome = evaluate(
            check,
            r#"{"metadata":{},"spec":{"dependsOn":"db"}}"#,
            "{}",
            SystemTime::now(),
        );
        assert!(outcome.error_message().unwrap().contains("does not match"));
    }
}
