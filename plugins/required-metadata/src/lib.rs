//! Block, without requeue, objects that lack required labels or annotations.
//!
//! Nothing but a change to the object can fix a missing label, so the outcome is "block": the host waits
//! for the object (or this check) to change rather than polling. Configuration:
//!
//! ```json
//! { "labels": ["team"], "annotations": ["example.com/owner"] }
//! ```

use preflight_guest::{Object, Outcome, Request};
use serde::Deserialize;

/// The check's configuration: the keys every object must carry.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Required label keys.
    pub labels: Vec<String>,
    /// Required annotation keys.
    pub annotations: Vec<String>,
}

/// The check: proceed when every required key is present, otherwise block and name what is missing.
pub fn check(request: Request<Object, Config>) -> Outcome {
    let config = &request.config;
    if config.labels.is_empty() && config.annotations.is_empty() {
        return Outcome::error("configure at least one required label or annotation")
            .because("InvalidConfig", "");
    }
    let metadata = &request.object.metadata;
    let missing_labels = missing(&config.labels, |key| metadata.labels.contains_key(key));
    let missing_annotations = missing(&config.annotations, |key| {
        metadata.annotations.contains_key(key)
    });
    let mut problems = Vec::new();
    if !missing_labels.is_empty() {
        problems.push(format!("missing label(s): {}", missing_labels.join(", ")));
    }
    if !missing_annotations.is_empty() {
        problems.push(format!(
            "missing annotation(s): {}",
            missing_annotations.join(", ")
        ));
    }
    if problems.is_empty() {
        Outcome::proceed().because(
            "RequiredMetadataPresent",
            "all required labels and annotations are set",
        )
    } else {
        Outcome::block().because("RequiredMetadataMissing", problems.join("; "))
    }
}

fn missing(required: &[String], present: impl Fn(&str) -> bool) -> Vec<&str> {
    required
        .iter()
        .map(String::as_str)
        .filter(|key| !present(key))
        .collect()
}

preflight_guest::check!(check);
preflight_guest::reads!("metadata.labels", "metadata.annotations");

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_guest::testing::evaluate;
    use std::time::SystemTime;

    const CONFIG: &str = r#"{"labels":["team"],"annotations":["example.com/owner"]}"#;

    #[test]
    fn blocks_without_requeue_and_names_every_missing_key() {
        let object = r#"{"metadata":{"name":"a","labels":{"other":"x"}},"spec":{}}"#;
        let outcome = evaluate(check, object, CONFIG, SystemTime::now());
        assert!(!outcome.is_proceed());
        assert_eq!(outcome.delay(), None);
        assert_eq!(
            outcome.message(),
            "missing label(s): team; missing annotation(s): example.com/owner"
        );
    }

    #[test]
    fn proceeds_when_all_keys_are_present() {
        let object = r#"{"metadata":{"name":"a","labels":{"team":"x"},"annotations":{"example.com/owner":"me"}},"spec":{}}"#;
        assert!(evaluate(check, object, CONFIG, SystemTime::now()).is_proceed());
    }

    #[test]
    fn an_empty_configuration_is_an_error() {
        let outcome = evaluate(check, r#"{"metadata":{},"spec":{}}"#, "", SystemTime::now());
        assert!(outcome.error_message().is_some());
    }
}
