//! What the engine hands a check: the object and configuration as JSON, the object's identity and the time.

pub use preflight_object_identity::Target;
use std::time::SystemTime;

/// The input of one evaluation.
#[derive(Debug, Clone)]
pub struct Request {
    /// The object, as JSON.
    pub object: String,
    /// The check's configuration, as JSON (`{}` when none).
    pub config: String,
    /// The object's identity.
    pub target: Target,
    /// The time the check should take as "now".
    pub now: SystemTime,
}
