//! The `preflight operator` process against the real kube-apiserver (tests/cluster): it exits promptly on
//! SIGTERM, releasing its Lease, and writes what checks log into its JSON logs with the object they were about.

use crate::operator_support::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use preflight_kube_harness::{eventually, kubeconfig};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SOON: Duration = Duration::from_secs(30);
const TEAM_LABEL: (&str, &str) = ("config", r#"{"labels": ["team"]}"#);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_an_idle_operator_at_once() {
    let s = Scenario::new("sigterm", "Queue", "required-metadata").await;
    s.put("meta", &[TEAM_LABEL]).await;
    s.create("q0", &[]).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let mut child = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "operator",
            "--namespace",
            &s.namespace,
            "--pod-name",
            "sigterm",
        ])
        .args(["--lease-duration", "5s", "--listen", &address.to_string()])
        .env("KUBECONFIG", kubeconfig())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("the preflight binary starts");
    s.wait("q0", "False", "RequiredMetadataMissing").await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if signalled.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("the operator still runs 20 s after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = signalled.elapsed();
    assert!(exited.success(), "{exited}");
    assert!(
        took < Duration::from_secs(3),
        "an idle operator took {took:?} to exit"
    );
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.namespace);
    let holder = leases
        .get("preflight-operator")
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.holder_identity);
    assert_ne!(holder.as_deref(), Some("sigterm"), "the Lease was released");
    s.remove().await;
}

/// A selector the API server cannot read stops the start, naming it, instead of a watch that retries for
/// ever while the operator never becomes ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_the_api_server_cannot_read_stops_the_operator_at_start() {
    let s = Scenario::new("badselector", "Ledger", "required-metadata").await;
    let selectors = [
        ("--check-selector", "==="),
        ("--watch-selector", "tier in (gold"),
    ];
    for (flag, selector) in selectors {
        // `timeout` ends an operator that keeps running (exit 124) instead of hanging the test.
        let mut command = Command::new("timeout");
        command
            .arg(SOON.as_secs().to_string())
            .arg(env!("CARGO_BIN_EXE_preflight"))
            .args([
                "operator",
                "--namespace",
                &s.namespace,
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--leader-election=false", flag, selector])
            .env("KUBECONFIG", kubeconfig());
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{flag} {selector:?}: {stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "{selector:?} is not a label selector the API server reads"
            )),
            "{flag}: {stderr}"
        );
    }
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_check_logs_reaches_the_operators_json_logs_with_the_object() {
    let s = Scenario::new("checklogs", "Mailbox", "dependency-ready").await;
    s.put("deps", &[("config", r#"{"available": []}"#)]).await;
    let name = format!("marker-{}", s.namespace);
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        &name,
        json!({"dependsOn": ["redis"]}),
        &[],
    )
    .await;
    let log_path = std::env::temp_dir().join(format!("preflight-{}.log", s.namespace));
    let log_file = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "operator",
            "--namespace",
            &s.namespace,
            "--leader-election=false",
        ])
        .args(["--listen", "127.0.0.1:0"])
        .env("KUBECONFIG", kubeconfig())
        // The check's lines by their target, and the operator's by the name earlier releases used (still read;
        // the crate's targets are the stable ones, not the modules below them).
        .env(
            "RUST_LOG",
            "warn,preflight::check=debug,preflight::operator=debug",
        )
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .expect("the preflight binary starts");
    s.wait(&name, "False", "DependencyMissing").await;
    let marker = format!("{name} is waiting for redis");
    let line = eventually("the check's line in the operator's log", SOON, || async {
        let logs = std::fs::read_to_string(&log_path).ok()?;
        logs.lines()
            .find(|line| line.contains(&marker))
            .map(str::to_owned)
    })
    .await;
    let gated = eventually("the operator's own debug line", SOON, || async {
        let logs = std::fs::read_to_string(&log_path).ok()?;
        logs.lines()
            .find(|line| line.contains(r#""message":"gated""#))
            .map(str::to_owned)
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&log_path);
    let gated: serde_json::Value = serde_json::from_str(&gated).expect("a JSON log line");
    assert!(
        gated["target"]
            .as_str()
            .is_some_and(|target| target.starts_with("preflight_operator")),
        "{gated}"
    );
    let entry: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
    assert_eq!(entry["level"], "DEBUG", "{line}");
    assert_eq!(entry["target"], "preflight::check", "{line}");
    assert_eq!(entry["fields"]["check"], s.check("deps"), "{line}");
    assert_eq!(entry["span"]["object"], name.as_str(), "{line}");
    assert_eq!(entry["span"]["namespace"], s.namespace.as_str(), "{line}");
    assert_eq!(entry["span"]["kind"], s.kind.gates(), "{line}");
    s.remove().await;
}

/// Issue 21, item 11: the README's `preflight pack … | kubectl apply -f -` (client-side apply, which copies
/// each object into an annotation capped at 256 KiB) takes a Python check, several MB, with pack's defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_s_pack_command_applies_a_python_check_with_kubectl() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "packapply").await;
    let python = preflight_test_support::build_python_check("plugins/dependency-ready");
    let command = format!(
        "{preflight} pack {check} --name deps --gates App.apps.example.com --namespace {namespace} \
         | {kubectl} apply -f -",
        preflight = env!("CARGO_BIN_EXE_preflight"),
        check = python.display(),
        kubectl = preflight_kube_harness::kubectl().display(),
    );
    let applied = Command::new("timeout")
        .args(["300", "sh", "-c", &command])
        .env("KUBECONFIG", kubeconfig())
        .output()
        .unwrap();
    assert!(
        applied.status.success(),
        "{command}:\n{}{}",
        String::from_utf8_lossy(&applied.stdout),
        String::from_utf8_lossy(&applied.stderr)
    );
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &namespace);
    let parts = config_maps
        .list(&kube::api::ListParams::default().labels("preflight.dev/part-of=deps"))
        .await
        .unwrap()
        .items;
    let check = config_maps.get("deps").await.unwrap();
    let count: usize = check.data.unwrap()["parts"].parse().unwrap();
    assert!(count > 1, "a Python check comes in parts: {count}");
    assert_eq!(parts.len(), count, "every part was applied");
}
