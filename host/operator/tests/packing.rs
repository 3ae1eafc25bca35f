//! Checks shipped in parts (`preflight pack`), on the real control plane: reassembled and gating like a
//! check in one ConfigMap; a version with a part missing is reported and the last good version keeps
//! serving; when the part arrives, the new version is loaded without touching the check ConfigMap.

mod operator_support;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, ListParams, Patch, PatchParams};
use operator_support::*;
use preflight_kube_harness::eventually;
use preflight_operator::{Package, pack};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const SOON: Duration = Duration::from_secs(30);

/// `component` as another component: the same code with a custom section appended (another digest).
fn another_version(component: &[u8]) -> Vec<u8> {
    let mut bytes = component.to_vec();
    let name = b"preflight-test-version";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.push(2);
    bytes.push(0);
    bytes.push(section.len() as u8);
    bytes.extend_from_slice(&section);
    bytes
}

async fn apply(client: &kube::Client, namespace: &str, config_map: &ConfigMap) {
    let mut value = serde_json::to_value(config_map).unwrap();
    value["apiVersion"] = json!("v1");
    value["kind"] = json!("ConfigMap");
    value["metadata"]["namespace"] = json!(namespace);
    let name = config_map.metadata.name.clone().unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            &name,
            &PatchParams::apply("preflight-tests").force(),
            &Patch::Apply(value),
        )
        .await
        .unwrap_or_else(|error| panic!("applying {name}: {error}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_in_parts_gates_and_a_missing_part_keeps_the_last_good_version() {
    let s = Scenario::new("parts", "Shipment", "dependency-ready").await;
    let package = |component: &[u8], available: &str| {
        pack(&Package {
            component,
            name: "deps",
            namespace: &s.namespace,
            gates: &s.kind.gates(),
            data: BTreeMap::from([(
                "config".to_owned(),
                format!(r#"{{"available": {available}, "retryAfterSeconds": 60}}"#),
            )]),
            max_part_bytes: 24 << 10,
        })
        .unwrap()
    };
    let first = package(&s.wasm, "[]");
    assert!(
        first.len() >= 3,
        "the example check needs several 24 KiB parts: {}",
        first.len()
    );
    for config_map in &first {
        apply(&s.client, &s.namespace, config_map).await;
    }
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "o1",
        json!({"dependsOn": ["postgres"]}),
        &[],
    )
    .await;
    let operator = s.operator().await;
    s.wait("o1", "False", "DependencyMissing").await;

    // A new version whose part 2 is not there yet.
    let second = package(&another_version(&s.wasm), r#"["postgres"]"#);
    for (index, config_map) in second.iter().enumerate() {
        if index != 1 {
            apply(&s.client, &s.namespace, config_map).await;
        }
    }
    let events: Api<KubeEvent> = Api::namespaced(s.client.clone(), &s.namespace);
    let rejected = eventually("the missing part reported", SOON, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|event| {
            event.reason.as_deref() == Some("CheckRejected")
                && event
                    .note
                    .as_deref()
                    .is_some_and(|note| note.contains("part 2 of"))
        })
    })
    .await;
    let note = rejected.note.unwrap();
    assert!(
        note.contains("is missing") && note.contains("parts of other versions are present"),
        "{note}"
    );
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "o2",
        json!({"dependsOn": ["postgres"]}),
        &[],
    )
    .await;
    s.wait("o2", "False", "DependencyMissing").await;

    // The part arrives: the new version loads, and the objects proceed.
    apply(&s.client, &s.namespace, &second[1]).await;
    s.wait("o1", "True", "DependenciesAvailable").await;
    s.wait("o2", "True", "DependenciesAvailable").await;
    operator.stop().await;
    s.remove().await;
}
