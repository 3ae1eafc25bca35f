//! Rolling a check out safely, on the real kube-apiserver (tests/cluster): a monitored check (`mode:
//! monitor`) is evaluated but holds nothing, its verdicts go to the `PreflightMonitor` condition, Events and
//! metrics; switching the ConfigMap to `enforce` holds, and back to `monitor` releases, live. A `selector`
//! stages a check: objects outside it are not evaluated by it, and a relabelled object moves in or out.

use crate::operator_support::*;
use kube::api::{Api, DynamicObject};
use kube::{Client, ResourceExt};
use preflight_kube_harness::eventually;
use preflight_operator::{Operator, PreflightCondition, monitor_condition_of};
use serde_json::json;
use std::time::Duration;

const TEAM_LABEL: (&str, &str) = ("config", r#"{"labels": ["team"]}"#);
const PAUSE: (&str, &str) = ("pause", "field:spec.suspend=true");

/// A kind whose controller would read `spec.suspend`, like Flux's sources.
async fn suspendable_kind(client: &Client, namespace: &str) -> TestKind {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"suspend": {"type": "boolean"}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }});
    install_kind_with_schema(client, namespace, "Site", true, schema).await
}

/// Waits until every object in `names` says `status` in its `PreflightMonitor` condition (`None`: carries
/// none).
async fn wait_for_monitor(
    api: &Api<DynamicObject>,
    names: &[&str],
    status: Option<&str>,
) -> Vec<Option<PreflightCondition>> {
    eventually(
        &format!("{names:?} to have PreflightMonitor {status:?}"),
        SOON,
        || async {
            let mut conditions = Vec::new();
            for name in names {
                let condition = monitor_condition_of(&api.get(name).await.ok()?);
                if condition.as_ref().map(|c| c.status.as_str()) != status {
                    return None;
                }
                conditions.push(condition);
            }
            Some(conditions)
        },
    )
    .await
}

/// The resourceVersions of `names`, after a second of settling: compared later, they prove that nobody
/// wrote the objects in between.
async fn versions_after_settling(api: &Api<DynamicObject>, names: &[&str]) -> Vec<String> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut versions = Vec::new();
    for name in names {
        versions.push(api.get(name).await.unwrap().resource_version().unwrap());
    }
    versions
}

async fn assert_no_writes_for(api: &Api<DynamicObject>, names: &[&str], mode: &str) {
    let before = versions_after_settling(api, names).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut after = Vec::new();
    for name in names {
        after.push(api.get(name).await.unwrap().resource_version().unwrap());
    }
    assert_eq!(before, after, "no write in a steady state ({mode})");
}

async fn suspended(api: &Api<DynamicObject>, name: &str) -> bool {
    api.get(name).await.unwrap().data["spec"]["suspend"] == json!(true)
}

async fn held(operator: &Operator, kind: &TestKind, mode: &str) -> f64 {
    metric(
        operator,
        "preflight_objects_held",
        &[("kind", &kind.gates()), ("mode", mode)],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitored_check_holds_nothing_until_enforced_and_releases_when_monitored_again() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "monitor").await;
    let kind = suspendable_kind(&client, &namespace).await;
    let meta = preflight_test_support::check_bytes("required-metadata");
    let put = |mode: &'static str| {
        let (client, namespace, gates, meta) = (
            client.clone(),
            namespace.clone(),
            kind.gates(),
            meta.clone(),
        );
        async move {
            put_check(
                &client,
                &namespace,
                "meta",
                &gates,
                &meta,
                &[TEAM_LABEL, PAUSE, ("mode", mode)],
            )
            .await;
        }
    };
    put("monitor").await;
    for name in ["web", "api"] {
        create_object(&client, &kind, &namespace, name, json!({}), &[]).await;
    }
    create_object(
        &client,
        &kind,
        &namespace,
        "owned",
        json!({}),
        &[("team", "shop")],
    )
    .await;
    let operator = start_operator(&client, operator_config(&namespace)).await;
    let api = kind.api(&client, &namespace);
    let all = ["web", "api", "owned"];
    let would_hold = ["web", "api"];

    // Monitor: the verdict is recorded beside the Preflight condition, which stays True; nothing paused.
    let monitored = wait_for_monitor(&api, &would_hold, Some("False")).await;
    for condition in monitored.into_iter().flatten() {
        assert_eq!(condition.reason, "RequiredMetadataMissing");
        assert!(condition.message.contains("missing label(s): team"));
    }
    wait_for_monitor(&api, &["owned"], Some("True")).await;
    for name in all {
        let condition = condition(&client, &kind, &namespace, name).await.unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", "NoChecks"),
            "{name}: a monitored check holds nothing"
        );
        assert!(!suspended(&api, name).await, "{name}: no pause switch");
    }
    let event = event_where(&client, &namespace, "RequiredMetadataMissing", |event| {
        event.action.as_deref() == Some("Monitor")
    })
    .await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.starts_with("monitor mode, not enforced: would hold: meta: missing label(s): team"),
        "{note}"
    );
    assert_eq!(held(&operator, &kind, "monitor").await, 2.0);
    assert_eq!(held(&operator, &kind, "enforce").await, 0.0);
    let check = format!("{namespace}/meta");
    let counted = |mode: &'static str| {
        let (operator, check) = (&operator, check.clone());
        async move {
            metric(
                operator,
                "preflight_evaluations_total",
                &[("check", &check), ("mode", mode)],
            )
            .await
        }
    };
    assert!(counted("monitor").await >= 3.0);
    assert_eq!(counted("enforce").await, 0.0);
    assert_no_writes_for(&api, &all, "monitor").await;

    // Enforce: the same verdicts now hold, and pause; the monitor condition is taken back.
    put("enforce").await;
    for name in would_hold {
        wait_for_condition(
            &client,
            &kind,
            &namespace,
            name,
            "False",
            "RequiredMetadataMissing",
            SOON,
        )
        .await;
        eventually(&format!("{name} to be suspended"), SOON, || async {
            suspended(&api, name).await.then_some(())
        })
        .await;
    }
    wait_for_monitor(&api, &all, None).await;
    assert!(!suspended(&api, "owned").await);
    assert_eq!(held(&operator, &kind, "enforce").await, 2.0);
    assert_eq!(held(&operator, &kind, "monitor").await, 0.0);
    assert_no_writes_for(&api, &all, "enforce").await;

    // Back to monitor: released, the pause withdrawn, the verdict recorded again.
    put("monitor").await;
    wait_for_monitor(&api, &would_hold, Some("False")).await;
    for name in would_hold {
        wait_for_condition(&client, &kind, &namespace, name, "True", "NoChecks", SOON).await;
        eventually(&format!("{name}'s pause to be withdrawn"), SOON, || async {
            (!suspended(&api, name).await).then_some(())
        })
        .await;
    }
    assert_no_writes_for(&api, &all, "monitor again").await;
    operator.stop().await;
    kind.remove(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_check_gates_only_its_stage_and_follows_a_relabelled_object() {
    let s = Scenario::new("stage", "Shop", "required-metadata").await;
    let selector = ("selector", "matchLabels: {env: staging}");
    s.put("meta", &[TEAM_LABEL, selector]).await;
    s.create("prod", &[("env", "production")]).await;
    let operator = s.operator().await;

    // Outside the selector: not evaluated by the check at all.
    s.wait("prod", "True", "NoChecks").await;
    assert_eq!(evaluations(&operator, &s.check("meta")).await, 0);

    s.create("stage", &[("env", "staging")]).await;
    s.wait("stage", "False", "RequiredMetadataMissing").await;
    let after_stage = evaluations(&operator, &s.check("meta")).await;
    assert!(after_stage >= 1);
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.wait("prod", "True", "NoChecks").await;

    // Relabelled into the stage: gated within seconds; out again: released.
    s.label("prod", "env", "staging").await;
    s.wait("prod", "False", "RequiredMetadataMissing").await;
    s.label("prod", "env", "production").await;
    s.wait("prod", "True", "NoChecks").await;
    let api = s.kind.api(&s.client, &s.namespace);
    let prod = api.get("prod").await.unwrap();
    assert!(
        monitor_condition_of(&prod).is_none(),
        "no monitor condition without monitored checks"
    );
    operator.stop().await;
    s.remove().await;
}
