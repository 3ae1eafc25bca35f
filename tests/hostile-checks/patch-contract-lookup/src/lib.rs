//! A check built against `preflight:check@0.1.1` that imports the interface that release added: a host of
//! `0.1.0` must refuse it at load time, naming that import.

wit_bindgen::generate!({ world: "needs-lookup", path: "../patch-contract/wit" });

use preflight::check::types::{CheckRequest, PreflightResult};

struct LookupCheck;

impl exports::preflight::check::evaluate::Guest for LookupCheck {
    fn check(request: CheckRequest) -> PreflightResult {
        let found = preflight::check::lookup::get(&request.target.name);
        PreflightResult {
            proceed: found.is_some(),
            requeue_after_ms: None,
            error: None,
            reason: "Lookup".into(),
            message: String::new(),
        }
    }
}

export!(LookupCheck);
