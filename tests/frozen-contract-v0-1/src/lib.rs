//! A dependency check exactly as a 0.1 author wrote it, against the released `wit/v0.1` file: proceeds
//! when the configuration's `available` list names the object's `spec.dependency`, requeues after 30 s
//! otherwise. A host serving contract 0.2 must run it unchanged.

wit_bindgen::generate!({ world: "preflight-check", path: "../../wit/v0.1" });

use preflight::check::types::{CheckRequest, PreflightResult};

struct FrozenCheck;

impl exports::preflight::check::evaluate::Guest for FrozenCheck {
    fn check(request: CheckRequest) -> PreflightResult {
        preflight::check::log::log(preflight::check::log::Level::Info, "a 0.1 check");
        let dependency = field(&request.object, "\"dependency\":\"");
        let available = request.config.contains(&format!("\"{dependency}\""));
        PreflightResult {
            proceed: available,
            requeue_after_ms: (!available).then_some(30_000),
            error: None,
            reason: if available { "Available" } else { "Missing" }.into(),
            message: format!("{} needs {dependency}", request.target.name),
        }
    }
}

/// The string value after `marker` (the check avoids a JSON parser to stay free of dependencies).
fn field<'a>(json: &'a str, marker: &str) -> &'a str {
    json.split_once(marker)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map_or("", |(value, _)| value)
}

export!(FrozenCheck);
