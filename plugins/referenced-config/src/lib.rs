//! Do not reconcile until the ConfigMap an object references exists, and holds the key the configuration
//! requires; retry after a delay with jitter. The example of a check that looks up another object
//! (contract 0.2's lookups): its ConfigMap must grant them.
//!
//! ```yaml
//! data:
//!   config: '{"requiredKey": "endpoint", "retryAfterSeconds": 60, "jitterPercent": 10}'
//!   lookups: |
//!     kinds: [v1/ConfigMap]
//! ```
//!
//! The object names its ConfigMap in `spec.configRef`, in its own namespace. A refused or failed lookup is an
//! error (the host backs off and retries, and says why in the condition).

use preflight_guest::{Object, Outcome, Request};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The part of the object's spec this check reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// The name of the ConfigMap, in the object's namespace.
    #[serde(default)]
    pub config_ref: String,
}

/// The check's configuration.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Config {
    /// A key the ConfigMap must hold; none: its existence is enough.
    pub required_key: Option<String>,
    /// How long to wait before looking again.
    pub retry_after_seconds: u32,
    /// Up to this percentage of `retry_after_seconds` is added, per object.
    pub jitter_percent: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            required_key: None,
            retry_after_seconds: 60,
            jitter_percent: 10,
        }
    }
}

/// The part of a ConfigMap the check reads.
#[derive(Debug, Default, Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// The check: proceed when the referenced ConfigMap is there with the required key, else requeue.
pub fn check(request: Request<Object<Spec>, Config>) -> Result<Outcome, String> {
    let config = &request.config;
    let name = &request.object.spec.config_ref;
    if name.is_empty() {
        return Ok(Outcome::error("spec.configRef is empty").because("InvalidSpec", ""));
    }
    let found: Option<ConfigMap> = preflight_guest::cluster::get("v1", "ConfigMap", None, name)
        .map_err(|error| error.to_string())?;
    let waiting = |reason: &str, what: String| {
        let delay = preflight_guest::with_jitter(
            Duration::from_secs(config.retry_after_seconds.into()),
            config.jitter_percent,
            &request.target,
        );
        Outcome::requeue_after(delay).because(
            reason,
            format!(
                "{what}; checking again every {} s",
                config.retry_after_seconds
            ),
        )
    };
    Ok(match (found, &config.required_key) {
        (None, _) => waiting("ConfigMissing", format!("waiting for ConfigMap {name}")),
        (Some(found), Some(key)) if !found.data.contains_key(key) => waiting(
            "ConfigIncomplete",
            format!("ConfigMap {name} has no key {key}"),
        ),
        (Some(_), _) => {
            Outcome::proceed().because("ConfigPresent", format!("ConfigMap {name} is there"))
        }
    })
}

preflight_guest::check!(check);
preflight_guest::reads!("spec.configRef");
