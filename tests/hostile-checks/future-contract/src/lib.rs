//! A check built against a contract version this host does not implement.

wit_bindgen::generate!({ world: "preflight-check", path: "wit" });

struct FutureCheck;

impl exports::preflight::check::evaluate::Guest for FutureCheck {
    fn check(request: String) -> String {
        preflight::check::log::log(&request);
        request
    }
}

export!(FutureCheck);
