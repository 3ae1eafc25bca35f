//! Run a check function natively, without WebAssembly, for unit tests and benchmarks.

use crate::{IntoOutcome, Outcome, Request, Target, runtime};
use serde::de::DeserializeOwned;
use std::time::SystemTime;

/// Evaluates `function` on `object` (JSON) and `config` (JSON, may be empty) exactly as the component would,
/// including the decoding of both into the function's types.
pub fn evaluate<T, C, R>(
    function: fn(Request<T, C>) -> R,
    object: &str,
    config: &str,
    now: SystemTime,
) -> Outcome
where
    T: DeserializeOwned,
    C: DeserializeOwned,
    R: IntoOutcome,
{
    evaluate_target(function, object, config, target_of(object), now)
}

/// Like [`evaluate`], with the object's identity given rather than read from the object: exactly the
/// work the component does per evaluation (copy the object, decode object and configuration, call).
pub fn evaluate_target<T, C, R>(
    function: fn(Request<T, C>) -> R,
    object: &str,
    config: &str,
    target: Target,
    now: SystemTime,
) -> Outcome
where
    T: DeserializeOwned,
    C: DeserializeOwned,
    R: IntoOutcome,
{
    runtime::decode_and_call(object.to_owned(), config, target, now, function)
}

/// Calls `function` on an object and a configuration already decoded into its types, with no JSON at all:
/// what the check costs compiled into an operator whose cache holds typed objects (a kube-rs reflector).
/// There is no text, so the request's [`Request::raw_object`] is empty.
pub fn call<T, C, R: IntoOutcome>(
    function: fn(Request<T, C>) -> R,
    object: T,
    config: C,
    target: Target,
    now: SystemTime,
) -> Outcome {
    function(Request {
        object,
        config,
        target,
        now,
        raw_object: String::new(),
    })
    .into_outcome()
}

/// The identity of `object` read from its apiVersion, kind and metadata, by the rule the host uses.
fn target_of(object: &str) -> Target {
    Target::of_object(&serde_json::from_str(object).unwrap_or_default())
}
