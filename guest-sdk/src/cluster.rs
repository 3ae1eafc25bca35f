//! Read-only lookups of other Kubernetes objects (contract 0.2), served by the operator from its watch
//! caches. Only the kinds (and Secrets, by name) the check's ConfigMap grants can be read, in the gated
//! object's namespace unless cluster scope is granted; anything else is a [`LookupError`] naming what is
//! not granted. Each evaluation has a budget of lookups.
//!
//! ```no_run
//! use serde_json::Value;
//! // The ConfigMap "db-endpoint" in the gated object's namespace.
//! let found: Option<Value> = preflight_guest::cluster::get("v1", "ConfigMap", None, "db-endpoint")?;
//! # Ok::<(), preflight_guest::cluster::LookupError>(())
//! ```

use serde::de::DeserializeOwned;
use std::fmt;

/// A lookup that was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupError(pub String);

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LookupError {}

/// The object `name` of `kind` in `api_version` (`v1`, `apps/v1`), decoded into `T`; `None` when it does
/// not exist. `namespace` `None`: the gated object's namespace.
pub fn get<T: DeserializeOwned>(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<T>, LookupError> {
    host::get(api_version, kind, namespace, name)?
        .map(|json| decode(&json))
        .transpose()
}

/// The objects of `kind` matching `label_selector` (`app=db,tier!=cache`; empty: all), decoded into `T`.
pub fn list<T: DeserializeOwned>(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    label_selector: &str,
) -> Result<Vec<T>, LookupError> {
    host::list(api_version, kind, namespace, label_selector)?
        .iter()
        .map(|json| decode(json))
        .collect()
}

fn decode<T: DeserializeOwned>(json: &str) -> Result<T, LookupError> {
    serde_json::from_str(json).map_err(|error| {
        LookupError(format!(
            "the object does not match the type expected: {error}"
        ))
    })
}

#[cfg(target_arch = "wasm32")]
mod host {
    use super::LookupError;
    use crate::bindings::preflight::check::cluster;
    use crate::bindings::preflight::check::types::ObjectKind;

    fn object_kind(api_version: &str, kind: &str) -> ObjectKind {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        ObjectKind {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    pub fn get(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, LookupError> {
        cluster::get(&object_kind(api_version, kind), namespace, name).map_err(LookupError)
    }

    pub fn list(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<String>, LookupError> {
        cluster::list(&object_kind(api_version, kind), namespace, label_selector)
            .map_err(LookupError)
    }
}

/// Natively (unit tests) there is no cluster: run the component to exercise lookups.
#[cfg(not(target_arch = "wasm32"))]
mod host {
    use super::LookupError;

    fn unavailable(what: String) -> LookupError {
        LookupError(format!(
            "{what}: lookups need the preflight host; run the component with `preflight run`"
        ))
    }

    pub fn get(
        api_version: &str,
        kind: &str,
        _namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, LookupError> {
        Err(unavailable(format!("get {api_version} {kind} {name}")))
    }

    pub fn list(
        api_version: &str,
        kind: &str,
        _namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<String>, LookupError> {
        Err(unavailable(format!(
            "list {api_version} {kind} {label_selector:?}"
        )))
    }
}
