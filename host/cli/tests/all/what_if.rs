//! `preflight what-if` as a user runs it, against the real kube-apiserver (tests/cluster) with 1,000 live
//! objects: it lists exactly the objects whose verdict would change, writes nothing (its identity may only
//! read, and the server counts no write to the kind), and takes less than twice the time the operator needs
//! to gate the same objects, measured in the same run.

use crate::operator_support::*;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use preflight_kube_harness::{eventually, kubeconfig};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const OBJECTS: usize = 1000;

/// Object `i` carries `team` when `i` is even, and `tier` when `i` is below half: the cluster's check asks
/// for `team`, the candidate for `tier`, so a quarter turns proceed → hold, a quarter hold → proceed.
fn labels_of(i: usize) -> Vec<(&'static str, &'static str)> {
    let mut labels = Vec::new();
    if i.is_multiple_of(2) {
        labels.push(("team", "shop"));
    }
    if i < OBJECTS / 2 {
        labels.push(("tier", "web"));
    }
    labels
}

fn name_of(i: usize) -> String {
    format!("ledger-{i:04}")
}

/// A kubeconfig acting as ServiceAccount `namespace/name`: the admin's, with impersonation.
fn read_only_kubeconfig(dir: &Path, namespace: &str, name: &str) -> PathBuf {
    let admin = std::fs::read_to_string(kubeconfig()).unwrap();
    let mut config: Value = serde_norway::from_str(&admin).unwrap();
    for user in config["users"].as_array_mut().unwrap() {
        user["user"]["as"] = json!(format!("system:serviceaccount:{namespace}:{name}"));
        user["user"]["as-groups"] = json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated"
        ]);
    }
    let path = dir.join("what-if.kubeconfig");
    std::fs::write(&path, serde_norway::to_string(&config).unwrap()).unwrap();
    path
}

/// Lets ServiceAccount `namespace/what-if` read the kind's objects and the check ConfigMaps, nothing else.
async fn grant_reading(client: &Client, namespace: &str, kind: &TestKind) {
    Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "what-if"}})).unwrap(),
        )
        .await
        .unwrap();
    apply(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "what-if", "namespace": namespace},
            "rules": [
                {"apiGroups": [kind.group], "resources": [kind.resource.plural], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
            ],
        }),
    )
    .await;
    apply(
        client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "what-if", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "what-if"},
            "subjects": [{"kind": "ServiceAccount", "name": "what-if", "namespace": namespace}],
        }),
    )
    .await;
}

/// Requests the API server counted that change objects of `group`.
async fn writes_to(client: &Client, group: &str) -> f64 {
    let group = format!("group=\"{group}\"");
    apiserver_requests(client, |line| {
        line.contains(&group)
            && [
                "POST",
                "PUT",
                "PATCH",
                "APPLY",
                "DELETE",
                "DELETECOLLECTION",
            ]
            .iter()
            .any(|verb| line.contains(&format!("verb=\"{verb}\"")))
    })
    .await
}

/// Runs `preflight what-if ARGS -o json` with `kubeconfig`.
fn run_what_if(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    Command::new("timeout")
        .arg("300")
        .arg(env!("CARGO_BIN_EXE_preflight"))
        .arg("what-if")
        .args(args)
        .args(["-o", "json"])
        .env("KUBECONFIG", kubeconfig)
        .env(
            "PREFLIGHT_CACHE_DIR",
            preflight_test_support::compiled_cache_dir(),
        )
        .output()
        .unwrap()
}

/// Runs `preflight what-if` with `args` as the read-only identity; returns its exit status and JSON report.
fn what_if(kubeconfig: &Path, args: &[&str]) -> (i32, Value, Duration) {
    let started = Instant::now();
    let output = run_what_if(kubeconfig, args);
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|error| {
        panic!(
            "what-if printed no JSON ({error}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap_or(-1), report, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_lists_exactly_the_changing_objects_writes_nothing_and_keeps_pace_with_the_operator()
 {
    let s = Scenario::new("whatif", "Ledger", "required-metadata").await;
    s.put("meta", &[("config", r#"{"labels": ["team"]}"#)])
        .await;
    let api = s.kind.api(&s.client, &s.namespace);
    stream::iter(0..OBJECTS)
        .for_each_concurrent(16, |i| {
            let s = &s;
            async move {
                s.create(&name_of(i), &labels_of(i)).await;
            }
        })
        .await;

    // The operator gates the objects; timed from its start until every object has a condition.
    let started = Instant::now();
    let operator = s.operator().await;
    eventually(
        "every object to be gated",
        Duration::from_secs(300),
        || async {
            let objects = api.list(&ListParams::default()).await.ok()?.items;
            let gated = objects
                .iter()
                .filter(|object: &&DynamicObject| {
                    preflight_operator::condition_of(object).is_some()
                })
                .count();
            tokio::time::sleep(Duration::from_millis(100)).await;
            (gated == OBJECTS).then_some(())
        },
    )
    .await;
    let gating = started.elapsed();
    operator.stop().await;

    grant_reading(&s.client, &s.namespace, &s.kind).await;
    let dir = tempfile_dir(&s.namespace);
    let kubeconfig = read_only_kubeconfig(&dir, &s.namespace, "what-if");
    let config = dir.join("tier.json");
    std::fs::write(&config, r#"{"labels": ["tier"]}"#).unwrap();
    let check = preflight_test_support::build_check("required-metadata");
    let gates = s.kind.gates();
    let writes_before = writes_to(&s.client, &s.kind.group).await;
    let (status, report, took) = what_if(
        &kubeconfig,
        &[
            check.to_str().unwrap(),
            "--gates",
            &gates,
            "--config",
            config.to_str().unwrap(),
            "--check-namespace",
            &s.namespace,
            "-n",
            &s.namespace,
        ],
    );
    assert_eq!(
        status, 1,
        "differences exit with 1, as kubectl diff: {report}"
    );
    let listed: BTreeSet<(String, String)> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["name"].as_str().unwrap().to_owned(),
                row["change"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = (0..OBJECTS)
        .filter_map(|i| {
            let (team, tier) = (i.is_multiple_of(2), i < OBJECTS / 2);
            let change = match (team, tier) {
                (true, false) => "proceed-to-hold",
                (false, true) => "hold-to-proceed",
                _ => return None,
            };
            Some((name_of(i), change.to_owned()))
        })
        .collect();
    assert_eq!(expected.len(), OBJECTS / 2);
    assert_eq!(
        listed, expected,
        "exactly the objects whose verdict changes"
    );
    let totals = &report["totals"];
    assert_eq!(totals["objects"], OBJECTS);
    assert_eq!(totals["unchanged"], OBJECTS / 2);
    assert_eq!(totals["notEvaluated"], 0);
    assert_eq!(
        writes_to(&s.client, &s.kind.group).await,
        writes_before,
        "what-if writes nothing"
    );
    println!(
        "what-if on {OBJECTS} objects: {:.2} s (process), operator gating them: {:.2} s, ratio {:.2}",
        took.as_secs_f64(),
        gating.as_secs_f64(),
        took.as_secs_f64() / gating.as_secs_f64()
    );
    assert!(
        took < 2 * gating,
        "what-if took {took:?}, the operator {gating:?} to gate the same objects"
    );

    // The check as it is in the cluster: nothing would change.
    let reference = format!("{}/meta", s.namespace);
    let (status, report, _) = what_if(
        &kubeconfig,
        &["--configmap", &reference, "-n", &s.namespace],
    );
    assert_eq!(status, 0, "{report}");
    assert_eq!(report["totals"]["unchanged"], OBJECTS);
    assert_eq!(report["check"], reference);
    std::fs::remove_dir_all(&dir).unwrap();
    s.remove().await;
}

/// A fresh scratch directory for this test.
fn tempfile_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("preflight-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `preflight what-if ARGS -o json` as the admin; returns the exit status, stdout and stderr.
fn what_if_as_admin(args: &[&str]) -> (i32, String, String) {
    let output = run_what_if(kubeconfig(), args);
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_reads_a_check_from_its_registry_verified_as_the_operator_would() {
    use preflight_oci::{CheckReference, Credentials, Registry, RegistryOptions};
    use preflight_test_support::{CosignKeys, TestRegistry, Transport};
    let s = Scenario::new("what-if-oci", "Voucher", "required-metadata").await;
    let registry = TestRegistry::start(Transport::PlainHttp);
    let reference = CheckReference::parse(&format!("oci://{}/meta:1", registry.host())).unwrap();
    let pushed = Registry::new(&RegistryOptions {
        plain_http: vec![registry.host()],
        ..RegistryOptions::default()
    })
    .push(&reference, &s.wasm, &Credentials::Anonymous)
    .await
    .unwrap();
    let pinned = reference.pinned(&pushed.manifest_digest);
    let (ours, theirs) = (CosignKeys::generate(), CosignKeys::generate());
    registry.cosign_sign(&ours, pinned.to_string().trim_start_matches("oci://"));
    for (name, labels) in [("labelled", vec![("team", "shop")]), ("bare", vec![])] {
        s.create(name, &labels).await;
    }
    apply(
        &s.client,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "meta", "namespace": s.namespace,
                "labels": {preflight_operator::GATES_LABEL: s.kind.gates()},
            },
            "data": {"source": pinned.to_string(), "config": r#"{"labels": ["team"]}"#},
        }),
    )
    .await;
    let configmap = format!("{}/meta", s.namespace);
    let host = registry.host();
    let (ours, theirs) = (ours.public_key_file(), theirs.public_key_file());
    let run = |key: &Path| {
        what_if_as_admin(&[
            "--configmap",
            &configmap,
            "-n",
            &s.namespace,
            "--registry-plain-http",
            &host,
            "--verify-key",
            key.to_str().unwrap(),
        ])
    };

    // Pulled and verified: both objects are evaluated (neither has a condition yet, so both would change).
    let (status, stdout, stderr) = run(&ours);
    assert_eq!(status, 1, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["totals"]["objects"], 2, "{report}");
    assert_eq!(report["totals"]["notSelected"], 0, "{report}");

    // The operator would refuse it with another key: so does what-if, saying why.
    let (status, _, stderr) = run(&theirs);
    assert_eq!(status, 2, "{stderr}");
    assert!(
        stderr.contains("none of the 1 signature(s)")
            && stderr.contains(pushed.manifest_digest.as_str()),
        "{stderr}"
    );
    s.remove().await;
}
