//! Checks shipped in parts (`preflight pack`), on the real control plane: reassembled and gating like a
//! check in one ConfigMap; a version with a part missing is reported and the last good version keeps
//! serving; when the part arrives, the new version is loaded without touching the check ConfigMap.

use crate::operator_support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use preflight_kube_harness::eventually;
use preflight_operator::{Package, pack};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

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

/// `component` (the dependency-ready example) as check `deps` of the scenario's kind, in 24 KiB parts, with
/// the dependencies `available` (a JSON list).
fn in_parts(s: &Scenario, component: &[u8], available: &str) -> Vec<ConfigMap> {
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
}

/// An object of the scenario's kind that depends on `postgres`.
async fn depending_on_postgres(s: &Scenario, name: &str) {
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        name,
        json!({"dependsOn": ["postgres"]}),
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_in_parts_gates_and_a_missing_part_keeps_the_last_good_version() {
    let s = Scenario::new("parts", "Shipment", "dependency-ready").await;
    let package = |component: &[u8], available: &str| in_parts(&s, component, available);
    let first = package(&s.wasm, "[]");
    assert!(
        first.len() >= 3,
        "the example check needs several 24 KiB parts: {}",
        first.len()
    );
    for config_map in &first {
        apply(&s.client, &s.namespace, config_map).await;
    }
    depending_on_postgres(&s, "o1").await;
    let operator = s.operator().await;
    s.wait("o1", "False", "DependencyMissing").await;

    // A new version whose part 2 is not there yet.
    let second = package(&another_version(&s.wasm), r#"["postgres"]"#);
    for (index, config_map) in second.iter().enumerate() {
        if index != 1 {
            apply(&s.client, &s.namespace, config_map).await;
        }
    }
    let rejected = event_noting(&s.client, &s.namespace, "CheckRejected", "part 2 of").await;
    let note = rejected.note.unwrap();
    assert!(
        note.contains("is missing") && note.contains("parts of other versions are present"),
        "{note}"
    );
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );
    depending_on_postgres(&s, "o2").await;
    s.wait("o2", "False", "DependencyMissing").await;

    // The part arrives: the new version loads, and the objects proceed.
    apply(&s.client, &s.namespace, &second[1]).await;
    s.wait("o1", "True", "DependenciesAvailable").await;
    s.wait("o2", "True", "DependenciesAvailable").await;
    operator.stop().await;
    s.remove().await;
}

/// Issue 21, item 2: deleting a part of the version in force is reported at once, by number; and an operator
/// restarted meanwhile serves the copy of that version it kept on disk (objects that had proceeded stay
/// proceeded), saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_part_is_reported_at_once_and_a_restart_serves_the_kept_copy() {
    let s = Scenario::new("lostpart", "Delivery", "dependency-ready").await;
    let maps = in_parts(&s, &s.wasm, r#"["postgres"]"#);
    assert!(maps.len() >= 3, "several parts: {}", maps.len());
    for config_map in &maps {
        apply(&s.client, &s.namespace, config_map).await;
    }
    depending_on_postgres(&s, "o1").await;
    let cache = std::env::temp_dir().join(format!("preflight-lostpart-{}", std::process::id()));
    let config = || {
        let mut config = operator_config(&s.namespace);
        config.kept_components = Some(cache.clone());
        config
    };
    let operator = start_operator(&s.client, config()).await;
    s.wait("o1", "True", "DependenciesAvailable").await;

    let second = maps[1].metadata.name.clone().unwrap();
    Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .delete(&second, &Default::default())
        .await
        .unwrap();
    let reported = event_where(&s.client, &s.namespace, "CheckRejected", |event| {
        event
            .note
            .as_deref()
            .is_some_and(|note| note.contains("part 2 of") && note.contains("is missing"))
    })
    .await;
    assert!(
        reported
            .note
            .unwrap()
            .contains("kept on the operator's disk serves"),
        "the kept copy is named as what serves"
    );
    operator.stop().await;

    // Restarted with the part still missing: the kept copy serves, the object stays proceeded.
    let restarted = start_operator(&s.client, config()).await;
    s.label("o1", "touched", "yes").await;
    depending_on_postgres(&s, "o2").await;
    s.wait("o2", "True", "DependenciesAvailable").await;
    let o1 = condition(&s.client, &s.kind, &s.namespace, "o1")
        .await
        .unwrap();
    assert_eq!(
        (o1.status.as_str(), o1.reason.as_str()),
        ("True", "DependenciesAvailable")
    );
    restarted.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_check_in_parts_gates_exactly_like_the_rust_one() {
    let mut s = Scenario::new("pyparts", "Pipeline", "dependency-ready").await;
    s.patience = Duration::from_secs(90);
    let python = std::fs::read(preflight_test_support::build_python_check(
        "plugins/dependency-ready",
    ))
    .unwrap();
    let config =
        r#"{"available": ["postgres-main"], "retryAfterSeconds": 600, "jitterPercent": 10}"#;
    let data = BTreeMap::from([
        ("config".to_owned(), config.to_owned()),
        ("timeout".to_owned(), "5s".to_owned()),
    ]);
    let shipped = |name: &str, component: &[u8]| {
        pack(&Package {
            component,
            name,
            namespace: &s.namespace,
            gates: &s.kind.gates(),
            data: data.clone(),
            max_part_bytes: preflight_operator::DEFAULT_PART_BYTES,
        })
        .unwrap()
    };
    let python_maps = shipped("deps-python", &python);
    assert!(
        python_maps.len() > 2,
        "a Python check needs parts: {}",
        python_maps.len()
    );
    for config_map in &python_maps {
        apply(&s.client, &s.namespace, config_map).await;
    }
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "waits",
        json!({"dependsOn": ["redis"]}),
        &[],
    )
    .await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "ready",
        json!({"dependsOn": ["postgres-main"]}),
        &[],
    )
    .await;
    let operator = s.operator().await;
    let python_waits = s.wait("waits", "False", "DependencyMissing").await;
    s.wait("ready", "True", "DependenciesAvailable").await;

    // The Rust build in its place says the same.
    Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .delete("deps-python", &Default::default())
        .await
        .unwrap();
    for config_map in shipped("deps-rust", &s.wasm) {
        apply(&s.client, &s.namespace, &config_map).await;
    }
    let rust_waits = eventually("the Rust check's condition", SOON, || async {
        condition(&s.client, &s.kind, &s.namespace, "waits")
            .await
            .filter(|condition| condition.message.starts_with("deps-rust"))
    })
    .await;
    assert_eq!(
        python_waits.message.replacen("deps-python", "deps-rust", 1),
        rust_waits.message
    );
    assert_eq!(python_waits.reason, rust_waits.reason);
    operator.stop().await;
    s.remove().await;
}
