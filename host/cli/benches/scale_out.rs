//! Scale-out: the time 1, 2 and 3 replicas of one shard ring (`preflight operator --shard-ring`, child
//! processes) take to gate 20,000 objects with a heavy check — the Python build of plugins/dependency-ready
//! (a fresh CPython instance per evaluation, shipped in parts as `preflight pack` writes it) — from the API
//! server accepting the check until every object carries its condition, as ratios to one replica, with the
//! evaluations each replica made. Each phase has a kind and a namespace (so a ring) of its own; the
//! component is compiled once before the phases into a compiled-check cache the replicas share, so no phase
//! pays for compiling. The replicas share this machine's cores: the ratio measures how the work spreads, and
//! is bounded by the cores (2 here), not by the ring.
//!
//! Run: `cargo bench -p preflight --bench scale_out` (`BENCH_OBJECTS` changes the count,
//! `BENCH_REPLICAS=1,2,3` the phases).

mod bench_binary;
mod child_operator;
mod cluster_objects;
#[path = "../../operator/tests/all/operator_support/mod.rs"]
mod operator_support;

use child_operator::ChildOperator;
use cluster_objects::{PATIENCE, all_written, crd_gone, create_objects, ship_packed};
use operator_support::*;
use preflight_kube_harness::{admin_client, test_namespace};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The check's settings: the dependency every object names is available; a CPython start may take a while.
const DATA: &[(&str, &str)] = &[
    ("config", r#"{"available": ["postgres-main"]}"#),
    ("timeout", "5s"),
];

fn main() {
    let objects = std::env::var("BENCH_OBJECTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20_000);
    let replicas: Vec<usize> = std::env::var("BENCH_REPLICAS")
        .unwrap_or_else(|_| "1,2,3".into())
        .split(',')
        .filter_map(|count| count.trim().parse().ok())
        .collect();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(objects, &replicas));
}

/// Starts `count` replicas of ring `bench` in `namespace`, sharing the compiled-check cache `cache`, and
/// waits until each sees all of them.
async fn ring(namespace: &str, count: usize, cache: &str) -> Vec<ChildOperator> {
    let replicas: Vec<ChildOperator> = (0..count)
        .map(|index| {
            let pod = format!("replica-{index}");
            let arguments = [
                "--shard-ring",
                "bench",
                "--pod-name",
                &pod,
                "--cache-dir",
                cache,
            ];
            ChildOperator::spawn(namespace, &arguments)
        })
        .collect();
    for replica in &replicas {
        replica.listening().await;
    }
    let started = Instant::now();
    for replica in &replicas {
        while metric_at(replica.address, "preflight_shard_ring_members", &[]).await != count as f64
        {
            assert!(started.elapsed() < PATIENCE, "the ring never formed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    replicas
}

async fn run(objects: usize, phases: &[usize]) {
    let client = admin_client().await;
    let component = std::fs::read(preflight_test_support::build_python_check(
        "plugins/dependency-ready",
    ))
    .unwrap();
    let cache = preflight_test_support::wasm_target_dir().join("compiled-scale-out");
    let cache = cache.to_str().unwrap().to_owned();

    // Compile once into the shared cache: one replica loads the check on a kind of its own.
    let namespace = test_namespace(&client, "scaleout-warm").await;
    let warm = install_kind(&client, &namespace, "Warm", true).await;
    let replicas = ring(&namespace, 1, &cache).await;
    ship_packed(
        &client,
        &component,
        "deps-python",
        &namespace,
        &warm.gates(),
        DATA,
    )
    .await;
    let started = Instant::now();
    while metric_at(
        replicas[0].address,
        "preflight_checks_loaded",
        &[("kind", &warm.gates())],
    )
    .await
        < 1.0
    {
        assert!(
            started.elapsed() < PATIENCE,
            "the Python check never loaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "compiled the Python check once in {:.1?}",
        started.elapsed()
    );
    drop(replicas);
    warm.remove(&client).await;

    let mut results = Vec::new();
    for (phase, &count) in phases.iter().enumerate() {
        let namespace = test_namespace(&client, &format!("scaleout{phase}")).await;
        let kind = install_kind(&client, &namespace, &format!("Out{phase}"), true).await;
        create_objects(&client, &kind, &namespace, objects).await;
        let replicas = ring(&namespace, count, &cache).await;
        let accepted = Instant::now();
        ship_packed(
            &client,
            &component,
            "deps-python",
            &namespace,
            &kind.gates(),
            DATA,
        )
        .await;
        let applied = accepted.elapsed();
        let started = Instant::now();
        let addresses: Vec<_> = replicas.iter().map(|replica| replica.address).collect();
        let right = |condition: &Value| condition["reason"] == "DependenciesAvailable";
        let elapsed = all_written(
            &client, &kind, &namespace, &addresses, objects, &right, started,
        )
        .await;
        let mut evaluations = Vec::new();
        for address in &addresses {
            let check = format!("{namespace}/deps-python");
            evaluations.push(
                metric_at(
                    *address,
                    "preflight_evaluations_total",
                    &[("check", &check)],
                )
                .await,
            );
        }
        println!(
            "phase {phase}: {count} replica(s), {objects} objects: every condition written {elapsed:.2?} after \
             the check was applied (its parts took {applied:.1?} to apply); evaluations per replica \
             {evaluations:?}"
        );
        let memory: Vec<u64> = replicas.iter().map(|replica| replica.memory().0).collect();
        println!("phase {phase}: resident memory per replica (MiB): {memory:?}");
        results.push((count, elapsed, evaluations));
        drop(replicas);
        kind.remove(&client).await;
        crd_gone(&client, &kind).await;
    }
    let one = results
        .iter()
        .find(|(count, ..)| *count == 1)
        .map(|(_, elapsed, _)| elapsed.as_secs_f64());
    println!(
        "replicas | time to gate {objects} objects | ratio to one replica | evaluations per replica"
    );
    for (count, elapsed, evaluations) in &results {
        let ratio = one.map_or("-".to_owned(), |one| {
            format!("{:.2}", elapsed.as_secs_f64() / one)
        });
        println!("{count} | {elapsed:.1?} | {ratio} | {evaluations:?}");
    }
}
