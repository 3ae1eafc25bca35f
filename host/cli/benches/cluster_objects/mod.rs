//! Objects for the operator benchmarks at scale: shipping a check as `preflight pack` writes it, creating
//! many objects, waiting until every one carries the expected condition, and waiting until a kind's objects
//! are gone.

use crate::operator_support::*;
use futures::{StreamExt, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::ListParams;
use preflight_operator::{DEFAULT_PART_BYTES, Package, pack};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The longest any step may take.
pub const PATIENCE: Duration = Duration::from_secs(600);

/// Applies the ConfigMaps `preflight pack` writes for `component` (its parts, then the check) as check
/// `name` gating `gates` in `namespace`, with `data` as the check's settings: how a component too large for
/// one ConfigMap (a Python check) is shipped.
pub async fn ship_packed(
    client: &kube::Client,
    component: &[u8],
    name: &str,
    namespace: &str,
    gates: &str,
    data: &[(&str, &str)],
) {
    let data = data
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect::<BTreeMap<_, _>>();
    let maps = pack(&Package {
        component,
        name,
        namespace,
        gates,
        data,
        max_part_bytes: DEFAULT_PART_BYTES,
    })
    .unwrap();
    for config_map in maps {
        let mut value = serde_json::to_value(config_map).unwrap();
        value["apiVersion"] = "v1".into();
        value["kind"] = "ConfigMap".into();
        apply(client, value).await;
    }
}

/// `count` objects that name one available dependency, 32 creations in flight.
pub async fn create_objects(client: &kube::Client, kind: &TestKind, namespace: &str, count: usize) {
    let started = Instant::now();
    stream::iter(0..count)
        .for_each_concurrent(32, |index| async move {
            let spec = json!({"dependsOn": ["postgres-main"]});
            create_object(client, kind, namespace, &format!("o-{index:05}"), spec, &[]).await;
        })
        .await;
    println!(
        "created {count} {} objects in {:.1?}",
        kind.kind,
        started.elapsed()
    );
}

/// The time from `started` until the operators at `addresses` have written `count` conditions on `kind`
/// (their status-write counters, read every 50 ms: listing 5,000 objects that often would load the API
/// server the operators share); then checks, with one list, that every object's condition is `right` (else
/// lists again every second, and the time until they all are counts).
pub async fn all_written(
    client: &kube::Client,
    kind: &TestKind,
    namespace: &str,
    addresses: &[SocketAddr],
    count: usize,
    right: &dyn Fn(&Value) -> bool,
    started: Instant,
) -> Duration {
    let gates = kind.gates();
    loop {
        let mut written = 0.0;
        for address in addresses {
            written += metric_at(
                *address,
                "preflight_status_writes_total",
                &[("kind", &gates)],
            )
            .await;
        }
        if written >= count as f64 {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{written} of {count} conditions written"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut elapsed = started.elapsed();
    loop {
        let list = kind
            .api(client, namespace)
            .list(&ListParams::default())
            .await
            .unwrap();
        let carrying = list
            .items
            .iter()
            .filter(|object| {
                object
                    .data
                    .pointer("/status/conditions")
                    .and_then(|conditions| conditions.as_array())
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|condition| condition["type"] == "Preflight" && right(condition))
                    })
            })
            .count();
        if carrying == count {
            return elapsed;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{carrying} of {count} objects carry the expected condition"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        elapsed = started.elapsed();
    }
}

/// Waits until the API server has deleted the CRD and its objects, so that the next phase does not share
/// the machine with that clean-up.
pub async fn crd_gone(client: &kube::Client, kind: &TestKind) {
    let name = format!("{}.{}", kind.resource.plural, kind.group);
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let started = Instant::now();
    while crds.get_opt(&name).await.unwrap().is_some() {
        assert!(started.elapsed() < PATIENCE, "CRD {name} still there");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
