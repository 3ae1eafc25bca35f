//! Records a gate result where users look: the `Preflight` condition in the object's status (or, for kinds
//! without a status subresource, an annotation), and an Event when what the condition says changes. Writes
//! nothing when the object already says the same.
//!
//! Events are at-least-once: a transition's Event is published before the condition is written, so a crash
//! between the two leaves an Event and an old condition, and the restarted operator publishes the same Event
//! again, which counts it in the existing Event instead of creating another (see [`super::events`]).

use crate::condition::{
    self, CONDITION_ANNOTATION, Placement, PreflightCondition, existing_condition,
};
use crate::events::{EventPublisher, EventType, Notice};
use crate::field_managers::patch_params;
use crate::recorded_conditions::RecordedConditions;
use crate::summary::Summary;
use kube::api::{Api, ApiResource, DynamicObject, Patch};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

/// Attempts to write the condition when the object changes between read and write.
const CONFLICT_ATTEMPTS: usize = 3;

/// Writes conditions and Events for one operator identity.
#[derive(Clone)]
pub struct StatusWriter {
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

impl StatusWriter {
    /// A writer announcing transitions through `events`.
    pub fn new(client: Client, events: EventPublisher) -> Self {
        Self {
            events,
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
        self.events.publish(&reference, &notice).await;
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
    let params = patch_params();
    let in_status = placement == Placement::Status
        // A condition already in the annotation of a kind with a status: that status prunes it.
        && (condition::find(current.data.pointer("/status/conditions")).is_some()
            || condition::annotated_condition(current).is_none());
    if in_status {
        let conditions = condition::merge(current.data.pointer("/status/conditions"), desired);
        let body = json!({
            "metadata": {"resourceVersion": current.resource_version()},
            "status": {"conditions": conditions},
        });
        let written = api.patch_status(name, &params, &Patch::Merge(body)).await?;
        if condition::find(written.data.pointer("/status/conditions")).is_some() {
            return Ok(());
        }
        tracing::info!(
            object = name,
            "the kind's status has no conditions list (the API server pruned the condition): \
             keeping it in the {CONDITION_ANNOTATION} annotation"
        );
    }
    let text = serde_json::to_string(desired).unwrap_or_default();
    let body = json!({"metadata": {"annotations": {CONDITION_ANNOTATION: text}}});
    api.patch(name, &params, &Patch::Merge(body)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Request, Response, StatusCode};
    use kube::api::GroupVersionKind;
    use kube::client::Body;
    use serde_json::Value;
    use tower_test::mock;

    fn resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", "v1", "App"),
            "apps",
        )
    }

    fn object(resource_version: &str) -> DynamicObject {
        let mut object = DynamicObject::new("shop", &resource()).within("ns");
        object.metadata.uid = Some("u1".into());
        object.metadata.generation = Some(2);
        object.metadata.resource_version = Some(resource_version.into());
        object
    }

    fn waiting() -> Summary {
        Summary {
            proceed: false,
            reason: "DependencyMissing".into(),
            message: "deps: waiting for redis".into(),
        }
    }

    fn respond(status: StatusCode, body: &Value) -> Response<Body> {
        Response::builder()
            .status(status)
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap()
    }

    fn conflict() -> Value {
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict",
            "message": "the object has been modified", "code": 409})
    }

    /// The next request, which must be a PATCH of `path`: its body, and where to answer it.
    async fn next_patch(
        handle: &mut mock::Handle<Request<Body>, Response<Body>>,
        path: &str,
    ) -> (Value, mock::SendResponse<Response<Body>>) {
        let (request, send) = handle.next_request().await.expect("a patch");
        assert_eq!(request.method(), Method::PATCH);
        assert_eq!(request.uri().path(), path);
        let body = http_body_util::BodyExt::collect(request.into_body())
            .await
            .unwrap()
            .to_bytes();
        (serde_json::from_slice(&body).unwrap(), send)
    }

    /// Serves the mock API: answers the Event, then `patches` status patches with a conflict (each
    /// followed by the fresh read it forces) and the next with success. Returns the resourceVersions the
    /// patches were guarded by.
    async fn serve(
        mut handle: mock::Handle<Request<Body>, Response<Body>>,
        conflicts: usize,
        attempts: usize,
        prunes: bool,
    ) -> Vec<String> {
        let (request, send) = handle.next_request().await.expect("an Event first");
        assert_eq!(request.method(), Method::POST);
        assert_eq!(
            request.uri().path(),
            "/apis/events.k8s.io/v1/namespaces/ns/events"
        );
        send.send_response(respond(StatusCode::CREATED, &serde_json::json!({})));
        let mut guarded_by = Vec::new();
        for attempt in 0..attempts {
            let (patch, send) = next_patch(
                &mut handle,
                "/apis/example.com/v1/namespaces/ns/apps/shop/status",
            )
            .await;
            guarded_by.push(
                patch["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
            assert_eq!(
                patch["status"]["conditions"][0]["reason"],
                "DependencyMissing"
            );
            if attempt < conflicts {
                send.send_response(respond(StatusCode::CONFLICT, &conflict()));
                if attempt + 1 < attempts {
                    let (request, send) = handle.next_request().await.expect("a fresh read");
                    assert_eq!(request.method(), Method::GET);
                    assert_eq!(
                        request.uri().path(),
                        "/apis/example.com/v1/namespaces/ns/apps/shop"
                    );
                    let fresh = object(&format!("{}", 11 + attempt));
                    send.send_response(respond(
                        StatusCode::OK,
                        &serde_json::to_value(&fresh).unwrap(),
                    ));
                }
            } else {
                // The API server answers with what it stored: the condition, unless the status prunes it.
                let mut stored = object("99");
                if !prunes {
                    stored.data["status"] = patch["status"].clone();
                }
                send.send_response(respond(
                    StatusCode::OK,
                    &serde_json::to_value(stored).unwrap(),
                ));
                if prunes {
                    let (patch, send) =
                        next_patch(&mut handle, "/apis/example.com/v1/namespaces/ns/apps/shop")
                            .await;
                    let annotated = patch["metadata"]["annotations"][CONDITION_ANNOTATION]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    assert!(annotated.contains("DependencyMissing"), "{patch}");
                    send.send_response(respond(
                        StatusCode::OK,
                        &serde_json::to_value(object("100")).unwrap(),
                    ));
                }
            }
        }
        guarded_by
    }

    /// Records a waiting summary on an object at resourceVersion 10 against the mock API of [`serve`].
    async fn record_against(
        conflicts: usize,
        attempts: usize,
        prunes: bool,
    ) -> (Result<Recorded, kube::Error>, Vec<String>) {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let writer = StatusWriter::new(
            client.clone(),
            EventPublisher::new(client, "preflight", None),
        );
        let server = tokio::spawn(serve(handle, conflicts, attempts, prunes));
        let recorded = writer
            .record(
                &resource(),
                Placement::Status,
                &object("10"),
                &waiting(),
                false,
            )
            .await;
        (recorded, server.await.unwrap())
    }

    #[tokio::test]
    async fn a_write_conflict_is_retried_on_a_fresh_read() {
        let (recorded, guarded_by) = record_against(1, 2, false).await;
        assert_eq!(recorded.unwrap(), Recorded::Written);
        assert_eq!(
            guarded_by,
            ["10", "11"],
            "the retry is guarded by the fresh read"
        );
    }

    #[tokio::test]
    async fn three_conflicts_in_a_row_give_up_with_the_conflict() {
        let (recorded, guarded_by) =
            record_against(CONFLICT_ATTEMPTS, CONFLICT_ATTEMPTS, false).await;
        let error = recorded.unwrap_err();
        assert!(
            matches!(&error, kube::Error::Api(status) if status.code == 409),
            "{error}"
        );
        assert_eq!(guarded_by, ["10", "11", "12"]);
    }

    #[tokio::test]
    async fn a_status_that_prunes_the_condition_gets_it_in_the_annotation() {
        let (recorded, guarded_by) = record_against(0, 1, true).await;
        assert_eq!(recorded.unwrap(), Recorded::Written);
        assert_eq!(guarded_by, ["10"]);
    }

    #[test]
    fn a_condition_kept_in_the_annotation_is_read_back_under_the_status_placement() {
        let mut object = object("10");
        let summary = waiting();
        let kept = condition::next(None, &summary, Some(2), SystemTime::now()).unwrap();
        object.metadata.annotations = Some(
            [(
                CONDITION_ANNOTATION.to_owned(),
                serde_json::to_string(&kept).unwrap(),
            )]
            .into(),
        );
        assert_eq!(
            existing_condition(&object, Placement::Status),
            Some(kept.clone())
        );
        assert_eq!(
            condition::next(Some(&kept), &summary, Some(2), SystemTime::now()),
            None,
            "the same verdict writes nothing"
        );
    }
}
