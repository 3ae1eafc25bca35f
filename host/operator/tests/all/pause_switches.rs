//! Pause switches on the real kube-apiserver (tests/cluster): the operator pauses a controller that does not
//! embed the gate through the switch that controller already has, by server-side apply, and withdraws only
//! its own ownership. The kinds reproduce Flux's `spec.suspend` and Crossplane's `crossplane.io/paused`
//! annotation; the real controllers are not needed.

use crate::operator_support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use preflight_kube_harness::eventually;
use preflight_operator::PAUSE_FIELD_MANAGER;
use serde_json::json;
use std::time::Duration;

const TEAM_LABEL: (&str, &str) = ("config", r#"{"labels": ["team"]}"#);

/// A kind like Flux's sources: `spec.suspend` (boolean) stops its controller.
async fn flux_like_kind(client: &Client, namespace: &str) -> TestKind {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "suspend": {"type": "boolean"},
            "url": {"type": "string"},
        }},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }});
    install_kind_with_schema(client, namespace, "Repo", true, schema).await
}

/// The switch of [`flux_like_kind`].
const SUSPEND: (&str, &str) = ("pause", "field:spec.suspend=true");

/// A fresh namespace (named after `prefix`) with a [`flux_like_kind`] gated by check ConfigMap `meta`
/// (required-metadata asking for a `team` label, switch [`SUSPEND`]) and object `podinfo` (`spec.url:
/// x`), which lacks the label.
async fn unlabelled_repo(prefix: &str) -> (Client, String, TestKind) {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, prefix).await;
    let kind = flux_like_kind(&client, &namespace).await;
    let meta = preflight_test_support::check_bytes("required-metadata");
    let data = [TEAM_LABEL, SUSPEND];
    put_check(&client, &namespace, "meta", &kind.gates(), &meta, &data).await;
    create_object(
        &client,
        &kind,
        &namespace,
        "podinfo",
        json!({"url": "x"}),
        &[],
    )
    .await;
    (client, namespace, kind)
}

async fn get(api: &Api<DynamicObject>, name: &str) -> DynamicObject {
    api.get(name).await.unwrap()
}

fn managed_by_us(object: &DynamicObject) -> bool {
    object
        .managed_fields()
        .iter()
        .any(|entry| entry.manager.as_deref() == Some(PAUSE_FIELD_MANAGER))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_switch_is_set_while_held_and_withdrawn_on_proceed_keeping_a_human_s() {
    let (client, namespace, kind) = unlabelled_repo("suspend").await;
    // A human suspended this one before preflight ever looked at it.
    create_object(
        &client,
        &kind,
        &namespace,
        "manual",
        json!({"suspend": true}),
        &[],
    )
    .await;
    let operator = start_operator(&client, operator_config(&namespace)).await;
    let api = kind.api(&client, &namespace);

    wait_for_condition(
        &client,
        &kind,
        &namespace,
        "podinfo",
        "False",
        "RequiredMetadataMissing",
        SOON,
    )
    .await;
    let paused = eventually("spec.suspend to be set", SOON, || async {
        let object = get(&api, "podinfo").await;
        (object.data["spec"]["suspend"] == json!(true)).then_some(object)
    })
    .await;
    assert!(managed_by_us(&paused), "owned by preflight's field manager");
    assert_eq!(
        paused.data["spec"]["url"], "x",
        "the rest of the spec is untouched"
    );
    eventually("manual to be co-owned", SOON, || async {
        managed_by_us(&get(&api, "manual").await).then_some(())
    })
    .await;

    // Steady state: no writes.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = (
        get(&api, "podinfo").await.resource_version(),
        get(&api, "manual").await.resource_version(),
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = (
        get(&api, "podinfo").await.resource_version(),
        get(&api, "manual").await.resource_version(),
    );
    assert_eq!(before, after, "no write while nothing changes");

    for name in ["podinfo", "manual"] {
        let label = json!({"metadata": {"labels": {"team": "web"}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(label))
            .await
            .unwrap();
        wait_for_condition(
            &client,
            &kind,
            &namespace,
            name,
            "True",
            "RequiredMetadataPresent",
            SOON,
        )
        .await;
    }
    eventually("spec.suspend to be withdrawn", SOON, || async {
        let object = get(&api, "podinfo").await;
        (object.data["spec"].get("suspend").is_none() && !managed_by_us(&object)).then_some(())
    })
    .await;
    let manual = eventually("preflight to let go of manual", SOON, || async {
        let object = get(&api, "manual").await;
        (!managed_by_us(&object)).then_some(object)
    })
    .await;
    assert_eq!(
        manual.data["spec"]["suspend"],
        json!(true),
        "the human's suspend survives"
    );
    operator.stop().await;
    kind.remove(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotation_switch_cycles_and_another_managers_value_is_left_alone() {
    let s = Scenario::new("paused", "Bucket", "required-metadata").await;
    let annotation = "crossplane.io/paused";
    s.put(
        "meta",
        &[
            TEAM_LABEL,
            ("pause", "annotation:crossplane.io/paused=true"),
        ],
    )
    .await;
    s.create("logs", &[]).await;
    let api = s.kind.api(&s.client, &s.namespace);
    // Another manager says explicitly: not paused.
    let mut held = DynamicObject::new("held", &s.kind.resource).within(&s.namespace);
    held.metadata.annotations = Some([(annotation.to_owned(), "false".to_owned())].into());
    held.data = json!({"spec": {}});
    api.create(&Default::default(), &held).await.unwrap();
    let operator = s.operator().await;

    s.wait("logs", "False", "RequiredMetadataMissing").await;
    eventually("the annotation to be set", SOON, || async {
        let object = get(&api, "logs").await;
        (object.annotations().get(annotation).map(String::as_str) == Some("true")).then_some(())
    })
    .await;
    let refused = event_where(&s.client, &s.namespace, "PauseOwnedElsewhere", |event| {
        regarding(event) == Some("held")
    })
    .await;
    assert!(refused.note.unwrap_or_default().contains(annotation));
    assert_eq!(
        get(&api, "held")
            .await
            .annotations()
            .get(annotation)
            .map(String::as_str),
        Some("false"),
        "another manager's value is left alone"
    );

    s.label("logs", "team", "data").await;
    s.wait("logs", "True", "RequiredMetadataPresent").await;
    eventually("the annotation to be withdrawn", SOON, || async {
        let object = get(&api, "logs").await;
        (!object.annotations().contains_key(annotation)).then_some(())
    })
    .await;
    let steady = get(&api, "logs").await.resource_version();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        get(&api, "logs").await.resource_version(),
        steady,
        "no write in a steady state"
    );
    operator.stop().await;
    s.remove().await;
}

/// `apiserver_request_total` for server-side applies to `group` answered 409 (conflict), read from the
/// API server's own metrics.
async fn conflicting_applies(client: &Client, group: &str) -> f64 {
    apiserver_requests(client, |line| {
        line.contains(r#"code="409""#)
            && line.contains(r#"verb="APPLY""#)
            && line.contains(&format!(r#"group="{group}""#))
    })
    .await
}

/// Issue 21, item 1: a switch another manager holds at another value is reported once, then left alone —
/// no apply and no Event on each requeue — until who holds it changes; then the operator sets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_held_elsewhere_is_reported_once_and_tried_again_only_when_its_holders_change() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "heldpause").await;
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"suspend": {"type": "boolean"}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }});
    let kind = install_kind_with_schema(&client, &namespace, "Source", true, schema).await;
    let conformance = preflight_test_support::check_bytes("conformance");
    put_check(
        &client,
        &namespace,
        "waits",
        &kind.gates(),
        &conformance,
        &[("pause", "field:spec.suspend=true")],
    )
    .await;
    // Its own controller created it with `suspend: false`, by server-side apply: it owns the field.
    let api = kind.api(&client, &namespace);
    let owner = PatchParams::apply("source-controller");
    let object = |spec: serde_json::Value| {
        json!({"apiVersion": kind.resource.api_version, "kind": "Source",
            "metadata": {"name": "held", "namespace": namespace}, "spec": spec})
    };
    api.patch(
        "held",
        &owner,
        &Patch::Apply(object(
            json!({"behave": "requeue", "seconds": 1, "suspend": false}),
        )),
    )
    .await
    .unwrap();
    let operator = start_operator(&client, operator_config(&namespace)).await;
    wait_for_condition(&client, &kind, &namespace, "held", "False", "Waiting", SOON).await;
    let reported = event_where(&client, &namespace, "PauseOwnedElsewhere", |event| {
        regarding(event) == Some("held")
    })
    .await;
    let conflicts = conflicting_applies(&client, &kind.group).await;
    assert!(conflicts >= 1.0, "the first apply conflicted: {conflicts}");

    // Six requeues later: not one more apply, and the Event was not repeated.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        evaluations(&operator, &format!("{namespace}/waits")).await >= 4,
        "the check kept requeueing"
    );
    assert_eq!(
        conflicting_applies(&client, &kind.group).await,
        conflicts,
        "no apply while the switch's holders are the same"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), &namespace);
    let again = events
        .get(&reported.metadata.name.clone().unwrap())
        .await
        .unwrap();
    assert!(again.series.is_none(), "reported once: {:?}", again.series);
    assert_eq!(
        get(&api, "held").await.data["spec"]["suspend"],
        json!(false),
        "left alone"
    );

    // Its controller lets go of the field: the next evaluation sets the switch.
    api.patch(
        "held",
        &owner,
        &Patch::Apply(object(json!({"behave": "requeue", "seconds": 1}))),
    )
    .await
    .unwrap();
    let paused = eventually(
        "the switch to be set once its holder let go",
        SOON,
        || async {
            let object = get(&api, "held").await;
            (object.data["spec"]["suspend"] == json!(true)).then_some(object)
        },
    )
    .await;
    assert!(managed_by_us(&paused));
    operator.stop().await;
    kind.remove(&client).await;
}

/// A check holds an object by its switch; its ConfigMap is then broken (the last good version serves) and
/// the operator restarts, losing that version. The broken check still holds the object (`failurePolicy:
/// Fail`), so the switch its ConfigMap names stays set: withdrawing it would let the object's controller
/// run while its condition says held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_check_keeps_its_objects_paused_across_a_restart() {
    let (client, namespace, kind) = unlabelled_repo("brokenpause").await;
    let operator = start_operator(&client, operator_config(&namespace)).await;
    let api = kind.api(&client, &namespace);
    let suspended = || async {
        (get(&api, "podinfo").await.data["spec"]["suspend"] == json!(true)).then_some(())
    };
    eventually("spec.suspend to be set", SOON, suspended).await;
    operator.stop().await;

    let broken = [TEAM_LABEL, SUSPEND, ("timeout", "forever")];
    let meta = preflight_test_support::check_bytes("required-metadata");
    put_check(&client, &namespace, "meta", &kind.gates(), &meta, &broken).await;
    let operator = start_operator(&client, operator_config(&namespace)).await;
    let held = wait_for_condition(
        &client,
        &kind,
        &namespace,
        "podinfo",
        "False",
        "InvalidCheck",
        SOON,
    )
    .await;
    assert!(
        held.message.contains("timeout `forever`"),
        "{}",
        held.message
    );
    // The pause is synced right after the condition: give a withdrawal every chance to show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let object = get(&api, "podinfo").await;
    assert_eq!(
        object.data["spec"]["suspend"],
        json!(true),
        "the broken check's switch was withdrawn while it holds the object"
    );
    assert!(
        managed_by_us(&object),
        "still owned by preflight's field manager"
    );
    operator.stop().await;
}

/// A kind's last check is deleted while no operator runs (a GitOps prune during an upgrade): the next
/// operator releases the objects the earlier one held, from the record of the kinds it gated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_last_check_went_while_no_operator_ran_is_released_at_start() {
    let (client, namespace, kind) = unlabelled_repo("orphan").await;
    let operator = start_operator(&client, operator_config(&namespace)).await;
    let api = kind.api(&client, &namespace);
    let suspend = || async { get(&api, "podinfo").await.data["spec"]["suspend"].clone() };
    eventually("spec.suspend to be set", SOON, || async {
        (suspend().await == json!(true)).then_some(())
    })
    .await;
    operator.stop().await;

    Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .delete("meta", &DeleteParams::default())
        .await
        .unwrap();
    let operator = start_operator(&client, operator_config(&namespace)).await;
    wait_for_condition(
        &client, &kind, &namespace, "podinfo", "True", "NoChecks", SOON,
    )
    .await;
    eventually("spec.suspend to be withdrawn", SOON, || async {
        suspend().await.is_null().then_some(())
    })
    .await;
    operator.stop().await;
}
