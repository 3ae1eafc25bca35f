//! Records a gate result where users look: the `Preflight` condition in the object's status (or, for kinds
//! without a status subresource, an annotation), and an Event on transitions. Writes nothing when the object
//! already says the same.

use super::condition::{self, PreflightCondition};
use super::gate::Summary;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use std::borrow::Cow;
use std::time::SystemTime;

/// The annotation holding the condition (as JSON) on kinds without a status subresource.
pub const CONDITION_ANNOTATION: &str = "preflight.dev/condition";
/// Longest Event note the API server accepts.
const MAX_EVENT_NOTE_BYTES: usize = 1024;
/// Longest Event reason the API server accepts (a condition reason may be longer).
const MAX_EVENT_REASON_BYTES: usize = 128;
/// Attempts to write the condition when the object changes between read and write.
const CONFLICT_ATTEMPTS: usize = 3;

/// Where a kind's condition lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// In `status.conditions`, through the status subresource.
    Status,
    /// In the [`CONDITION_ANNOTATION`] annotation.
    Annotation,
}

/// Writes conditions and Events for one operator identity.
#[derive(Clone)]
pub struct OutcomeWriter {
    client: Client,
    recorder: Recorder,
}

/// What recording did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The object already said the same: no request was made.
    Unchanged,
    /// The condition was written.
    Written,
}

impl OutcomeWriter {
    /// A writer publishing Events as `controller` (instance `instance`, e.g. the pod name).
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
        }
    }

    /// Writes the condition for `summary` on `object` if it differs from what is there, retrying on write
    /// conflicts with a fresh read, and publishes an Event when the status or reason changed. `warning`
    /// marks failures (Warning Events); waiting is Normal.
    pub async fn record(
        &self,
        resource: &ApiResource,
        placement: Placement,
        object: &DynamicObject,
        summary: &Summary,
        warning: bool,
    ) -> Result<Recorded, kube::Error> {
        let api: Api<DynamicObject> = match object.namespace() {
            Some(namespace) => Api::namespaced_with(self.client.clone(), &namespace, resource),
            None => Api::all_with(self.client.clone(), resource),
        };
        let name = object.name_any();
        // Borrowed until a write conflict makes a fresh read necessary: the steady state copies nothing.
        let mut current = Cow::Borrowed(object);
        let mut attempt = 1;
        loop {
            let existing = existing_condition(&current, placement);
            let Some(desired) = condition::next(
                existing.as_ref(),
                summary,
                current.metadata.generation,
                SystemTime::now(),
            ) else {
                return Ok(Recorded::Unchanged);
            };
            match write(&api, &name, &current, placement, &desired).await {
                Ok(()) => {
                    if condition::is_transition(existing.as_ref(), &desired) {
                        self.publish(&current, resource, &desired, warning).await;
                    }
                    return Ok(Recorded::Written);
                }
                Err(kube::Error::Api(status))
                    if status.code == 409 && attempt < CONFLICT_ATTEMPTS =>
                {
                    attempt += 1;
                    current = Cow::Owned(api.get(&name).await?);
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Publishes a Warning Event on a check's ConfigMap (`namespace/name`): where the author of a broken
    /// check looks (`kubectl describe configmap`).
    pub async fn warn_on_config_map(&self, check: &str, reason: &str, note: &str) {
        let (namespace, name) = check.split_once('/').unwrap_or(("", check));
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(clip(note, MAX_EVENT_NOTE_BYTES)),
            action: "LoadCheck".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, check, "cannot publish an Event");
        }
    }

    async fn publish(
        &self,
        object: &DynamicObject,
        resource: &ApiResource,
        condition: &PreflightCondition,
        warning: bool,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: clip(&condition.reason, MAX_EVENT_REASON_BYTES),
            note: Some(clip(&condition.message, MAX_EVENT_NOTE_BYTES)),
            action: "Preflight".into(),
            secondary: None,
        };
        let reference = object.object_ref(resource);
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, object = %object.name_any(), "cannot publish an Event");
        }
    }
}

/// The `Preflight` condition the object carries now.
pub fn existing_condition(
    object: &DynamicObject,
    placement: Placement,
) -> Option<PreflightCondition> {
    match placement {
        Placement::Status => condition::find(object.data.pointer("/status/conditions")),
        Placement::Annotation => object
            .annotations()
            .get(CONDITION_ANNOTATION)
            .and_then(|text| serde_json::from_str(text).ok()),
    }
}

/// One write: the whole conditions list with our entry merged in, guarded by the resourceVersion it was
/// computed from (so a concurrent writer's conditions are never lost, whatever the list type); or one
/// annotation key (a merge patch touches no other key).
async fn write(
    api: &Api<DynamicObject>,
    name: &str,
    current: &DynamicObject,
    placement: Placement,
    desired: &PreflightCondition,
) -> Result<(), kube::Error> {
    let params = PatchParams::default();
    match placement {
        Placement::Status => {
            let conditions = condition::merge(current.data.pointer("/status/conditions"), desired);
            let body = json!({
                "metadata": {"resourceVersion": current.resource_version()},
                "status": {"conditions": conditions},
            });
            api.patch_status(name, &params, &Patch::Merge(body)).await?;
        }
        Placement::Annotation => {
            let text = serde_json::to_string(desired).unwrap_or_default();
            let body = json!({"metadata": {"annotations": {CONDITION_ANNOTATION: text}}});
            api.patch(name, &params, &Patch::Merge(body)).await?;
        }
    }
    Ok(())
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn clip(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clips_on_a_character_boundary() {
        assert_eq!(clip("short", 128), "short");
        assert_eq!(clip("ééé", 5), "éé");
        assert_eq!(clip(&"x".repeat(2000), 1024).len(), 1024);
    }
}
