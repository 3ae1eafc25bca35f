//! The API server restarts under a running operator, then the operator itself restarts while a check
//! changes: every object ends with the right condition, exactly once, and a broken check is reported once,
//! not again by the relist that follows the API server's restart. (Its own test binary, apart from
//! `tests/all`: it restarts the shared API server, so nothing else may run beside it; cargo runs test binaries
//! one after another.)

#[path = "all/operator_support/mod.rs"]
mod operator_support;

use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, ListParams};
use operator_support::*;
use preflight_kube_harness::{stop_apiserver, up};
use std::time::Duration;

/// How often the CheckRejected Event on ConfigMap `name` counts its note: 1 for an Event without a series.
async fn times_rejected(s: &Scenario, name: &str) -> i32 {
    let events: Api<KubeEvent> = Api::namespaced(s.client.clone(), &s.namespace);
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|event| event.reason.as_deref() == Some("CheckRejected"))
        .filter(|event| {
            event
                .regarding
                .as_ref()
                .is_some_and(|regarding| regarding.name.as_deref() == Some(name))
        })
        .map(|event| event.series.as_ref().map_or(1, |series| series.count))
        .sum()
}

/// Waits until each object has the condition its `team`/`tier` labels call for.
async fn settle(s: &Scenario, expected: &[(&str, bool)]) {
    for (name, present) in expected {
        match present {
            true => s.wait(name, "True", "RequiredMetadataPresent").await,
            false => s.wait(name, "False", "RequiredMetadataMissing").await,
        };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_ends_right_across_api_server_and_operator_restarts() {
    let mut s = Scenario::new("restart", "Volume", "required-metadata").await;
    s.patience = Duration::from_secs(60);
    s.put("meta", &[("config", r#"{"labels": ["team"]}"#)])
        .await;
    s.create("v0", &[("team", "a")]).await;
    s.create("v1", &[]).await;
    s.create("v2", &[("team", "b")]).await;
    s.create("v3", &[]).await;
    // A check of another kind whose configuration it refuses: rejected once, for good.
    put_check(
        &s.client,
        &s.namespace,
        "broken",
        &format!("Absent.{}", s.kind.group),
        &s.wasm,
        &[("config", r#"{"labels": 5}"#)],
    )
    .await;
    let operator = s.operator().await;
    settle(
        &s,
        &[("v0", true), ("v1", false), ("v2", true), ("v3", false)],
    )
    .await;
    event(&s.client, &s.namespace, "CheckRejected").await;

    tokio::task::spawn_blocking(stop_apiserver).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    tokio::task::spawn_blocking(up).await.unwrap();
    s.create("v4", &[("team", "c")]).await;
    s.create("v5", &[]).await;
    s.label("v1", "team", "d").await;
    let after_restart = [
        ("v0", true),
        ("v1", true),
        ("v2", true),
        ("v3", false),
        ("v4", true),
        ("v5", false),
    ];
    settle(&s, &after_restart).await;
    // The check watcher relists after the restart (its watch's resourceVersion is older than the new API
    // server's cache); an unchanged version is not loaded, nor reported, again.
    for _ in 0..10 {
        assert_eq!(times_rejected(&s, "broken").await, 1, "reported again");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // The operator stops; the check changes and an object appears while nobody gates; a new operator
    // catches up on everything.
    operator.stop().await;
    s.put("meta", &[("config", r#"{"labels": ["team", "tier"]}"#)])
        .await;
    s.create("v6", &[("team", "e"), ("tier", "gold")]).await;
    let operator = s.operator().await;
    let names = ["v0", "v1", "v2", "v3", "v4", "v5", "v6"];
    let expected: Vec<(&str, bool)> = names.iter().map(|name| (*name, *name == "v6")).collect();
    settle(&s, &expected).await;
    for name in names {
        let object = s.kind.api(&s.client, &s.namespace).get(name).await.unwrap();
        let conditions = object.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let ours = conditions
            .iter()
            .filter(|c| c["type"] == "Preflight")
            .count();
        assert_eq!(
            ours, 1,
            "{name} has exactly one Preflight condition: {conditions:?}"
        );
    }
    operator.stop().await;
    s.remove().await;
}
