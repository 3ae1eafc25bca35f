//! Checks named by `source: oci://…`, against a real registry (the CNCF distribution registry) and the
//! real control plane: a check pulled by digest gates its kind; a tag without a pin, a digest the
//! registry does not hold and a tag moved away from the pinned component are refused while the last good
//! version serves; a `followTag` check keeps serving from the operator's cache across a restart while
//! the registry is down, says so (Event, and the objects' condition), and is pulled again by itself when
//! the registry returns; the cache keeps only the version each check last pulled; a registry behind a login is read with the pull secret the
//! ConfigMap names, refused with the registry's answer without it, and pulled again by itself once the
//! Secret exists.

use crate::operator_support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use preflight_kube_harness::eventually;
use preflight_oci::{CheckReference, Credentials, Registry, RegistryOptions, sha256_digest};
use preflight_test_support::{TestRegistry, Transport};
use serde_json::json;
use std::time::Duration;

/// Applies check ConfigMap `deps` gating the scenario's kind with `data` and no component of its own.
pub(crate) async fn put_source(s: &Scenario, data: serde_json::Value) {
    let value = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "deps", "namespace": s.namespace,
            "labels": {preflight_operator::GATES_LABEL: s.kind.gates()},
        },
        "data": data,
    });
    apply(&s.client, value).await;
}

/// Creates object `name` of the scenario's kind, depending on postgres.
pub(crate) async fn object_depending_on_postgres(s: &Scenario, name: &str) {
    let spec = json!({"dependsOn": ["postgres"]});
    create_object(&s.client, &s.kind, &s.namespace, name, spec, &[]).await;
}

/// The CheckRejected Event whose note contains `text`; returns the note.
pub(crate) async fn rejected(s: &Scenario, text: &str) -> String {
    let event = event_noting(&s.client, &s.namespace, "CheckRejected", text).await;
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
    object_depending_on_postgres(&s, "o1").await;
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

    // The cache keeps what a restart would load, the version the tag names now: the other bytes pulled
    // (and refused) before are removed.
    let cached = |kind: &str| {
        std::fs::read_dir(cache.path().join(kind))
            .map(|entries| entries.count())
            .unwrap_or(0)
    };
    eventually(
        "the cache to hold one version",
        Duration::from_secs(30),
        || async { (cached("manifests") == 1 && cached("components") == 1).then_some(()) },
    )
    .await;
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
    object_depending_on_postgres(&s, "o2").await;
    let served = s.wait("o2", "True", "DependenciesAvailable").await;
    let stand_in = "serving the copy kept on the operator's disk while its source fails";
    assert!(served.message.contains(stand_in), "{}", served.message);

    // The registry comes back: the failed pull is tried again by itself (5 s, 10 s, …) and the condition
    // no longer speaks of a stand-in.
    registry.resume();
    eventually(
        "o2's condition to drop the stand-in note",
        Duration::from_secs(30),
        || async {
            condition(&s.client, &s.kind, &s.namespace, "o2")
                .await
                .filter(|condition| {
                    condition.status == "True" && !condition.message.contains(stand_in)
                })
        },
    )
    .await;

    // The check goes, and with it the version the cache kept for it.
    Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .delete("deps", &Default::default())
        .await
        .unwrap();
    eventually(
        "the cache to be emptied",
        Duration::from_secs(30),
        || async {
            (cached("manifests") + cached("components") + cached("tags") == 0).then_some(())
        },
    )
    .await;
    restarted.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_behind_a_login_is_pulled_from_with_the_named_pull_secret() {
    let s = Scenario::new("oci-login", "Shipment", "dependency-ready").await;
    let registry = TestRegistry::start_with_login(Transport::PrivateCa, "operator", "pull-pass");
    let options = RegistryOptions {
        ca_certificates: vec![registry.ca_pem().as_bytes().to_vec()],
        ..RegistryOptions::default()
    };
    let login = Credentials::DockerConfigJson(registry.docker_config_json().into_bytes());
    let reference = CheckReference::parse(&format!("oci://{}/deps:1", registry.host())).unwrap();
    let pushed = Registry::new(&options)
        .push(&reference, &s.wasm, &login)
        .await
        .unwrap();
    let pinned = reference.pinned(&pushed.manifest_digest).to_string();
    let mut config = operator_config(&s.namespace);
    config.registry = options;
    let available = r#"{"available": ["postgres"], "retryAfterSeconds": 60}"#;
    object_depending_on_postgres(&s, "o1").await;
    let operator = start_operator(&s.client, config).await;

    // Anonymous: the registry's refusal is the Event's reason.
    put_source(&s, json!({"source": pinned, "config": available})).await;
    let note = rejected(&s, "no good version exists").await;
    assert!(note.contains(&pinned), "{note}");
    assert!(note.contains("Not authorized"), "{note}");

    // A pull secret that does not exist is named.
    put_source(
        &s,
        json!({"source": pinned, "pullSecret": "registry-login", "config": available}),
    )
    .await;
    rejected(
        &s,
        &format!("pull secret {}/registry-login does not exist", s.namespace),
    )
    .await;

    // `kubectl create secret docker-registry`: the refused pull is tried again (after 5 s, then 10 s, …)
    // and loads, with no change to the ConfigMap.
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "registry-login", "namespace": s.namespace},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": registry.docker_config_json()},
    });
    apply(&s.client, secret).await;
    s.wait("o1", "True", "DependenciesAvailable").await;
    operator.stop().await;
    s.remove().await;
}
