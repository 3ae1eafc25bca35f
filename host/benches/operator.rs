//! Operator figures against the real API server (tests/cluster), with the operator as a child process
//! (`preflight operator`), the way it runs in a pod:
//! - time from a check ConfigMap change to the first condition written by the new version, with the
//!   component already compiled (a configuration change) and with a component never seen before;
//! - objects gated per second, from the operator's start until 1,000 objects carry a condition;
//! - the operator's resident memory with 10 checks loaded and 1,000 objects.
//!
//! Run: `cargo bench -p preflight --bench operator` (`BENCH_OBJECTS` changes the object count).

#[path = "../tests/operator_support/mod.rs"]
mod operator_support;

use futures::{StreamExt, stream};
use kube::api::ListParams;
use operator_support::*;
use preflight::operator::condition::PreflightCondition;
use preflight_kube_harness::{admin_client, kubeconfig, test_namespace};
use preflight_test_support::check_bytes;
use serde_json::json;
use std::process::{Child, Command, Stdio};
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

    let mut operator = spawn_operator(&namespace);
    let started = Instant::now();
    let api = kind.api(&client, &namespace);
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        let gated = list
            .items
            .iter()
            .filter(|object| object.data.pointer("/status/conditions").is_some())
            .count();
        if gated == objects {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "only {gated} of {objects} objects gated"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    println!(
        "gated {objects} objects × {CHECKS} checks in {elapsed:.2?} from the operator's start: {:.0} objects/s",
        objects as f64 / elapsed.as_secs_f64()
    );
    let (rss, peak) = resident_memory(operator.id());
    println!(
        "operator RSS with {CHECKS} checks and {objects} objects: {rss} MiB now, {peak} MiB peak"
    );

    // Reload latency, on a kind of its own with one object.
    create_object(
        &client,
        &reload,
        &namespace,
        "r",
        json!({}),
        &[("team", "t")],
    )
    .await;
    let reach = async |want: &str| {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let found: Option<PreflightCondition> =
                condition(&client, &reload, &namespace, "r").await;
            if found.is_some_and(|c| c.reason == want) {
                return;
            }
            assert!(Instant::now() < deadline, "no condition {want}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let put = async |component: &[u8], config: &str| {
        let started = Instant::now();
        put_check(
            &client,
            &namespace,
            "reload",
            &reload.gates(),
            component,
            &[("config", config)],
        )
        .await;
        started
    };
    put(&components[0], r#"{"labels": ["team"]}"#).await;
    reach("RequiredMetadataPresent").await;
    let mut cached = Vec::new();
    for round in 0..10 {
        let (config, reason) = if round % 2 == 0 {
            (r#"{"labels": ["tier"]}"#, "RequiredMetadataMissing")
        } else {
            (r#"{"labels": ["team"]}"#, "RequiredMetadataPresent")
        };
        let started = put(&components[0], config).await;
        reach(reason).await;
        cached.push(started.elapsed());
    }
    cached.sort();
    // A component the operator has never compiled: a real check it has not loaded yet (misbehave, in its
    // well-behaved mode).
    let fresh = check_bytes("misbehave");
    let started = put(&fresh, r#"{"mode": "behave"}"#).await;
    reach("Behaved").await;
    let cold = started.elapsed();
    println!(
        "ConfigMap change → condition written by the new version: compiled form cached p50 {:.1?} (min {:.1?}, max {:.1?}, {} changes); new component ({} KB) {cold:.1?}",
        cached[cached.len() / 2],
        cached[0],
        cached[cached.len() - 1],
        cached.len(),
        fresh.len() / 1000,
    );

    stop(&mut operator);
    kind.remove(&client).await;
    reload.remove(&client).await;
}

/// `preflight operator` for `namespace`, logging warnings only, without leader election.
fn spawn_operator(namespace: &str) -> Child {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "operator",
            "--namespace",
            namespace,
            "--leader-election=false",
            "--log-format",
            "text",
        ])
        .args(["--listen", &address.to_string()])
        .env("KUBECONFIG", kubeconfig())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("the preflight binary starts")
}

/// Current and peak resident set of a process, in MiB.
fn resident_memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// SIGTERM, then wait up to 20 s for a graceful exit.
fn stop(operator: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &operator.id().to_string()])
        .status();
    for _ in 0..200 {
        if let Ok(Some(_)) = operator.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = operator.kill();
}
