//! Records a gate result where users look: the `Preflight` condition in the object's status (or, for kinds
//! without a status subresource, an annotation), and an Event when what the condition says changes. Writes
//! nothing when the object already says the same.
//!
//! Events are at-least-once: a transition's Event is published before the condition is written, so a crash
//! between the two leaves an Event and an old condition, and the restarted operator publishes the same Event
//! again, which counts it in the existing Event instead of creating another (see [`super::events`]).

use super::condition::{self, PreflightCondition};
use super::events::{EventPublisher, EventType, Notice};
use super::gate::Summary;
use super::recorded_conditions::RecordedConditions;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

/// The annotation holding the condition (as JSON) on kinds without a status subresource.
pub const CONDITION_ANNOTATION: &str = "preflight.dev/condition";
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
    events: EventPublisher,
    recorded: Arc<RecordedConditions>,
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
        Self {
            events: EventPublisher::new(client.clone(), controller, instance),
            client,
            recorded: Arc::default(),
        }
    }

    /// The conditions this writer recorded, per object: how the watch tells its writes from others'.
    pub(crate) fn recorded(&self) -> &Arc<RecordedConditions> {
        &self.recorded
    }

    /// Writes the condition for `summary` on `object` if it differs from what is there, retrying on write
    /// conflicts with a fresh read. When what the condition says changes (status, reason or message), an
    /// Event is published first. `warning` marks failures (Warning Events); waiting is Normal.
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
        let uid = object.uid().unwrap_or_default();
        let mut published = false;
        loop {
            let existing = existing_condition(&current, placement);
            let Some(desired) = condition::next(
                existing.as_ref(),
                summary,
                current.metadata.generation,
                SystemTime::now(),
            ) else {
                if let Some(existing) = &existing {
                    self.recorded.remember(&uid, existing);
                }
                return Ok(Recorded::Unchanged);
            };
            // Once per transition, even when a conflict makes us write again.
            if !published && condition::is_transition(existing.as_ref(), &desired) {
                self.publish(&current, resource, &desired, warning).await;
                published = true;
            }
            self.recorded.remember(&uid, &desired);
            match write(&api, &name, &current, placement, &desired).await {
                Ok(()) => return Ok(Recorded::Written),
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
    /// check looks (`kubectl describe configmap`). Each distinct problem is its own Event.
    pub async fn warn_on_config_map(&self, check: &str, reason: &str, note: &str) {
        let (namespace, name) = check.split_once('/').unwrap_or(("", check));
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            ..ObjectReference::default()
        };
        let notice = Notice {
            event_type: EventType::Warning,
            reason,
            note,
            action: "LoadCheck",
        };
        if let Err(error) = self.events.publish(&reference, &notice).await {
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
        let notice = Notice {
            event_type: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: &condition.reason,
            note: &condition.message,
            action: "Preflight",
        };
        let reference = object.object_ref(resource);
        if let Err(error) = self.events.publish(&reference, &notice).await {
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
