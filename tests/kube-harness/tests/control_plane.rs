//! Smoke test of the real control plane through kube-rs: a CRD with a status subresource, an object, its
//! status written by server-side apply on `/status` and seen by a watch, an Event, a Lease.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use preflight_kube_harness::{admin_client, apply_crd, test_namespace};
use serde_json::json;
use std::time::Duration;

fn widget_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.smoke.preflight.test"},
        "spec": {
            "group": "smoke.preflight.test",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    })
}

#[tokio::test]
async fn crd_object_status_watch_event_and_lease_work_against_the_real_api_server() {
    let client = admin_client().await;
    apply_crd(&client, widget_crd()).await;
    let namespace = test_namespace(&client, "smoke").await;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "smoke.preflight.test",
        "v1",
        "Widget",
    ));
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);

    let mut widget = DynamicObject::new("gizmo", &resource).within(&namespace);
    widget.data = json!({"spec": {"size": 3}});
    let created = widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["size"], 3);

    let mut changes = watcher(widgets.clone(), watcher::Config::default()).boxed();
    let status = json!({
        "apiVersion": "smoke.preflight.test/v1", "kind": "Widget",
        "status": {"conditions": [{"type": "Preflight", "status": "False", "reason": "DependencyMissing"}]}
    });
    widgets
        .patch_status(
            "gizmo",
            &PatchParams::apply("preflight-smoke").force(),
            &Patch::Apply(&status),
        )
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = changes.next().await {
            if let Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) = event
                && object.data["status"]["conditions"][0]["reason"] == "DependencyMissing"
            {
                return object;
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("the watch sees the status written through /status");
    assert_eq!(
        seen.data["spec"]["size"], 3,
        "writing status left the spec alone"
    );

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "preflight-smoke".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Warning,
        reason: "DependencyMissing".into(),
        note: Some("waiting for redis".into()),
        action: "Preflight".into(),
        secondary: None,
    };
    recorder
        .publish(&event, &seen.object_ref(&resource))
        .await
        .unwrap();
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), &namespace);
    let listed = events.list(&ListParams::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("DependencyMissing")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("gizmo")),
        "the Event is stored: {:?}",
        listed.items.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "preflight-leader"},
        "spec": {"holderIdentity": "replica-a", "leaseDurationSeconds": 15}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let taken = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect_err("a Lease can be created once");
    assert!(
        matches!(taken, kube::Error::Api(ref status) if status.code == 409),
        "{taken}"
    );
    let held = leases.get("preflight-leader").await.unwrap();
    assert_eq!(held.name_any(), "preflight-leader");
    assert_eq!(
        held.spec.and_then(|spec| spec.holder_identity).as_deref(),
        Some("replica-a")
    );
}
