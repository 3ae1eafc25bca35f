//! Records a gate result where users look: the `Preflight` condition in the object's status (or, for kinds
//! without a status subresource, an annotation), and an Event when what the condition says changes. Writes
//! nothing when the object already says the same.
//!
//! Events are at-least-once: a transition's Event is published before the condition is written, so a crash
//! between the two leaves an Event and an old condition, and the restarted operator publishes the same Event
//! again, which counts it in the existing Event instead of creating another (see [`super::events`]).

use crate::condition::{self, ConditionType, Placement, PreflightCondition, existing_condition};
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

    /// Writes every condition in `updates` that differs from what `object` carries, in one request,
    /// retrying on write conflicts with a fresh read. When what a condition says changes (status, reason or
    /// message), an Event is published first.
    pub async fn record_all(
        &self,
        resource: &ApiResource,
        placement: Placement,
        object: &DynamicObject,
        updates: &[ConditionUpdate<'_>],
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
        let mut published = Vec::new();
        loop {
            let mut changes = Vec::new();
            for update in updates {
                let condition_type = update.condition_type;
                let existing = existing_condition(&current, placement, condition_type);
                let desired = update.summary.map(|summary| {
                    condition_type.next(
                        existing.as_ref(),
                        summary,
                        current.metadata.generation,
                        SystemTime::now(),
                    )
                });
                match desired {
                    Some(Some(desired)) => {
                        // Once per transition, even when a conflict makes us write again.
                        if !published.contains(&condition_type)
                            && condition::is_transition(existing.as_ref(), &desired)
                        {
                            self.publish(&current, resource, update, &desired).await;
                            published.push(condition_type);
                        }
                        changes.push(Change {
                            condition_type,
                            desired: Some(desired),
                        });
                    }
                    None if existing.is_some() => changes.push(Change {
                        condition_type,
                        desired: None,
                    }),
                    _ => self
                        .recorded
                        .remember(&uid, condition_type, existing.as_ref()),
                }
            }
            if changes.is_empty() {
                return Ok(Recorded::Unchanged);
            }
            for change in &changes {
                self.recorded
                    .remember(&uid, change.condition_type, change.desired.as_ref());
            }
            match write(&api, &name, &current, placement, &changes).await {
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
        update: &ConditionUpdate<'_>,
        condition: &PreflightCondition,
    ) {
        let monitored;
        let (note, action) = match update.condition_type {
            ConditionType::Preflight => (condition.message.as_str(), "Preflight"),
            ConditionType::Monitor => {
                let verdict = if condition.is_true() {
                    "would proceed"
                } else {
                    "would hold"
                };
                monitored = format!(
                    "monitor mode, not enforced: {verdict}: {}",
                    condition.message
                );
                (monitored.as_str(), "Monitor")
            }
        };
        let notice = Notice {
            event_type: if update.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: &condition.reason,
            note,
            action,
        };
        let reference = object.object_ref(resource);
        self.events.publish(&reference, &notice).await;
    }
}

/// What one of the operator's conditions should say on an object.
#[derive(Debug, Clone, Copy)]
pub struct ConditionUpdate<'a> {
    /// Which condition.
    pub condition_type: ConditionType,
    /// What it should say; `None`: the object should not carry it (removed if it does).
    pub summary: Option<&'a Summary>,
    /// A failure: its Event is a Warning (waiting and proceeding are Normal).
    pub warning: bool,
}

/// A condition to write (`Some`) or to remove (`None`).
struct Change {
    condition_type: ConditionType,
    desired: Option<PreflightCondition>,
}

/// One write: the whole conditions list with our entries merged in (or taken out), guarded by the
/// resourceVersion it was computed from (so a concurrent writer's conditions are never lost, whatever the
/// list type); or our annotation keys (a merge patch touches no other key).
async fn write(
    api: &Api<DynamicObject>,
    name: &str,
    current: &DynamicObject,
    placement: Placement,
    changes: &[Change],
) -> Result<(), kube::Error> {
    let params = patch_params();
    let listed = current.data.pointer("/status/conditions");
    let in_status = placement == Placement::Status
        // A condition already in the annotation of a kind with a status: that status prunes it.
        && changes.iter().all(|change| {
            condition::find(listed, change.condition_type).is_some()
                || condition::annotated_condition(current, change.condition_type).is_none()
        });
    if in_status {
        let mut conditions = listed.cloned();
        for change in changes {
            conditions = Some(match &change.desired {
                Some(desired) => condition::merge(conditions.as_ref(), desired),
                None => condition::without(conditions.as_ref(), change.condition_type),
            });
        }
        let body = json!({
            "metadata": {"resourceVersion": current.resource_version()},
            "status": {"conditions": conditions},
        });
        let written = api.patch_status(name, &params, &Patch::Merge(body)).await?;
        let stored = written.data.pointer("/status/conditions");
        if changes.iter().all(|change| {
            condition::find(stored, change.condition_type).is_some() == change.desired.is_some()
        }) {
            return Ok(());
        }
        tracing::info!(
            object = name,
            "the kind's status has no conditions list (the API server pruned the condition): \
             keeping it in an annotation"
        );
    }
    let annotations: serde_json::Map<String, serde_json::Value> = changes
        .iter()
        .map(|change| {
            let text = change
                .desired
                .as_ref()
                .map(|desired| serde_json::to_string(desired).unwrap_or_default());
            (change.condition_type.annotation().to_owned(), json!(text))
        })
        .collect();
    let body = json!({"metadata": {"annotations": annotations}});
    api.patch(name, &params, &Patch::Merge(body)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::CONDITION_ANNOTATION;
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
        let update = ConditionUpdate {
            condition_type: ConditionType::Preflight,
            summary: Some(&waiting()),
            warning: false,
        };
        let recorded = writer
            .record_all(&resource(), Placement::Status, &object("10"), &[update])
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
        let kept = ConditionType::Preflight
            .next(None, &summary, Some(2), SystemTime::now())
            .unwrap();
        object.metadata.annotations = Some(
            [(
                CONDITION_ANNOTATION.to_owned(),
                serde_json::to_string(&kept).unwrap(),
            )]
            .into(),
        );
        assert_eq!(
            existing_condition(&object, Placement::Status, ConditionType::Preflight),
            Some(kept.clone())
        );
        assert_eq!(
            ConditionType::Preflight.next(Some(&kept), &summary, Some(2), SystemTime::now()),
            None,
            "the same verdict writes nothing"
        );
    }

    #[tokio::test]
    async fn both_conditions_go_in_one_patch_and_the_monitor_condition_is_taken_back_alone() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let writer = StatusWriter::new(
            client.clone(),
            EventPublisher::new(client, "preflight", None),
        );
        let (stored_tx, stored_rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(async move {
            let mut notes = Vec::new();
            for _ in 0..2 {
                let (request, send) = handle.next_request().await.expect("an Event");
                assert_eq!(request.method(), Method::POST);
                let body = http_body_util::BodyExt::collect(request.into_body())
                    .await
                    .unwrap()
                    .to_bytes();
                let event: Value = serde_json::from_slice(&body).unwrap();
                notes.push(format!("{}: {}", event["action"], event["note"]));
                send.send_response(respond(StatusCode::CREATED, &serde_json::json!({})));
            }
            let status = "/apis/example.com/v1/namespaces/ns/apps/shop/status";
            let (patch, send) = next_patch(&mut handle, status).await;
            let mut stored = object("11");
            stored.data["status"] = patch["status"].clone();
            send.send_response(respond(
                StatusCode::OK,
                &serde_json::to_value(&stored).unwrap(),
            ));
            stored_tx.send(stored).unwrap();
            let (removal, send) = next_patch(&mut handle, status).await;
            send.send_response(respond(
                StatusCode::OK,
                &serde_json::to_value(object("12")).unwrap(),
            ));
            (notes, removal)
        });
        let proceed = Summary {
            proceed: true,
            reason: "Proceed".into(),
            message: "deps: ready".into(),
        };
        let would_hold = waiting();
        let update = |condition_type, summary| ConditionUpdate {
            condition_type,
            summary,
            warning: false,
        };
        let both = [
            update(ConditionType::Preflight, Some(&proceed)),
            update(ConditionType::Monitor, Some(&would_hold)),
        ];
        let (apps, fresh) = (resource(), object("10"));
        let first = writer.record_all(&apps, Placement::Status, &fresh, &both);
        assert_eq!(first.await.unwrap(), Recorded::Written);
        let stored = stored_rx.await.unwrap();
        let conditions = stored.data.pointer("/status/conditions");
        assert_eq!(
            condition::find(conditions, ConditionType::Preflight).map(|c| c.reason),
            Some("Proceed".to_owned())
        );
        assert_eq!(
            condition::find(conditions, ConditionType::Monitor).map(|c| c.status),
            Some("False".to_owned())
        );
        // The monitored check goes: one patch takes its condition out and keeps the other.
        let monitor_gone = [
            update(ConditionType::Preflight, Some(&proceed)),
            update(ConditionType::Monitor, None),
        ];
        let removed = writer.record_all(&apps, Placement::Status, &stored, &monitor_gone);
        assert_eq!(removed.await.unwrap(), Recorded::Written);
        let (notes, removal) = server.await.unwrap();
        assert_eq!(
            notes,
            [
                "\"Preflight\": \"deps: ready\"",
                "\"Monitor\": \"monitor mode, not enforced: would hold: deps: waiting for redis\"",
            ]
        );
        let left = removal.pointer("/status/conditions");
        assert_eq!(
            left.and_then(Value::as_array).map(Vec::len),
            Some(1),
            "{removal}"
        );
        assert!(condition::find(left, ConditionType::Preflight).is_some());
        // Nothing to say and nothing carried: no request at all (the mock would fail on one).
        let bare = object("12");
        let nothing = writer.record_all(&apps, Placement::Status, &bare, &monitor_gone[1..]);
        assert_eq!(nothing.await.unwrap(), Recorded::Unchanged);
    }

    #[tokio::test]
    async fn a_kind_without_status_gets_both_conditions_in_one_annotation_patch_and_loses_one_alone()
     {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let writer = StatusWriter::new(
            client.clone(),
            EventPublisher::new(client, "preflight", None),
        );
        let server = tokio::spawn(async move {
            let mut patches = Vec::new();
            for round in 0..2 {
                // Two Events on the first round (both conditions are new), none on the second.
                for _ in 0..2 - 2 * round {
                    let (request, send) = handle.next_request().await.expect("an Event");
                    assert_eq!(request.method(), Method::POST);
                    send.send_response(respond(StatusCode::CREATED, &serde_json::json!({})));
                }
                let (patch, send) =
                    next_patch(&mut handle, "/apis/example.com/v1/namespaces/ns/apps/shop").await;
                send.send_response(respond(
                    StatusCode::OK,
                    &serde_json::to_value(object("11")).unwrap(),
                ));
                patches.push(patch);
            }
            patches
        });
        let (proceed, would_hold) = (
            Summary {
                proceed: true,
                reason: "Proceed".into(),
                message: "deps: ready".into(),
            },
            waiting(),
        );
        let update = |condition_type, summary| ConditionUpdate {
            condition_type,
            summary,
            warning: false,
        };
        let apps = resource();
        let fresh = object("10");
        let both = [
            update(ConditionType::Preflight, Some(&proceed)),
            update(ConditionType::Monitor, Some(&would_hold)),
        ];
        let first = writer.record_all(&apps, Placement::Annotation, &fresh, &both);
        assert_eq!(first.await.unwrap(), Recorded::Written);
        // The object as it is now: both annotations, as the first patch wrote them.
        let mut annotated = object("11");
        let kept = |condition_type: ConditionType, summary: &Summary| {
            let condition = condition_type
                .next(None, summary, Some(2), SystemTime::now())
                .unwrap();
            (
                condition_type.annotation().to_owned(),
                serde_json::to_string(&condition).unwrap(),
            )
        };
        annotated.metadata.annotations = Some(
            [
                kept(ConditionType::Preflight, &proceed),
                kept(ConditionType::Monitor, &would_hold),
            ]
            .into(),
        );
        let monitor_gone = [
            update(ConditionType::Preflight, Some(&proceed)),
            update(ConditionType::Monitor, None),
        ];
        let second = writer.record_all(&apps, Placement::Annotation, &annotated, &monitor_gone);
        assert_eq!(second.await.unwrap(), Recorded::Written);
        let patches = server.await.unwrap();
        let annotations = &patches[0]["metadata"]["annotations"];
        assert!(
            annotations[CONDITION_ANNOTATION]
                .as_str()
                .unwrap()
                .contains("\"Preflight\"")
        );
        assert!(
            annotations[crate::condition::MONITOR_CONDITION_ANNOTATION]
                .as_str()
                .unwrap()
                .contains("\"PreflightMonitor\"")
        );
        assert_eq!(
            patches[1],
            json!({"metadata": {"annotations": {crate::condition::MONITOR_CONDITION_ANNOTATION: null}}}),
            "only the monitor annotation is taken out"
        );
    }
}
