//! The dependency-ready rule as Kubewarden users write a policy: accept an object when every dependency in
//! its `spec.dependsOn` is listed in the settings' `available`, reject it otherwise.

use kubewarden_policy_sdk::request::ValidationRequest;
use kubewarden_policy_sdk::settings::Validatable;
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};
use kubewarden_policy_sdk::{accept_request, protocol_version_guest, reject_request, validate_settings};
use serde::Deserialize;

/// The policy's settings: the dependencies available now.
#[derive(Debug, Default, Deserialize, serde::Serialize)]
#[serde(default)]
struct Settings {
    available: Vec<String>,
}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The part of the object the rule reads.
#[derive(Deserialize)]
struct App {
    #[serde(default)]
    spec: Spec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    depends_on: Vec<String>,
}

/// Registers the policy's functions with the waPC host.
#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings::<Settings>);
    guest::register_function("protocol_version", protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    let request: ValidationRequest<Settings> = ValidationRequest::new(payload)?;
    let app: App = serde_json::from_value(request.request.object)?;
    let missing: Vec<&str> = app
        .spec
        .depends_on
        .iter()
        .filter(|name| !request.settings.available.contains(name))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        accept_request()
    } else {
        reject_request(Some(format!("waiting for {}", missing.join(", "))), None, None, None)
    }
}
