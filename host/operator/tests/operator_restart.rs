//! The API server restarts under a running operator, then the operator itself restarts while a check
//! changes: every object ends with the right condition, exactly once. (Its own test binary, apart from
//! `tests/all`: it restarts the shared API server, so nothing else may run beside it; cargo runs test binaries
//! one after another.)

#[path = "all/operator_support/mod.rs"]
mod operator_support;

use operator_support::*;
use preflight_kube_harness::{stop_apiserver, up};
use std::time::Duration;

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
    let operator = s.operator().await;
    settle(
        &s,
        &[("v0", true), ("v1", false), ("v2", true), ("v3", false)],
    )
    .await;

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
