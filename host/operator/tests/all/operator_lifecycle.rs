//! The operator's life against the real kube-apiserver (tests/cluster): it keeps answering and keeps its Lease
//! while checks spin, gates a kind as soon as its CRD appears, and exposes its metric series from the start.
//! (SIGTERM and the log output of the `preflight operator` process: host/cli/tests/all/operator_process.rs.)

use crate::operator_support::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use preflight_kube_harness::eventually;
use preflight_operator::LeaderElection;
use preflight_test_support::check_bytes;
use serde_json::json;
use std::time::{Duration, Instant};

const TEAM_LABEL: (&str, &str) = ("config", r#"{"labels": ["team"]}"#);

/// The Lease's holder and renew time.
async fn lease(api: &Api<Lease>) -> Option<(String, String)> {
    let spec = api.get("preflight-operator").await.ok()?.spec?;
    let renewed = serde_json::to_string(&spec.renew_time?).ok()?;
    Some((spec.holder_identity?, renewed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_the_lease_hold_while_checks_spin_on_every_slot() {
    let s = Scenario::new("spin", "Job", "misbehave").await;
    s.put(
        "endless",
        &[("config", r#"{"mode": "loop"}"#), ("timeout", "3s")],
    )
    .await;
    for index in 0..12 {
        s.create(&format!("job-{index}"), &[]).await;
    }
    let mut config = operator_config(&s.namespace);
    config.leader_election = Some(LeaderElection {
        namespace: s.namespace.clone(),
        lease_name: "preflight-operator".into(),
        identity: "spinner-host".into(),
        lease_duration: Duration::from_secs(3),
    });
    let operator = start_operator(&s.client, config).await;
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.namespace);
    let (holder, first_renewal) = eventually("the Lease to be held", SOON, || lease(&leases)).await;
    assert_eq!(holder, "spinner-host");
    eventually("a first loop to time out", SOON, || async {
        let timeouts = [("outcome", "timeout")];
        (metric(&operator, "preflight_evaluations_total", &timeouts).await >= 1.0).then_some(())
    })
    .await;

    // 8 loops on a kind (half the engine's 16 slots), each for its whole 3 s budget, over and over.
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(8) {
        let asked = Instant::now();
        assert!(
            http_get(&operator, "/healthz")
                .await
                .starts_with("HTTP/1.0 200")
        );
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        slowest < Duration::from_secs(1),
        "/healthz took {slowest:?} while checks spun"
    );
    let (holder, renewal) = lease(&leases).await.expect("the Lease exists");
    assert_eq!(
        holder, "spinner-host",
        "leadership was not lost to spinning checks"
    );
    assert_ne!(
        renewal, first_renewal,
        "the Lease was renewed while checks spun"
    );
    assert!(
        metric(
            &operator,
            "preflight_evaluations_total",
            &[("outcome", "timeout")]
        )
        .await
            >= 8.0,
        "the loops did run and time out"
    );
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_is_gated_as_soon_as_its_crd_is_established() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "crdwatch").await;
    let gates = format!("Prompt.{namespace}.e2e.preflight.test");
    let meta = check_bytes("required-metadata");
    put_check(&client, &namespace, "meta", &gates, &meta, &[TEAM_LABEL]).await;
    let mut config = operator_config(&namespace);
    // The slow retry cannot be what finds the kind.
    config.kind_retry = Duration::from_secs(600);
    let operator = start_operator(&client, config).await;
    let sample =
        format!("preflight_reconcile_errors_total{{kind=\"{gates}\",cause=\"status-write\"}} 0");
    eventually("zero-valued series for the kind", SOON, || async {
        http_get(&operator, "/metrics")
            .await
            .contains(&sample)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let kind = install_kind(&client, &namespace, "Prompt", true).await;
    let established = Instant::now();
    create_object(&client, &kind, &namespace, "early", json!({}), &[]).await;
    wait_for_condition(
        &client,
        &kind,
        &namespace,
        "early",
        "False",
        "RequiredMetadataMissing",
        Duration::from_secs(20),
    )
    .await;
    let took = established.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "gated {took:?} after its CRD"
    );
    for family in ["preflight_status_writes_total", "preflight_checks_loaded"] {
        let text = http_get(&operator, "/metrics").await;
        assert!(
            text.contains(&format!("{family}{{kind=\"{gates}\"}}")),
            "{family}: {text}"
        );
    }
    operator.stop().await;
    kind.remove(&client).await;
}
