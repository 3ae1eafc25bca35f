//! The operator at scale against the real API server (tests/cluster), with the operator as a child process
//! (`preflight operator`), the way it runs in a pod:
//!
//! 1. **Gate against no gate.** 5,000 objects of one kind, then one check gating it (plugins/dependency-ready,
//!    which every object passes); the time from the API server accepting the check's ConfigMaps until the
//!    operator has written a condition on every object. Five sides: the Rust build gating, the Python build
//!    (shipped in parts, as `preflight pack` writes it) gating with a fresh instance per evaluation and with
//!    `isolation: reuse`, and each build's baseline: the same operator and ConfigMaps with `suspend: "true"`
//!    (it watches, lists, reconciles and writes the same condition, without evaluating). Four rounds, each
//!    side once per round on a kind of its own (deleted afterwards), the order reversed every other round so
//!    that a drift of the machine hits every side alike; ratios are of the medians.
//! 2. **Memory.** A fresh operator for 5,000 objects and 50 distinct checks (the example component, each
//!    made distinct by a custom section, so each is compiled and kept on its own): resident memory, now and
//!    at its peak, once every object carries its condition.
//! 3. **Quiet once converged.** Status writes during the next minute.
//!
//! Run: `cargo bench -p preflight --bench scale` (`BENCH_OBJECTS`, `BENCH_CHECKS`, `BENCH_ROUNDS` change the
//! counts).

mod bench_binary;
mod child_operator;
mod cluster_objects;
#[path = "../../operator/tests/all/operator_support/mod.rs"]
mod operator_support;

use child_operator::ChildOperator;
use cluster_objects::{PATIENCE, all_written, crd_gone, create_objects, ship_packed};
use operator_support::*;
use preflight_kube_harness::{admin_client, test_namespace};
use preflight_test_support::{build_python_check, check_bytes, with_custom_section};
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
    let (objects, checks, rounds) = (
        count("BENCH_OBJECTS", 5000),
        count("BENCH_CHECKS", 50),
        count("BENCH_ROUNDS", 4),
    );
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(objects, checks, rounds));
}

/// One side of the gate comparison: a check built in one language, evaluating (fresh instances, or reused
/// ones) or suspended.
struct Side {
    name: &'static str,
    language: Language,
    settings: &'static [(&'static str, &'static str)],
    suspended: bool,
}

/// Which build of the example a side ships.
#[derive(Clone, Copy)]
enum Language {
    Rust,
    Python,
}

/// The sides, in the order of a round (every other round reverses it).
const SIDES: [Side; 5] = [
    Side {
        name: "Rust, gate off (suspend)",
        language: Language::Rust,
        settings: &[("suspend", "true")],
        suspended: true,
    },
    Side {
        name: "Rust, gate on",
        language: Language::Rust,
        settings: &[],
        suspended: false,
    },
    Side {
        name: "Python, gate off (suspend)",
        language: Language::Python,
        settings: &[("suspend", "true")],
        suspended: true,
    },
    Side {
        name: "Python, gate on, fresh instances",
        language: Language::Python,
        settings: &[],
        suspended: false,
    },
    Side {
        name: "Python, gate on, isolation: reuse",
        language: Language::Python,
        settings: &[("isolation", "reuse")],
        suspended: false,
    },
];

/// The ratios reported, as (gated side, its baseline, goal).
const RATIOS: [(usize, usize, f64); 3] = [(1, 0, 1.10), (3, 2, 1.3), (4, 2, 1.1)];

async fn run(objects: usize, checks: usize, rounds: usize) {
    let client = admin_client().await;
    let component = check_bytes("dependency-ready");
    let python = std::fs::read(build_python_check("plugins/dependency-ready")).unwrap();
    let ship = async |side: &Side, name: &str, namespace: &str, gates: &str| {
        let mut data = vec![("config", CONFIG), ("timeout", "5s")];
        data.extend(side.settings);
        match side.language {
            Language::Rust => put_check(&client, namespace, name, gates, &component, &data).await,
            Language::Python => ship_packed(&client, &python, name, namespace, gates, &data).await,
        }
    };

    // 1. Gate against no gate.
    let namespace = test_namespace(&client, "scale").await;
    let operator = ChildOperator::spawn(&namespace, &["--leader-election=false"]);
    let address = operator.address;
    operator.listening().await;
    // Each component compiled before the first phase, and kept loaded by a check on a kind of its own, so
    // that no phase pays for the compilation.
    let warm = install_kind(&client, &namespace, "Warm", true).await;
    let loaded = async || {
        metric_at(
            address,
            "preflight_checks_loaded",
            &[("kind", &warm.gates())],
        )
        .await
    };
    let started = Instant::now();
    for (count, side) in [&SIDES[1], &SIDES[3]].into_iter().enumerate() {
        let name = format!("warm-{count}");
        ship(side, &name, &namespace, &warm.gates()).await;
        while loaded().await < count as f64 + 1.0 {
            assert!(started.elapsed() < PATIENCE, "{} never loaded", side.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    println!("compiled both checks in {:.1?}", started.elapsed());
    let mut times: Vec<Vec<Duration>> = SIDES.iter().map(|_| Vec::new()).collect();
    // Rounds alternate their order (A B C D E, E D C B A, ...), so that a drift of the machine hits every
    // side alike.
    let order = (0..rounds).flat_map(|round| {
        let sides: Vec<usize> = if round % 2 == 0 {
            (0..SIDES.len()).collect()
        } else {
            (0..SIDES.len()).rev().collect()
        };
        sides
    });
    for (phase, index) in order.enumerate() {
        let side = &SIDES[index];
        let kind = install_kind(&client, &namespace, &format!("Scale{phase}"), true).await;
        create_objects(&client, &kind, &namespace, objects).await;
        let accepted = Instant::now();
        ship(side, &format!("gate-{phase}"), &namespace, &kind.gates()).await;
        let accepted = accepted.elapsed();
        let started = Instant::now();
        let reason = if side.suspended {
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
             accepted the check ConfigMaps (in {accepted:.1?})",
            side.name
        );
        times[index].push(elapsed);
        // The check ConfigMaps stay: removing them would have the operator release (write to) every object
        // of a kind being deleted; a check whose kind is gone costs a lookup now and then.
        kind.remove(&client).await;
        crd_gone(&client, &kind).await;
    }
    drop(operator);
    warm.remove(&client).await;
    let medians: Vec<Duration> = times
        .iter_mut()
        .map(|times| {
            times.sort();
            (times[(times.len() - 1) / 2] + times[times.len() / 2]) / 2
        })
        .collect();
    println!(
        "\n| {objects} objects | time ÷ its gate off (medians of {rounds} phases) | goal | met |"
    );
    println!("| --- | --- | --- | --- |");
    for (gated, baseline, goal) in RATIOS {
        let ratio = medians[gated].as_secs_f64() / medians[baseline].as_secs_f64();
        println!(
            "| {} | {ratio:.3} ({:.2?} ÷ {:.2?}) | ≤ {goal} | {} |",
            SIDES[gated].name,
            medians[gated],
            medians[baseline],
            if ratio <= goal { "yes" } else { "no" }
        );
    }

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
