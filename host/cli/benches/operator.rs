//! Operator figures against the real API server (tests/cluster), with the operator as a child process
//! (`preflight operator`), the way it runs in a pod:
//! - time from a check ConfigMap change to the first condition written by the new version, with the
//!   component already compiled (a configuration change) and with a component never seen before;
//! - objects gated per second, from the operator's start until 1,000 objects carry a condition;
//! - the operator's resident memory with 10 checks loaded and 1,000 objects.
//!
//! Run: `cargo bench -p preflight --bench operator` (`BENCH_OBJECTS` changes the object count,
//! `BENCH_OPERATOR_LOG` the operator's `RUST_LOG`).

mod bench_binary;
mod child_operator;
#[path = "../../operator/tests/all/operator_support/mod.rs"]
mod operator_support;

use child_operator::ChildOperator;
use futures::{StreamExt, stream};
use kube::api::ListParams;
use operator_support::*;
use preflight_kube_harness::{admin_client, test_namespace};
use preflight_test_support::check_bytes;
use serde_json::json;
use std::time::{Duration, Instant};

const CHECKS: usize = 10;
const PATIENCE: Duration = Duration::from_secs(300);

fn main() {
    let objects: usize = std::env::var("BENCH_OBJECTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1000);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(objects));
}

async fn run(objects: usize) {
    let client = admin_client().await;
    let namespace = test_namespace(&client, "bench").await;
    let kind = install_kind(&client, &namespace, "Load", true).await;
    let reload = install_kind(&client, &namespace, "Reload", true).await;
    let components = [
        "required-metadata",
        "dependency-ready",
        "maintenance-window",
    ]
    .map(check_bytes);

    // 1,000 objects, half of them missing the label the first check requires.
    let started = Instant::now();
    stream::iter(0..objects)
        .for_each_concurrent(32, |index| {
            let (client, kind, namespace) = (&client, &kind, &namespace);
            async move {
                let labels: &[(&str, &str)] = if index % 2 == 0 {
                    &[("team", "t")]
                } else {
                    &[]
                };
                let spec = json!({"dependsOn": ["postgres-main"]});
                create_object(
                    client,
                    kind,
                    namespace,
                    &format!("o-{index:05}"),
                    spec,
                    labels,
                )
                .await;
            }
        })
        .await;
    println!("created {objects} objects in {:.1?}", started.elapsed());

    // Ten checks on the load kind: three distinct components with different settings.
    for index in 0..CHECKS {
        let (component, config) = match index % 3 {
            0 => (&components[0], json!({"labels": ["team"]})),
            1 => (&components[1], json!({"available": ["postgres-main"]})),
            _ => (&components[2], json!({"start": "00:00", "end": "23:59"})),
        };
        let data = [("config", config.to_string()), ("order", index.to_string())];
        let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (*k, v.as_str())).collect();
        put_check(
            &client,
            &namespace,
            &format!("check-{index}"),
            &kind.gates(),
            component,
            &data,
        )
        .await;
    }

    let operator = ChildOperator::spawn(&namespace, &["--leader-election=false"]);
    let address = operator.address;
    let started = Instant::now();
    operator.listening().await;
    let api = kind.api(&client, &namespace);
    let mut first = None;
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        let gated = list
            .items
            .iter()
            .filter(|object| object.data.pointer("/status/conditions").is_some())
            .count();
        if gated > 0 && first.is_none() {
            first = Some((started.elapsed(), gated));
        }
        if gated == objects {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "only {gated} of {objects} objects gated"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let (first_seen, first_gated) = first.unwrap_or_default();
    println!(
        "{objects} objects × {CHECKS} checks: all gated {elapsed:.2?} after the operator's start ({:.0} objects/s overall); \
         first conditions after {first_seen:.2?} (start, list, compile), then {:.0} objects/s",
        objects as f64 / elapsed.as_secs_f64(),
        (objects - first_gated) as f64 / (elapsed - first_seen).as_secs_f64(),
    );
    let (rss, peak) = operator.memory();
    println!(
        "operator RSS with {CHECKS} checks and {objects} objects: {rss} MiB now, {peak} MiB peak"
    );

    // Reload latency, on a kind of its own with one object: from the moment the API server has accepted the
    // ConfigMap change to the first evaluation by the new version (the operator's evaluation counter), and
    // to the condition it writes.
    create_object(
        &client,
        &reload,
        &namespace,
        "r",
        json!({}),
        &[("team", "t")],
    )
    .await;
    let check = format!("{namespace}/reload");
    let evaluated =
        async || metric_at(address, "preflight_evaluations_total", &[("check", &check)]).await;
    let written = async |reason: &str| {
        let found = condition(&client, &reload, &namespace, "r").await;
        found.is_some_and(|c| c.reason == reason)
    };
    let change = async |component: &[u8], config: &str, reason: &str| {
        let before = evaluated().await;
        let requested = Instant::now();
        put_check(
            &client,
            &namespace,
            "reload",
            &reload.gates(),
            component,
            &[("config", config)],
        )
        .await;
        let accepted = Instant::now();
        while evaluated().await <= before {
            assert!(
                accepted.elapsed() < PATIENCE,
                "no evaluation by the new version"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let evaluation = accepted.elapsed();
        while !written(reason).await {
            assert!(accepted.elapsed() < PATIENCE, "no condition {reason}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (accepted - requested, evaluation, accepted.elapsed())
    };
    change(
        &components[0],
        r#"{"labels": ["team"]}"#,
        "RequiredMetadataPresent",
    )
    .await;
    let mut cached = Vec::new();
    for round in 0..20 {
        let (config, reason) = if round % 2 == 0 {
            (r#"{"labels": ["tier"]}"#, "RequiredMetadataMissing")
        } else {
            (r#"{"labels": ["team"]}"#, "RequiredMetadataPresent")
        };
        cached.push(change(&components[0], config, reason).await);
    }
    let median = |pick: fn(&(Duration, Duration, Duration)) -> Duration| {
        let mut values: Vec<Duration> = cached.iter().map(pick).collect();
        values.sort();
        values[values.len() / 2]
    };
    println!(
        "check ConfigMap change, compiled form cached (p50 of {} changes): the API server accepts it in {:.1?}; \
         first evaluation by the new version {:.1?} later; its condition written {:.1?} later",
        cached.len(),
        median(|c| c.0),
        median(|c| c.1),
        median(|c| c.2),
    );
    // A component the operator has never compiled: a real check it has not loaded yet (misbehave, in its
    // well-behaved mode).
    let fresh = check_bytes("misbehave");
    let (accept, evaluation, write) = change(&fresh, r#"{"mode": "behave"}"#, "Behaved").await;
    println!(
        "check ConfigMap change, new component ({} KB, compiled on arrival): accepted in {accept:.1?}; first \
         evaluation {evaluation:.1?} later; condition written {write:.1?} later",
        fresh.len() / 1000,
    );

    drop(operator);
    kind.remove(&client).await;
    reload.remove(&client).await;
}
