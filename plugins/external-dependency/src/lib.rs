//! Do not reconcile until an external system says the dependency exists; then expose its key.
//!
//! The request this project comes from: "a resource depends on something existing in an external system;
//! a preflight check ensures it is available, exposes a key for it on the status, and when it is not there
//! says: don't reconcile now, retry in 10 minutes."
//!
//! The object names its dependency in `spec.dependency`. The check sends `GET {endpoint}{dependency}`:
//! - `200` with `{"key": "..."}`: proceed, and output the key (the operator records it on the object);
//! - `404`: requeue after `retryAfterSeconds` plus up to `jitterPercent`% (stable per object);
//! - anything else, or a refused request: an error (the host backs off and retries).
//!
//! Configuration (the endpoint must be in the ConfigMap's `http` allow-list):
//!
//! ```json
//! { "endpoint": "https://deps.example.com/dependencies/", "retryAfterSeconds": 600, "jitterPercent": 10 }
//! ```

use preflight_guest::{Object, Outcome, Request};
use serde::Deserialize;
use std::time::Duration;

/// The part of the object's spec this check reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// The name of the dependency in the external system.
    #[serde(default)]
    pub dependency: String,
}

/// The check's configuration.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Config {
    /// Base URL; the dependency's name is appended.
    pub endpoint: String,
    /// How long to wait before asking again while the dependency is missing.
    pub retry_after_seconds: u32,
    /// Up to this percentage of `retry_after_seconds` is added, per object.
    pub jitter_percent: u32,
    /// The output key under which the dependency's key is recorded.
    pub output_key: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            retry_after_seconds: 600,
            jitter_percent: 10,
            output_key: "dependencyKey".to_owned(),
        }
    }
}

/// What the external system answers for a dependency that exists.
#[derive(Debug, Deserialize)]
struct Found {
    key: String,
}

/// Checked once per configuration, at load: an endpoint is required and must be an http(s) URL.
pub fn validate(config: &Config) -> Result<(), String> {
    if !(config.endpoint.starts_with("http://") || config.endpoint.starts_with("https://")) {
        return Err(format!(
            "endpoint {:?} must be an http:// or https:// URL",
            config.endpoint
        ));
    }
    if config.retry_after_seconds == 0 {
        return Err("retryAfterSeconds must be at least 1".to_owned());
    }
    Ok(())
}

/// The check.
pub fn check(request: Request<Object<Spec>, Config>) -> Result<Outcome, String> {
    let config = &request.config;
    let dependency = &request.object.spec.dependency;
    if dependency.is_empty() {
        return Ok(Outcome::error("spec.dependency is empty").because("InvalidSpec", ""));
    }
    if !dependency
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Ok(Outcome::error(format!(
            "spec.dependency {dependency:?} is not a plain name"
        ))
        .because("InvalidSpec", ""));
    }
    let url = format!("{}{dependency}", config.endpoint);
    let response = preflight_guest::http::get(&url).map_err(|error| error.to_string())?;
    match response.status {
        200 => {
            let found: Found = response.json().map_err(|error| error.to_string())?;
            Ok(Outcome::proceed()
                .because("DependencyAvailable", format!("{dependency} is available"))
                .output(config.output_key.as_str(), found.key))
        }
        404 => {
            let delay = preflight_guest::with_jitter(
                Duration::from_secs(config.retry_after_seconds.into()),
                config.jitter_percent,
                &request.target,
            );
            Ok(Outcome::requeue_after(delay).because(
                "DependencyMissing",
                format!(
                    "{dependency} does not exist yet; checking again every {} s",
                    config.retry_after_seconds
                ),
            ))
        }
        status => Err(format!("{url} answered {status}")),
    }
}

preflight_guest::check!(check, validate = validate);
preflight_guest::reads!("spec.dependency");

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_guest::testing::evaluate;
    use std::time::SystemTime;

    #[test]
    fn configurations_need_an_http_endpoint_and_a_delay() {
        let config = |json: &str| serde_json::from_str::<Config>(json).unwrap();
        assert!(validate(&config(r#"{"endpoint":"http://127.0.0.1:1/d/"}"#)).is_ok());
        assert!(validate(&config(r#"{}"#)).unwrap_err().contains("endpoint"));
        assert!(
            validate(&config(
                r#"{"endpoint":"https://h/","retryAfterSeconds":0}"#
            ))
            .unwrap_err()
            .contains("retryAfterSeconds")
        );
        assert!(serde_json::from_str::<Config>(r#"{"endpiont":"x"}"#).is_err());
    }

    #[test]
    fn an_object_without_a_plain_dependency_name_is_an_error() {
        let object = |dependency: &str| {
            format!(
                r#"{{"metadata":{{"name":"a","namespace":"d"}},"spec":{{"dependency":"{dependency}"}}}}"#
            )
        };
        let config = r#"{"endpoint":"http://127.0.0.1:1/d/"}"#;
        for dependency in ["", "../admin", "a?b"] {
            let outcome = evaluate(check, &object(dependency), config, SystemTime::now());
            assert_eq!(outcome.reason(), "InvalidSpec", "{dependency}");
        }
    }
}
