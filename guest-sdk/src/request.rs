//! What a check is given: the object and its configuration, typed, plus the object's identity and the time.

pub use preflight_object_identity::Target;

use std::time::SystemTime;

/// The input of a check: the object deserialised into `T`, the configuration into `C`.
///
/// Both default to `serde_json::Value`, so `fn check(request: Request) -> Outcome` reads anything.
#[derive(Debug, Clone)]
pub struct Request<T = serde_json::Value, C = serde_json::Value> {
    /// The object being checked.
    pub object: T,
    /// The check's configuration (`{}` when none was given, so `#[serde(default)]` types work).
    pub config: C,
    /// The object's group, version, kind, namespace and name.
    pub target: Target,
    /// The host's clock when the evaluation started.
    pub now: SystemTime,
    pub(crate) raw_object: String,
}

impl<T, C> Request<T, C> {
    /// The object exactly as the host sent it, as JSON.
    pub fn raw_object(&self) -> &str {
        &self.raw_object
    }
}
