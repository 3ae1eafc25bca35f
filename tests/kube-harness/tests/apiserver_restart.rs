//! kube-apiserver stops and starts while a watch is open; the watch recovers and sees what happened after.
//! (Its own test binary: it restarts the shared API server, so nothing else may run beside it.)

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use preflight_kube_harness::{admin_client, eventually, stop_apiserver, test_namespace, up};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn a_watch_recovers_when_the_api_server_restarts() {
    let client = admin_client().await;
    let namespace = test_namespace(&client, "restart").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);

    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let recorded = Arc::clone(&seen);
    let watch = tokio::spawn(
        watcher(config_maps.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .for_each(move |object| {
                if let Ok(object) = object {
                    recorded.lock().unwrap().insert(object.name_any());
                }
                std::future::ready(())
            }),
    );
    let has = |name: &'static str| {
        let seen = Arc::clone(&seen);
        move || {
            let found = seen.lock().unwrap().contains(name);
            std::future::ready(found.then_some(()))
        }
    };

    config_maps
        .create(&PostParams::default(), &config_map("before"))
        .await
        .unwrap();
    eventually(
        "the watch to see `before`",
        Duration::from_secs(20),
        has("before"),
    )
    .await;

    stop_apiserver();
    assert!(
        config_maps.get("before").await.is_err(),
        "the API server is down"
    );
    tokio::task::spawn_blocking(up).await.unwrap();

    eventually(
        "the restarted API server to accept a write",
        Duration::from_secs(60),
        || async {
            config_maps
                .create(&PostParams::default(), &config_map("after"))
                .await
                .ok()
        },
    )
    .await;
    eventually(
        "the watch to recover and see `after`",
        Duration::from_secs(60),
        has("after"),
    )
    .await;
    watch.abort();
}
