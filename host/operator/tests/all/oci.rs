//! Checks named by `source: oci://…`, against a real registry (the CNCF distribution registry) and the
//! real control plane: a check pulled by digest gates its kind; a tag without a pin, a digest the
//! registry does not hold and a tag moved away from the pinned component are refused while the last good
//! version serves; a `followTag` check keeps serving from the operator's cache across a restart while
//! the registry is down, and says so.

use crate::operator_support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use preflight_oci::{CheckReference, Credentials, Registry, RegistryOptions, sha256_digest};
use preflight_test_support::{TestRegistry, Transport};
use serde_json::json;

/// Applies check ConfigMap `deps` gating the scenario's kind with `data` and no component of its own.
async fn put_source(s: &Scenario, data: serde_json::Value) {
    let value = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "deps", "labels": {preflight_operator::GATES_LABEL: s.kind.gates()}},
        "data": data,
    });
    Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .patch(
            "deps",
            &PatchParams::apply("preflight-tests").force(),
            &Patch::Apply(value),
        )
        .await
        .unwrap();
}

/// The CheckRejected Event whose note contains `text`; returns the note.
async fn rejected(s: &Scenario, text: &str) -> String {
    let event = event_where(&s.client, &s.namespace, "CheckRejected", |event| {
        event
            .note
            .as_deref()
            .is_some_and(|note| note.contains(text))
    })
    .await;
    event.note.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_from_a_registry_gates_refuses_unpinned_or_moved_bytes_and_outlives_an_outage() {
    let s = Scenario::new("oci", "Consignment", "dependency-ready").await;
    let mut registry = TestRegistry::start(Transport::PlainHttp);
    let client = Registry::new(&RegistryOptions {
        plain_http: vec![registry.host()],
        ..RegistryOptions::default()
    });
    let host = registry.host();
    let at = |path: &str| CheckReference::parse(&format!("oci://{host}/{path}")).unwrap();
    let pushed = client
        .push(&at("deps:1"), &s.wasm, &Credentials::Anonymous)
        .await
        .unwrap();
    client
        .push(&at("deps:stable"), &s.wasm, &Credentials::Anonymous)
        .await
        .unwrap();
    let pinned = at("deps:1").pinned(&pushed.manifest_digest).to_string();
    let cache = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = operator_config(&s.namespace);
        config.registry.plain_http = vec![host.clone()];
        config.oci_cache = Some(cache.path().to_owned());
        config
    };
    let unavailable = r#"{"available": [], "retryAfterSeconds": 60}"#;
    put_source(&s, json!({"source": pinned, "config": unavailable})).await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "o1",
        json!({"dependsOn": ["postgres"]}),
        &[],
    )
    .await;
    let operator = start_operator(&s.client, config()).await;
    s.wait("o1", "False", "DependencyMissing").await;

    // A tag alone is refused before anything is pulled; the pinned version keeps serving.
    let tag = at("deps:1").to_string();
    put_source(&s, json!({"source": tag, "config": unavailable})).await;
    let note = rejected(&s, "names a tag without a pin").await;
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );

    // A digest the registry does not hold.
    let wrong = at("deps:1").pinned(&sha256_digest(b"nothing")).to_string();
    put_source(&s, json!({"source": wrong, "config": unavailable})).await;
    let note = rejected(&s, &format!("registry request for {wrong} failed")).await;
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );

    // The tag moves to other bytes; the component pin (`sha256`) refuses them.
    client
        .push(
            &at("deps:1"),
            &another_version(&s.wasm),
            &Credentials::Anonymous,
        )
        .await
        .unwrap();
    let component_pin = pushed.component_digest.trim_start_matches("sha256:");
    put_source(
        &s,
        json!({"source": tag, "sha256": component_pin, "config": unavailable}),
    )
    .await;
    let note = rejected(&s, &format!("not the pinned {component_pin}")).await;
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );

    // A tag followed on purpose loads what it names now (a new configuration shows it loaded).
    let available = r#"{"available": ["postgres"], "retryAfterSeconds": 60}"#;
    let stable = at("deps:stable").to_string();
    put_source(
        &s,
        json!({"source": stable, "followTag": "true", "config": available}),
    )
    .await;
    s.wait("o1", "True", "DependenciesAvailable").await;
    operator.stop().await;

    // The registry goes down and the operator restarts: the cached digest the tag last named serves,
    // and the Event says so.
    registry.stop();
    let restarted = start_operator(&s.client, config()).await;
    let note = rejected(&s, &format!("registry request for {stable} failed")).await;
    assert!(
        note.contains(&format!(
            "last resolved to {}",
            at("deps").pinned(&pushed.manifest_digest)
        )),
        "{note}"
    );
    assert!(
        note.contains("kept on the operator's disk serves"),
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
    s.wait("o2", "True", "DependenciesAvailable").await;
    restarted.stop().await;
    s.remove().await;
}
