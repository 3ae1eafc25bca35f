//! A check built against `preflight:check@0.1.1` that imports only what `0.1.0` already had: a host of
//! `0.1.0` must serve it (patch releases only add interfaces).

wit_bindgen::generate!({ world: "preflight-check", path: "wit" });

use preflight::check::types::{CheckRequest, PreflightResult};

struct PatchCheck;

impl exports::preflight::check::evaluate::Guest for PatchCheck {
    fn check(request: CheckRequest) -> PreflightResult {
        preflight::check::log::log(preflight::check::log::Level::Info, "built for 0.1.1");
        PreflightResult {
            proceed: true,
            requeue_after_ms: None,
            error: None,
            reason: "PatchContract".into(),
            message: format!("checked {}", request.target.name),
        }
    }
}

export!(PatchCheck);
