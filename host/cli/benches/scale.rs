//! The operator at scale against the real API server (tests/cluster), with the operator as a child process
//! (`preflight operator`), the way it runs in a pod:
//!
//! 1. **Gate against no gate.** 5,000 objects of one kind, then one check ConfigMap gating it
//!    (plugins/dependency-ready, which every object passes); the time from the API server accepting the
//!    ConfigMap until the operator has written a condition on every object. The baseline is the same
//!    operator with the same ConfigMap and `suspend: "true"`: it watches, lists, reconciles and writes the
//!    same condition, without evaluating. Eight phases, off on on off on off off on (each on a kind of its
//!    own, deleted afterwards), so that a drift of the machine hits both sides alike; the ratio is of the
//!    medians (one run of four phases read 0.997, another 1.218).
//! 2. **Memory.** A fresh operator for 5,000 objects and 50 distinct checks (the example component, each
//!    made distinct by a custom section, so each is compiled and kept on its own): resident memory, now and
//!    at its peak, once every object carries its condition.
//! 3. **Quiet once converged.** Status writes during the next minute.
//!
//! Run: `cargo bench -p preflight --bench scale` (`BENCH_OBJECTS`, `BENCH_CHECKS` change the counts).

mod child_operator;
mod cluster_objects;
#[path = "../../operator/tests/all/operator_support/mod.rs"]
mod operator_support;

use child_operator::ChildOperator;
use cluster_objects::{PATIENCE, all_written, crd_gone, create_objects};
use operator_support::*;
use preflight_kube_harness::{admin_client, test_namespace};
use preflight_test_support::{check_bytes, with_custom_section};
use serde_json::Value;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"{"available": ["postgres-main"]}"#;
/// How long the converged operator is watched for writes.
const QUIET: Duration = Duration::from_secs(60);

fn main() {
    let count = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(default)
    };
    let (objects, checks) = (count("BENCH_OBJECTS", 5000), count("BENCH_CHECKS", 50));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(objects, checks));
}

async fn run(objects: usize, checks: usize) {
    let client = admin_client().await;
    let component = check_bytes("dependency-ready");

    // 1. Gate against no gate.
    let namespace = test_namespace(&client, "scale").await;
    let operator = ChildOperator::spawn(&namespace, &["--leader-election=false"]);
    let address = operator.address;
    operator.listening().await;
    // The component compiled before the first phase, and kept loaded by a check on a kind of its own, so
    // that no phase pays for the compilation.
    let warm = install_kind(&client, &namespace, "Warm", true).await;
    put_check(
        &client,
        &namespace,
        "warm",
        &warm.gates(),
        &component,
        &[("config", CONFIG)],
    )
    .await;
    let loaded = async || {
        metric_at(
            address,
            "preflight_checks_loaded",
            &[("kind", &warm.gates())],
        )
        .await
    };
    let started = Instant::now();
    while loaded().await < 1.0 {
        assert!(
            started.elapsed() < PATIENCE,
            "the warm-up check never loaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut gated = Vec::new();
    let mut baseline = Vec::new();
    for (phase, suspended) in [true, false, false, true, false, true, true, false]
        .into_iter()
        .enumerate()
    {
        let kind = install_kind(&client, &namespace, &format!("Scale{phase}"), true).await;
        create_objects(&client, &kind, &namespace, objects).await;
        let suspend = suspended.to_string();
        let accepted = Instant::now();
        put_check(
            &client,
            &namespace,
            &format!("gate-{phase}"),
            &kind.gates(),
            &component,
            &[("config", CONFIG), ("suspend", &suspend)],
        )
        .await;
        let accepted = accepted.elapsed();
        let started = Instant::now();
        let reason = if suspended {
            "CheckSuspended"
        } else {
            "DependenciesAvailable"
        };
        let right = |condition: &Value| condition["reason"] == reason;
        let elapsed = all_written(
            &client,
            &kind,
            &namespace,
            &[address],
            objects,
            &right,
            started,
        )
        .await;
        println!(
            "phase {phase}: {objects} objects, {}: every condition written {elapsed:.2?} after the API server \
             accepted the check ConfigMap (in {accepted:.1?})",
            if suspended {
                "gate off (suspend)"
            } else {
                "gate on"
            }
        );
        if suspended {
            baseline.push(elapsed);
        } else {
            gated.push(elapsed);
        }
        // The check ConfigMap stays: removing it would have the operator release (write to) every object of
        // a kind being deleted; a check whose kind is gone costs a lookup now and then.
        kind.remove(&client).await;
        crd_gone(&client, &kind).await;
    }
    drop(operator);
    warm.remove(&client).await;
    let median = |times: &mut Vec<Duration>| {
        times.sort();
        (times[(times.len() - 1) / 2] + times[times.len() / 2]) / 2
    };
    let (gate, base) = (median(&mut gated), median(&mut baseline));
    println!(
        "gate on ÷ gate off, {objects} objects: {:.3} ({gate:.2?} ÷ {base:.2?}; medians of {} phases each)",
        gate.as_secs_f64() / base.as_secs_f64(),
        gated.len()
    );

    // 2. Memory with many checks, 3. writes once converged.
    let namespace = test_namespace(&client, "scale-rss").await;
    let kind = install_kind(&client, &namespace, "Many", true).await;
    create_objects(&client, &kind, &namespace, objects).await;
    for index in 0..checks {
        let distinct =
            with_custom_section(&component, "bench-variant", index.to_string().as_bytes());
        let order = index.to_string();
        put_check(
            &client,
            &namespace,
            &format!("check-{index:02}"),
            &kind.gates(),
            &distinct,
            &[("config", CONFIG), ("order", &order)],
        )
        .await;
    }
    let operator = ChildOperator::spawn(&namespace, &["--leader-election=false"]);
    let address = operator.address;
    operator.listening().await;
    let started = Instant::now();
    // One check says why in its own words; several proceeding checks say so together.
    // Every check has passed the object: one says why in its own words; several say so together, each
    // check naming itself in the message. (Checks arrive one by one as they compile, each time re-gating
    // every object, so a condition from fewer checks is no answer yet.)
    let every_check = |condition: &Value| {
        let passed = if checks == 1 {
            "DependenciesAvailable"
        } else {
            "AllChecksPassed"
        };
        condition["reason"] == passed
            && condition["message"]
                .as_str()
                .is_some_and(|message| message.split("; ").count() == checks)
    };
    let elapsed = all_written(
        &client,
        &kind,
        &namespace,
        &[address],
        objects,
        &every_check,
        started,
    )
    .await;
    let evaluations = metric_at(
        address,
        "preflight_evaluations_total",
        &[("kind", &kind.gates())],
    )
    .await;
    let (rss, peak) = operator.memory();
    println!(
        "{objects} objects × {checks} distinct checks: every condition written {elapsed:.2?} after the \
         operator's start ({evaluations} evaluations); operator RSS {rss} MiB now, {peak} MiB peak"
    );
    let writes = async || {
        metric_at(
            address,
            "preflight_status_writes_total",
            &[("kind", &kind.gates())],
        )
        .await
    };
    let before = writes().await;
    tokio::time::sleep(QUIET).await;
    let after = writes().await;
    let (rss, peak) = operator.memory();
    println!(
        "once converged: {} status writes in the next {QUIET:?}; RSS then {rss} MiB, {peak} MiB peak",
        after - before
    );
    drop(operator);
    kind.remove(&client).await;
}
