//! End to end against the real kube-apiserver (tests/cluster): the operator, in process, gates custom
//! resources with checks built from source and shipped in ConfigMaps. Each test has its own namespace and
//! kind, so they run side by side.

use crate::operator_support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use preflight_kube_harness::eventually;
use preflight_operator::{LeaderElection, Operator};
use preflight_test_support::check_bytes;
use serde_json::json;
use std::time::{Duration, Instant};

const TEAM_LABEL: (&str, &str) = ("config", r#"{"labels": ["team"]}"#);
const PANIC: (&str, &str) = ("config", r#"{"mode": "panic"}"#);

/// Deletes check ConfigMap `name` of the scenario.
async fn delete_check(scenario: &Scenario, name: &str) {
    Api::<ConfigMap>::namespaced(scenario.client.clone(), &scenario.namespace)
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

async fn writes(operator: &Operator) -> f64 {
    metric(operator, "preflight_status_writes_total", &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_now_retry_after_n_then_proceed_when_the_dependency_appears() {
    let s = Scenario::new("origin", "App", "dependency-ready").await;
    let waiting = r#"{"available": [], "retryAfterSeconds": 4, "jitterPercent": 0}"#;
    s.put("deps", &[("config", waiting)]).await;
    let spec = json!({"dependsOn": ["postgres"]});
    create_object(&s.client, &s.kind, &s.namespace, "shop", spec, &[]).await;
    let operator = s.operator().await;
    let check = s.check("deps");

    let condition = s.wait("shop", "False", "DependencyMissing").await;
    assert!(
        condition.message.contains("postgres"),
        "{}",
        condition.message
    );
    let first = eventually("the first evaluation", SOON, || async {
        (evaluations(&operator, &check).await >= 1).then(Instant::now)
    })
    .await;
    assert_eq!(
        evaluations(&operator, &check).await,
        1,
        "our own status write does not trigger a re-check"
    );
    let second = eventually("the re-check after 4 s", SOON, || async {
        (evaluations(&operator, &check).await >= 2).then(Instant::now)
    })
    .await;
    let waited = second - first;
    assert!(
        waited >= Duration::from_millis(3500) && waited <= Duration::from_secs(7),
        "re-checked after {waited:?}, expected about 4 s"
    );

    let available = r#"{"available": ["postgres"], "retryAfterSeconds": 4, "jitterPercent": 0}"#;
    s.put("deps", &[("config", available)]).await;
    let proceeded = s.wait("shop", "True", "DependenciesAvailable").await;
    assert_eq!(proceeded.observed_generation, Some(1));
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_without_requeue_waits_for_the_object_to_change() {
    let s = Scenario::new("block", "Service", "required-metadata").await;
    s.put("labels", &[TEAM_LABEL]).await;
    s.create("api", &[]).await;
    let operator = s.operator().await;
    let check = s.check("labels");

    let blocked = s.wait("api", "False", "RequiredMetadataMissing").await;
    assert!(blocked.message.contains("team"), "{}", blocked.message);
    // That no write of ours re-triggers it is the triggers' unit test; here, one second end to end.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        evaluations(&operator, &check).await,
        1,
        "no re-check without a change"
    );

    s.label("api", "team", "payments").await;
    s.wait("api", "True", "RequiredMetadataPresent").await;
    assert_eq!(evaluations(&operator, &check).await, 2);
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validation_that_ran_out_of_time_is_tried_again_by_itself() {
    let s = Scenario::new("slowvalid", "Job", "misbehave").await;
    // The check's validation computes until the clock passes this instant, as one starved of CPU on a
    // busy node runs out of time: the first load (within 5 s of the start) times out, the load 5 s after it validates.
    let validates_after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 6;
    let config = format!(r#"{{"mode": "behave", "validates_after": {validates_after}}}"#);
    s.put("slow", &[("config", &config), ("timeout", "1s")])
        .await;
    s.create("nightly", &[]).await;
    let operator = s.operator().await;

    let rejected = event(&s.client, &s.namespace, "CheckRejected").await;
    let note = rejected.note.unwrap_or_default();
    assert!(
        note.contains("the check could not validate its configuration (timeout)"),
        "{note}"
    );
    assert!(
        note.ends_with("loaded again by itself (after 5 s, doubling up to 300 s)"),
        "{note}"
    );
    let check = s.check("slow");
    let labels = [("check", check.as_str()), ("cause", "validation")];
    assert_eq!(
        metric(&operator, "preflight_check_load_failures_total", &labels).await,
        1.0
    );
    // Nobody touched the ConfigMap: the version is loaded again by itself and serves.
    s.wait("nightly", "True", "Behaved").await;
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_backs_off_more_and_more_and_the_backoff_resets_after_success() {
    let s = Scenario::new("backoff", "Job", "misbehave").await;
    s.put("flaky", &[PANIC]).await;
    s.create("nightly", &[]).await;
    let operator = s.operator().await;
    let check = s.check("flaky");

    let trapped = s.wait("nightly", "False", "CheckTrapped").await;
    assert!(
        trapped.message.contains("the dependency table is corrupt"),
        "{}",
        trapped.message
    );
    // 5 ms · 2ⁿ: about ten attempts in the first 2.5 s, then one every few seconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let early = evaluations(&operator, &check).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = evaluations(&operator, &check).await - early;
    assert!(early >= 6, "{early} attempts in the first 3 s");
    assert!(
        later <= 2,
        "{later} attempts in the next 3 s: the backoff grows"
    );

    s.put("flaky", &[("config", r#"{"mode": "behave"}"#)]).await;
    s.wait("nightly", "True", "Behaved").await;
    let before = evaluations(&operator, &check).await;
    s.put("flaky", &[PANIC]).await;
    s.wait("nightly", "False", "CheckTrapped").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after_reset = evaluations(&operator, &check).await - before;
    assert!(
        after_reset >= 6,
        "{after_reset} attempts in the 3 s after the reset: the backoff restarted from 5 ms"
    );
    let trapped_event = event(&s.client, &s.namespace, "CheckTrapped").await;
    assert_eq!(trapped_event.type_.as_deref(), Some("Warning"));
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_reload_rechecks_every_object_keeps_the_last_good_version_and_delete_releases() {
    let s = Scenario::new("reload", "Queue", "required-metadata").await;
    s.put("meta", &[TEAM_LABEL]).await;
    for name in ["a", "b", "c"] {
        s.create(name, &[("team", "x")]).await;
    }
    let operator = s.operator().await;
    for name in ["a", "b", "c"] {
        s.wait(name, "True", "RequiredMetadataPresent").await;
    }

    // A new version (a stricter configuration) re-checks every object, without restart.
    let stricter = [("config", r#"{"labels": ["team", "tier"]}"#)];
    s.put("meta", &stricter).await;
    for name in ["a", "b", "c"] {
        let blocked = s.wait(name, "False", "RequiredMetadataMissing").await;
        assert!(blocked.message.contains("tier"), "{}", blocked.message);
    }

    // A broken version is reported on its ConfigMap and the last good one keeps serving.
    put_check(
        &s.client,
        &s.namespace,
        "meta",
        &s.kind.gates(),
        b"not a component",
        &stricter,
    )
    .await;
    let rejected = event(&s.client, &s.namespace, "CheckRejected").await;
    let regarding = rejected.regarding.as_ref().and_then(|r| r.name.as_deref());
    assert_eq!(regarding, Some("meta"));
    let note = rejected.note.unwrap_or_default();
    assert!(note.contains("invalid check component"), "{note}");
    assert!(note.contains("last good version keeps serving"), "{note}");
    let described = reasons_described_on_config_map(&s.client, &s.namespace, "meta").await;
    assert!(
        described.iter().any(|reason| reason == "CheckRejected"),
        "kubectl describe configmap shows {described:?}"
    );
    assert!(
        metric(
            &operator,
            "preflight_check_load_failures_total",
            &[("cause", "encoding")]
        )
        .await
            >= 1.0
    );
    s.label("a", "tier", "web").await;
    s.wait("a", "True", "RequiredMetadataPresent").await;

    // Changes in quick succession: the newest version wins, whatever order their compiles finish in.
    for labels in ["absent", "also-absent", "team"] {
        s.put(
            "meta",
            &[("config", &format!(r#"{{"labels": ["{labels}"]}}"#))],
        )
        .await;
    }
    for name in ["b", "c"] {
        s.wait(name, "True", "RequiredMetadataPresent").await;
    }

    // Deleting the check removes the gate: objects are told so.
    delete_check(&s, "meta").await;
    for name in ["a", "b", "c"] {
        s.wait(name, "True", "NoChecks").await;
    }
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_policy_fail_blocks_and_ignore_lets_through_a_trapping_check() {
    let s = Scenario::new("policy", "Topic", "misbehave").await;
    s.put("crash", &[PANIC, ("failurePolicy", "Ignore")]).await;
    s.create("orders", &[]).await;
    let operator = s.operator().await;

    let ignored = s.wait("orders", "True", "CheckFailureIgnored").await;
    assert!(
        ignored.message.contains("failurePolicy is Ignore"),
        "{}",
        ignored.message
    );
    s.put("crash", &[PANIC, ("failurePolicy", "Fail")]).await;
    s.wait("orders", "False", "CheckTrapped").await;

    // With no usable version at all, Fail holds the object and says why.
    put_check(
        &s.client,
        &s.namespace,
        "broken",
        &s.kind.gates(),
        b"\0asm garbage",
        &[],
    )
    .await;
    delete_check(&s, "crash").await;
    let unusable = s.wait("orders", "False", "InvalidCheck").await;
    assert!(
        unusable
            .message
            .starts_with("broken: no usable version of the check"),
        "{}",
        unusable.message
    );
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_check_on_one_kind_does_not_hold_up_another_kind() {
    let s = Scenario::new("hostile", "Batch", "misbehave").await;
    let calm = install_kind(&s.client, &s.namespace, "Site", true).await;
    s.put(
        "endless",
        &[("config", r#"{"mode": "loop"}"#), ("timeout", "2s")],
    )
    .await;
    let meta = check_bytes("required-metadata");
    put_check(
        &s.client,
        &s.namespace,
        "meta",
        &calm.gates(),
        &meta,
        &[TEAM_LABEL],
    )
    .await;
    for index in 0..8 {
        s.create(&format!("batch-{index}"), &[]).await;
    }
    let operator = s.operator().await;
    s.wait("batch-0", "False", "CheckTimeout").await;

    let started = Instant::now();
    for index in 0..5 {
        let name = format!("site-{index}");
        create_object(
            &s.client,
            &calm,
            &s.namespace,
            &name,
            json!({}),
            &[("team", "web")],
        )
        .await;
    }
    for index in 0..5 {
        let name = format!("site-{index}");
        wait_for_condition(
            &s.client,
            &calm,
            &s.namespace,
            &name,
            "True",
            "RequiredMetadataPresent",
            SOON,
        )
        .await;
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(5),
        "the calm kind took {elapsed:?} beside endless loops"
    );
    operator.stop().await;
    calm.remove(&s.client).await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_writers_conditions_survive_and_a_steady_state_makes_no_writes() {
    let s = Scenario::new("steady", "Cache", "required-metadata").await;
    let plain = install_kind(&s.client, &s.namespace, "Note", false).await;
    s.put("meta", &[TEAM_LABEL]).await;
    put_check(
        &s.client,
        &s.namespace,
        "note-meta",
        &plain.gates(),
        &s.wasm,
        &[TEAM_LABEL],
    )
    .await;
    s.create("redis", &[]).await;
    create_object(&s.client, &plain, &s.namespace, "memo", json!({}), &[]).await;
    let api = s.kind.api(&s.client, &s.namespace);
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Running",
        "message": "written by another controller", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    api.patch_status("redis", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    let operator = s.operator().await;

    s.wait("redis", "False", "RequiredMetadataMissing").await;
    wait_for_condition(
        &s.client,
        &plain,
        &s.namespace,
        "memo",
        "False",
        "RequiredMetadataMissing",
        SOON,
    )
    .await;
    let conditions =
        |object: &kube::api::DynamicObject| object.data["status"]["conditions"].clone();
    let object = api.get("redis").await.unwrap();
    assert_eq!(
        conditions(&object)[0],
        ready["status"]["conditions"][0],
        "the other writer's condition is intact"
    );

    // The other controller rewrites its condition; ours stays; nothing is lost either way.
    let mut both = conditions(&object);
    both[0]["status"] = json!("False");
    let update = json!({"status": {"conditions": both}});
    api.patch_status("redis", &PatchParams::default(), &Patch::Merge(update))
        .await
        .unwrap();
    s.label("redis", "team", "cache").await;
    let released = s.wait("redis", "True", "RequiredMetadataPresent").await;
    let object = api.get("redis").await.unwrap();
    assert_eq!(conditions(&object).as_array().unwrap().len(), 2);
    assert_eq!(
        conditions(&object)[0]["status"],
        "False",
        "the other writer's update is intact"
    );
    assert_eq!(released.observed_generation, object.metadata.generation);

    // Steady state: nothing changes, nothing is written (which events trigger: the triggers' unit tests).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let memo = plain.api(&s.client, &s.namespace);
    let versions = async || {
        let redis = api.get("redis").await.unwrap().resource_version();
        (redis, memo.get("memo").await.unwrap().resource_version())
    };
    let (before, writes_before) = (versions().await, writes(&operator).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(versions().await, before, "no write in a steady state");
    assert_eq!(writes(&operator).await, writes_before);
    operator.stop().await;
    plain.remove(&s.client).await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_serves_health_readiness_and_metrics() {
    let s = Scenario::new("http", "Page", "required-metadata").await;
    let operator = s.operator().await;
    assert!(
        http_get(&operator, "/healthz")
            .await
            .starts_with("HTTP/1.0 200")
    );
    eventually("readiness after the checks are listed", SOON, || async {
        http_get(&operator, "/readyz")
            .await
            .starts_with("HTTP/1.0 200")
            .then_some(())
    })
    .await;
    s.put("meta", &[TEAM_LABEL]).await;
    let sample = format!("preflight_checks_loaded{{kind=\"{}\"}} 1", s.kind.gates());
    let loaded = eventually("the check to be counted as loaded", SOON, || async {
        let text = http_get(&operator, "/metrics").await;
        text.contains(&sample).then_some(text)
    })
    .await;
    assert!(loaded.contains("application/openmetrics-text"), "{loaded}");
    assert!(loaded.trim_end().ends_with("# EOF"), "{loaded}");
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_crd_is_missing_is_reported_and_picked_up_when_it_appears() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "late").await;
    let gates = format!("Late.{namespace}.e2e.preflight.test");
    let meta = check_bytes("required-metadata");
    put_check(&client, &namespace, "meta", &gates, &meta, &[TEAM_LABEL]).await;
    let operator = start_operator(&client, operator_config(&namespace)).await;
    let not_served = event(&client, &namespace, "KindNotServed").await;
    assert!(
        not_served
            .note
            .unwrap_or_default()
            .contains("CustomResourceDefinition")
    );
    let described = reasons_described_on_config_map(&client, &namespace, "meta").await;
    assert_eq!(
        described,
        ["KindNotServed"],
        "kubectl describe configmap meta"
    );

    let kind = install_kind(&client, &namespace, "Late", true).await;
    assert_eq!(kind.gates(), gates);
    create_object(&client, &kind, &namespace, "tardy", json!({}), &[]).await;
    wait_for_condition(
        &client,
        &kind,
        &namespace,
        "tardy",
        "False",
        "RequiredMetadataMissing",
        SOON,
    )
    .await;
    operator.stop().await;
    kind.remove(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_crd_is_deleted_is_reported_and_gated_again_at_once_when_it_is_created_again()
{
    let mut s = Scenario::new("recreated", "Recreated", "required-metadata").await;
    s.put("meta", &[TEAM_LABEL]).await;
    // A check of a kind of the same group that is not served: changes in the group wake its lookups too.
    let sibling = format!("Missing.{}", s.kind.group);
    put_check(
        &s.client,
        &s.namespace,
        "sibling",
        &sibling,
        &s.wasm,
        &[TEAM_LABEL],
    )
    .await;
    s.create("first", &[]).await;
    let operator = s.operator().await;
    s.wait("first", "False", "RequiredMetadataMissing").await;

    s.kind.remove(&s.client).await;
    let deleted = event_noting(&s.client, &s.namespace, "KindNotServed", "was deleted").await;
    assert_eq!(
        regarding(&deleted),
        Some("meta"),
        "on the check's ConfigMap"
    );
    // Long enough for the kind's own watch to back off from the API server's 404s (its backoff doubles
    // from 0.8 s): after this, that watch alone took 18-61 s to see the kind again.
    tokio::time::sleep(Duration::from_secs(10)).await;

    s.kind = install_kind(&s.client, &s.namespace, "Recreated", true).await;
    s.create("second", &[]).await;
    s.patience = Duration::from_secs(8);
    s.wait("second", "False", "RequiredMetadataMissing").await;
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_the_other_replica_takes_over() {
    let s = Scenario::new("leader", "Shard", "required-metadata").await;
    s.put("meta", &[TEAM_LABEL]).await;
    let replica = |identity: &str| {
        let mut config = operator_config(&s.namespace);
        config.leader_election = Some(LeaderElection {
            namespace: s.namespace.clone(),
            lease_name: "preflight-operator".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(3),
        });
        config
    };
    let first = start_operator(&s.client, replica("first")).await;
    let second = start_operator(&s.client, replica("second")).await;
    s.create("s0", &[]).await;
    s.wait("s0", "False", "RequiredMetadataMissing").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (first_writes, second_writes) = (writes(&first).await, writes(&second).await);
    assert_eq!(
        first_writes + second_writes,
        1.0,
        "exactly one replica wrote, once"
    );
    let (leader, standby) = if first_writes == 1.0 {
        (first, second)
    } else {
        (second, first)
    };

    leader.stop().await;
    s.create("s1", &[("team", "db")]).await;
    s.wait("s1", "True", "RequiredMetadataPresent").await;
    assert!(writes(&standby).await >= 1.0, "the standby took over");
    standby.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_works_with_the_deployed_service_account_and_nothing_more() {
    let s = Scenario::new("rbac", "Bucket", "required-metadata").await;
    apply_deploy_rbac(&s.client, &s.namespace, &s.kind).await;
    s.put("meta", &[TEAM_LABEL]).await;
    s.create("logs", &[]).await;

    let service_account =
        preflight_kube_harness::client_as_service_account(&s.namespace, "preflight-operator").await;
    let mut config = operator_config(&s.namespace);
    config.leader_election = Some(LeaderElection {
        namespace: s.namespace.clone(),
        lease_name: "preflight-operator".into(),
        identity: "rbac".into(),
        lease_duration: Duration::from_secs(5),
    });
    let operator = start_operator(&service_account, config).await;
    s.wait("logs", "False", "RequiredMetadataMissing").await;
    let secrets = Api::<Secret>::namespaced(service_account.clone(), &s.namespace);
    let refused = secrets.list(&ListParams::default()).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(status)) if status.code == 403),
        "the operator may not read Secrets: {refused:?}"
    );
    assert_eq!(
        metric(&operator, "preflight_reconcile_errors_total", &[]).await,
        0.0
    );
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_the_operators_rbac_cannot_serve_names_the_verb_and_resource_to_grant() {
    let s = Scenario::new("rbaclookup", "Ledger", "misbehave").await;
    apply_deploy_rbac(&s.client, &s.namespace, &s.kind).await;
    let lookup = json!({"mode": "lookup", "lookup": ["v1", "Pod", "", "web"]}).to_string();
    s.put(
        "reach",
        &[("config", &lookup), ("lookups", "kinds: [v1/Pod]")],
    )
    .await;
    s.create("l1", &[]).await;
    let service_account =
        preflight_kube_harness::client_as_service_account(&s.namespace, "preflight-operator").await;
    let started = Instant::now();
    let operator = start_operator(&service_account, operator_config(&s.namespace)).await;
    let condition = s.wait("l1", "False", "LookupFailed").await;
    assert!(
        condition.message.contains(&format!(
            "the operator may not list and watch pods in namespace {} (RBAC)",
            s.namespace
        )) && condition.message.contains("get, list and watch"),
        "{}",
        condition.message
    );
    assert!(started.elapsed() < SOON, "reported, not hung");
    operator.stop().await;
    s.remove().await;
}

/// Applies `deploy/base/rbac.yaml` (and the record it may patch) into `namespace`, plus the ClusterRole a user adds to grant one gated kind
/// (`deploy/examples/grant-kind.yaml`), rewritten for the test's kind.
async fn apply_deploy_rbac(client: &Client, namespace: &str, kind: &TestKind) {
    let plural = &kind.resource.plural;
    let for_kind = |text: String| {
        text.replace("apps.example.com", &kind.group)
            .replace(r#"["apps"]"#, &format!(r#"["{plural}"]"#))
            .replace(r#"["apps/status"]"#, &format!(r#"["{plural}/status"]"#))
    };
    apply_manifests(
        client,
        namespace,
        &[
            "deploy/base/rbac.yaml",
            "deploy/base/gated-kinds.yaml",
            "deploy/examples/grant-kind.yaml",
        ],
        for_kind,
    )
    .await;
}

/// Every manifest of `deploy/` passes the API server's validation (a server-side dry run: nothing is created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_manifests_pass_server_side_validation() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "deploy").await;
    let root = preflight_test_support::workspace_root();
    let params = PatchParams::apply("preflight-tests").force().dry_run();
    let files = [
        "deploy/base/namespace.yaml",
        "deploy/base/rbac.yaml",
        "deploy/base/gated-kinds.yaml",
        "deploy/base/deployment.yaml",
        "deploy/base/disruption-budget.yaml",
        "deploy/examples/crd.yaml",
        "deploy/examples/grant-kind.yaml",
        "deploy/examples/grant-secret.yaml",
        "deploy/examples/hold-built-in-kinds.yaml",
        "deploy/examples/check-from-registry.yaml",
        "deploy/examples/signed-check.yaml",
    ];
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let text = text.replace(
            "namespace: preflight-system",
            &format!("namespace: {namespace}"),
        );
        for document in serde_norway::Deserializer::from_str(&text) {
            let document: serde_json::Value = serde::Deserialize::deserialize(document).unwrap();
            apply_with(&client, document, &params).await;
        }
    }
}

/// `kubectl kustomize DIR` (a directory under `deploy/`), with its namespace renamed to `namespace`, as
/// documents.
fn render(dir: &str, namespace: &str) -> Vec<serde_json::Value> {
    let root = preflight_test_support::workspace_root();
    let output = std::process::Command::new("timeout")
        .arg("60")
        .arg(preflight_kube_harness::kubectl())
        .arg("kustomize")
        .arg(root.join(dir))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout)
        .unwrap()
        .replace(
            "namespace: preflight-system",
            &format!("namespace: {namespace}"),
        )
        .replace("name: preflight-system", &format!("name: {namespace}"));
    serde_norway::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).unwrap())
        .collect()
}

/// For each Deployment among `documents`, its name and how many PodDisruptionBudgets select its pods: a
/// node drain needs exactly one (the eviction API refuses a pod that two select).
fn budgets_per_deployment(documents: &[serde_json::Value]) -> Vec<(String, usize)> {
    let selects = |budget: &serde_json::Value, labels: &serde_json::Value| {
        budget["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap()
            .iter()
            .all(|(key, value)| labels[key] == *value)
    };
    let budgets: Vec<&serde_json::Value> = documents
        .iter()
        .filter(|document| document["kind"] == "PodDisruptionBudget")
        .collect();
    documents
        .iter()
        .filter(|document| document["kind"] == "Deployment")
        .map(|deployment| {
            let labels = &deployment["spec"]["template"]["metadata"]["labels"];
            let name = deployment["metadata"]["name"].as_str().unwrap().to_owned();
            let count = budgets
                .iter()
                .filter(|budget| selects(budget, labels))
                .count();
            (name, count)
        })
        .collect()
}

/// The value of environment variable `name` in a Deployment's first container (set at most once).
fn env_of(deployment: &serde_json::Value, name: &str) -> serde_json::Value {
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
    let mut values = env
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["name"] == name);
    let value = values.next().map(|entry| entry["value"].clone());
    assert!(values.next().is_none(), "{name} is set once");
    value.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kustomizations_render_with_one_disruption_budget_per_pod_and_pass_server_side_validation()
 {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "shards").await;
    let params = PatchParams::apply("preflight-tests").force().dry_run();
    assert_eq!(
        budgets_per_deployment(&render("deploy/base", &namespace)),
        [("preflight-operator".to_owned(), 1)]
    );
    let shard_documents = render("deploy/shards", &namespace);
    assert_eq!(
        budgets_per_deployment(&shard_documents),
        [
            ("preflight-operator".to_owned(), 1),
            ("preflight-operator-shard-b".to_owned(), 1)
        ],
        "each shard's pods have one disruption budget"
    );
    let mut shards = Vec::new();
    for document in shard_documents {
        if document["kind"] == "Deployment" {
            let account = &document["spec"]["template"]["spec"]["serviceAccountName"];
            assert_eq!(
                account, "preflight-operator",
                "both shards run as the one account"
            );
            shards.push((
                env_of(&document, "PREFLIGHT_WATCH_SELECTOR"),
                env_of(&document, "PREFLIGHT_LEASE_NAME"),
            ));
        }
        apply_with(&client, document, &params).await;
    }
    assert_eq!(
        shards,
        [
            (
                json!("preflight.dev/shard=a"),
                json!("preflight-operator-shard-a")
            ),
            (
                json!("preflight.dev/shard!=a"),
                json!("preflight-operator-shard-b")
            ),
        ],
        "shard a takes its label, shard b every other object; each holds its own Lease"
    );
    let ring_documents = render("deploy/ring", &namespace);
    assert_eq!(
        budgets_per_deployment(&ring_documents),
        [("preflight-operator".to_owned(), 1)]
    );
    let mut rings = Vec::new();
    for document in ring_documents {
        if document["kind"] == "Deployment" {
            rings.push((
                env_of(&document, "PREFLIGHT_SHARD_RING"),
                document["spec"]["replicas"].clone(),
            ));
        }
        apply_with(&client, document, &params).await;
    }
    assert_eq!(rings, [(json!("preflight"), json!(3))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_mode_gates_inside_your_own_reconcile() {
    use kube::runtime::controller::Action as ControllerAction;
    use preflight_operator::{
        CheckSet, CheckSource, Gate, GatedKind, LoadedCheck, controller_action,
    };
    use std::sync::Arc;

    let s = Scenario::new("library", "Database", "dependency-ready").await;
    let engine =
        Arc::new(
            preflight_operator::engine::Engine::new(
                preflight_operator::engine::EngineConfig::default(),
            )
            .unwrap(),
        );
    let kind = GatedKind::parse(&s.kind.gates()).unwrap();
    let mut source = CheckSource::new("local/deps", kind.clone(), s.wasm.clone());
    source.settings.config =
        r#"{"available": ["postgres-main"], "retryAfterSeconds": 60, "jitterPercent": 0}"#.into();
    let checks = Arc::new(CheckSet::new());
    checks.install(LoadedCheck::load(&engine, source).unwrap());
    let gate = Gate::new(engine, checks);

    let ready = create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "ready",
        json!({"dependsOn": ["postgres-main"]}),
        &[],
    )
    .await;
    let waiting = create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "waiting",
        json!({"dependsOn": ["redis"]}),
        &[],
    )
    .await;
    let gated = gate
        .evaluate(&kind, serde_json::to_value(&ready).unwrap())
        .await;
    assert!(gated.proceed(), "{:?}", gated.summary);
    assert_eq!(
        controller_action(gated.decision.action),
        ControllerAction::await_change()
    );
    let gated = gate
        .evaluate(&kind, serde_json::to_value(&waiting).unwrap())
        .await;
    assert!(!gated.proceed());
    assert_eq!(gated.summary.reason, "DependencyMissing");
    assert_eq!(
        controller_action(gated.decision.action),
        ControllerAction::requeue(Duration::from_secs(60))
    );
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_a_checks_versions_resolves_its_kind_again() {
    let s = Scenario::new("versions", "Lake", "required-metadata").await;
    s.put("meta", &[TEAM_LABEL, ("versions", "v1")]).await;
    s.create("tahoe", &[]).await;
    let operator = s.operator().await;
    s.wait("tahoe", "False", "RequiredMetadataMissing").await;

    s.put("meta", &[TEAM_LABEL, ("versions", "v2")]).await;
    let not_served = event(&s.client, &s.namespace, "KindNotServed").await;
    assert!(
        not_served
            .note
            .unwrap_or_default()
            .contains("in versions v2"),
        "the kind is resolved again with the new versions"
    );
    operator.stop().await;
    s.remove().await;
}

/// Events in `namespace` about object `name` with `reason`.
async fn events_about(
    client: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Vec<KubeEvent> {
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), namespace);
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|event| event.reason.as_deref() == Some(reason))
        .filter(|event| regarding(event) == Some(name))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_another_manager_removes_is_restored_at_once_and_our_writes_trigger_nothing() {
    let s = Scenario::new("restore", "Volume", "required-metadata").await;
    s.put("meta", &[TEAM_LABEL]).await;
    s.create("v0", &[]).await;
    let operator = s.operator().await;
    s.wait("v0", "False", "RequiredMetadataMissing").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = evaluations(&operator, &s.check("meta")).await;

    // Another manager replaces the (atomic) conditions list with its own, without ours.
    let api = s.kind.api(&s.client, &s.namespace);
    let theirs = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Running",
        "message": "replaced by another manager", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    api.patch_status("v0", &PatchParams::default(), &Patch::Merge(&theirs))
        .await
        .unwrap();
    s.wait("v0", "False", "RequiredMetadataMissing").await;
    let object = api.get("v0").await.unwrap();
    assert_eq!(
        object.data["status"]["conditions"][0], theirs["status"]["conditions"][0],
        "their condition is kept beside ours"
    );
    let restored = evaluations(&operator, &s.check("meta")).await;
    assert_eq!(restored, settled + 1, "one re-check restored it");

    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        evaluations(&operator, &s.check("meta")).await,
        restored,
        "the restoring write did not trigger another re-check"
    );
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_distinct_note_is_its_own_event() {
    let s = Scenario::new("notes", "Service", "dependency-ready").await;
    s.put("deps", &[("config", r#"{"available": []}"#)]).await;
    let spec = |dependency: &str| json!({"dependsOn": [dependency]});
    create_object(&s.client, &s.kind, &s.namespace, "web", spec("redis"), &[]).await;
    let operator = s.operator().await;
    let first = s.wait("web", "False", "DependencyMissing").await;
    assert!(first.message.contains("redis"), "{first:?}");

    // Later news with the same reason: waiting for another dependency.
    s.kind
        .api(&s.client, &s.namespace)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec("postgres")})),
        )
        .await
        .unwrap();
    let notes = eventually("an Event for each dependency", SOON, || async {
        let events = events_about(&s.client, &s.namespace, "web", "DependencyMissing").await;
        let notes: Vec<String> = events.into_iter().filter_map(|event| event.note).collect();
        (notes.len() == 2).then_some(notes)
    })
    .await;
    assert!(notes.iter().any(|note| note.contains("redis")), "{notes:?}");
    assert!(
        notes.iter().any(|note| note.contains("postgres")),
        "{notes:?}"
    );

    // A check ConfigMap's second problem is shown too, not folded into the first one's Event.
    s.put("broken", &[("timout", "1s")]).await;
    event(&s.client, &s.namespace, "CheckRejected").await;
    s.put("broken", &[("timeout", "forever")]).await;
    let problems = eventually("an Event for each problem", SOON, || async {
        let events = events_about(&s.client, &s.namespace, "broken", "CheckRejected").await;
        let notes: Vec<String> = events.into_iter().filter_map(|event| event.note).collect();
        (notes.len() == 2).then_some(notes)
    })
    .await;
    assert!(
        problems.iter().any(|note| note.contains("timout")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|note| note.contains("forever")),
        "{problems:?}"
    );
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transition_is_announced_before_its_condition_is_written() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "eventfirst").await;
    // A kind whose status refuses any condition: every status write fails (as if the process died
    // between the Event and the write), so only an Event published first can exist.
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "properties": {
            "conditions": {"type": "array", "maxItems": 0, "items": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        }}
    }});
    let kind = install_kind_with_schema(&client, &namespace, "Gauge", true, schema).await;
    let meta = check_bytes("required-metadata");
    put_check(
        &client,
        &namespace,
        "meta",
        &kind.gates(),
        &meta,
        &[TEAM_LABEL],
    )
    .await;
    create_object(&client, &kind, &namespace, "g0", json!({}), &[]).await;
    let operator = start_operator(&client, operator_config(&namespace)).await;

    let announced = event(&client, &namespace, "RequiredMetadataMissing").await;
    assert_eq!(
        announced.regarding.and_then(|r| r.name).as_deref(),
        Some("g0")
    );
    eventually("the refused write to be counted", SOON, || async {
        let cause = [("cause", "status-write")];
        (metric(&operator, "preflight_reconcile_errors_total", &cause).await >= 1.0).then_some(())
    })
    .await;
    assert!(condition(&client, &kind, &namespace, "g0").await.is_none());
    tokio::time::sleep(Duration::from_secs(6)).await;
    let events = events_about(&client, &namespace, "g0", "RequiredMetadataMissing").await;
    assert_eq!(
        events.len(),
        1,
        "a retried transition is counted, not repeated: {events:?}"
    );
    operator.stop().await;
    kind.remove(&client).await;
}

/// The `calls` output of object `name` (the conformance check's count of evaluations its instance served).
async fn calls(s: &Scenario, name: &str) -> Option<String> {
    let object = s.kind.api(&s.client, &s.namespace).get(name).await.ok()?;
    let outputs: serde_json::Value = serde_json::from_str(
        object
            .annotations()
            .get(preflight_operator::OUTPUTS_ANNOTATION)?,
    )
    .ok()?;
    outputs["calls"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_reuse_in_the_config_map_shares_an_instance_between_objects_of_a_namespace() {
    let s = Scenario::new("reuse", "Probe", "conformance").await;
    s.put("count", &[("isolation", "reuse"), ("maxUses", "50")])
        .await;
    let operator = s.operator().await;
    // One object after the other, so that each evaluation finds the instance the previous one left idle.
    let mut served = Vec::new();
    for name in ["p0", "p1", "p2"] {
        create_object(
            &s.client,
            &s.kind,
            &s.namespace,
            name,
            json!({"behave": "count"}),
            &[],
        )
        .await;
        s.wait(name, "True", "Counted").await;
        served.push(
            eventually("the calls output", SOON, || calls(&s, name))
                .await
                .parse::<u32>()
                .unwrap(),
        );
    }
    assert!(
        served.windows(2).all(|pair| pair[1] > pair[0]),
        "each object's evaluation was served by the instance of the one before: {served:?}"
    );

    // Back to a fresh instance per evaluation: a new version of the check re-evaluates every object.
    s.put("count", &[("isolation", "fresh")]).await;
    for name in ["p0", "p1", "p2"] {
        eventually("calls back to 1", SOON, || async {
            (calls(&s, name).await.as_deref() == Some("1")).then_some(())
        })
        .await;
    }
    operator.stop().await;
    s.remove().await;
}
