//! Holding built-in controllers for real (issue 23): the real kube-controller-manager (deployment,
//! replicaset and job controllers, started by tests/cluster/up) races the operator, which gates
//! `Deployment.apps` with `spec.paused`, and `Job.batch` and `CronJob.batch` with `spec.suspend`, with hold
//! at admission on. Nothing may be created or rolled out before the check proceeds; what preflight holds is
//! released; a person's own pause survives; the operator writes nothing while nothing changes, and every
//! write names its field manager.
//!
//! The operator runs as its ServiceAccount with `deploy/base/rbac.yaml` and
//! `deploy/examples/hold-built-in-kinds.yaml`. One test: the admission policies are cluster-wide, one per
//! kind, so a second operator gating the same kinds at the same time would install and remove the same
//! policies.

use crate::operator_support::*;
use http::Method;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use preflight_kube_harness::eventually;
use preflight_operator::FIELD_MANAGER;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The field manager of every write this test makes.
const TESTER: &str = "preflight-tests";

fn tester_post() -> PostParams {
    PostParams {
        field_manager: Some(TESTER.into()),
        ..PostParams::default()
    }
}

/// Creations raced against the deployment controller.
const RUNS: usize = 20;
const TEAM_LABEL: (&str, &str) = ("config", r#"{"labels": ["team"]}"#);
const HELD_MARK: &str = "preflight.dev/held-at-admission";

fn deployment(name: &str, labels: Value, paused: Option<bool>) -> Deployment {
    let mut spec = json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "web", "image": "example.com/web:1"}]},
        },
    });
    if let Some(paused) = paused {
        spec["paused"] = json!(paused);
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .unwrap()
}

/// A CronJob without `suspend` (the API server defaults it to false, owned by the creator).
fn cron_job(name: &str) -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "task", "image": "example.com/task:1"}],
        }}}}},
    }))
    .unwrap()
}

fn job(name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "task", "image": "example.com/task:1"}],
        }}},
    }))
    .unwrap()
}

/// Polls `probe` every 10 ms until it answers (for [`SOON`] at most); returns how long that took.
async fn until<F, Fut>(what: &str, mut probe: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let start = Instant::now();
    while probe().await.is_none() {
        assert!(start.elapsed() < SOON, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

/// Creates by POST, as `kubectl create` does, and returns what the API server answered.
async fn post<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&tester_post(), object)
        .await
        .unwrap_or_else(|error| panic!("creating {}: {error}", object.name_any()))
}

/// Creates and deletes probes until the API server holds a create of this kind (`held`): its admission
/// policy is then in force. An object created before that is held only after its creation.
async fn until_creations_are_held<K>(
    api: &Api<K>,
    object: impl Fn(&str) -> K,
    held: impl Fn(&K) -> bool,
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let mut probe = 0;
    let kind = K::kind(&());
    eventually(
        &format!("the admission policy to hold {kind} creations"),
        SOON,
        || {
            probe += 1;
            let name = format!("probe-{probe}");
            let created = object(&name);
            let (api, held) = (api.clone(), &held);
            async move {
                let created = post(&api, &created).await;
                api.delete(&name, &Default::default()).await.unwrap();
                held(&created).then_some(())
            }
        },
    )
    .await;
}

fn is_paused(deployment: &Deployment) -> bool {
    deployment.spec.as_ref().and_then(|spec| spec.paused) == Some(true)
}

fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|spec| spec.suspend) == Some(true)
}

fn is_marked<K: kube::Resource>(object: &K) -> bool {
    object.annotations().contains_key(HELD_MARK)
}

/// The names of the objects `api` lists, but for the probes' (their ReplicaSets and Pods stay: the test
/// control plane runs no garbage collector).
async fn beyond_probes<K>(api: &Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .iter()
        .map(ResourceExt::name_any)
        .filter(|name| !name.starts_with("probe-"))
        .collect()
}

/// The ReplicaSets the deployment controller made for `deployment`.
async fn replica_sets(api: &Api<ReplicaSet>, deployment: &str) -> Vec<ReplicaSet> {
    api.list(&ListParams::default().labels(&format!("app={deployment}")))
        .await
        .unwrap()
        .items
}

async fn label_team<K>(api: &Api<K>, name: &str, team: Option<&str>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams {
            field_manager: Some(TESTER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"metadata": {"labels": {"team": team}}})),
    )
    .await
    .unwrap_or_else(|error| panic!("labelling {name}: {error}"));
}

/// The object's `Preflight` condition says `status`.
async fn wait_preflight(api: &Api<DynamicObject>, name: &str, status: &str) {
    eventually(
        &format!("{name} to be Preflight={status}"),
        SOON,
        || async {
            let object = api.get(name).await.ok()?;
            preflight_operator::condition_of(&object).filter(|condition| condition.status == status)
        },
    )
    .await;
}

/// A client built from `config` that counts the writes it sends (every request but GET: create, update,
/// patch, apply, delete, wherever they go).
fn counting_writes(config: kube::Config) -> (Client, Arc<AtomicU64>) {
    let writes = Arc::new(AtomicU64::new(0));
    let counter = writes.clone();
    let layer =
        tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            if request.method() != http::Method::GET {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            request
        });
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("a client can be built from the configuration")
        .with_layer(&layer)
        .build();
    (client, writes)
}

/// Events the operator reported in `namespace`, counting each series' repeats.
async fn operator_events(client: &Client, namespace: &str) -> i32 {
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), namespace);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|event| event.reporting_controller.as_deref() == Some("preflight"))
        .map(|event| event.series.as_ref().map_or(1, |series| series.count))
        .sum()
}

/// Edits an annotation by PUT, ten times; a PUT that meets a
/// controller's concurrent write is made again on the new version.
async fn edit_annotations<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for edit in 0..10 {
        for attempt in 1.. {
            let mut object = api.get(name).await.unwrap();
            object
                .annotations_mut()
                .insert("example.com/edit".into(), edit.to_string());
            match api.replace(name, &tester_post(), &object).await {
                Ok(_) => break,
                Err(kube::Error::Api(status)) if status.code == 409 && attempt < 10 => {
                    eprintln!("{name}: edit {edit} met a concurrent write; again");
                }
                Err(error) => panic!("editing {name}: {error}"),
            }
        }
    }
}

fn managers<K: kube::Resource>(object: &K) -> Vec<String> {
    object
        .managed_fields()
        .iter()
        .filter_map(|entry| entry.manager.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_controllers_are_held_at_admission_and_released_on_proceed() {
    let client = preflight_kube_harness::admin_client().await;
    let namespace = preflight_kube_harness::test_namespace(&client, "hold").await;
    let meta = preflight_test_support::check_bytes("required-metadata");
    let deployment_pause = ("pause", "field:spec.paused=true");
    let job_pause = ("pause", "field:spec.suspend=true,force");
    put_check(
        &client,
        &namespace,
        "deployments",
        "Deployment.apps",
        &meta,
        &[TEAM_LABEL, deployment_pause],
    )
    .await;
    for (name, gates) in [("jobs", "Job.batch"), ("cronjobs", "CronJob.batch")] {
        put_check(
            &client,
            &namespace,
            name,
            gates,
            &meta,
            &[TEAM_LABEL, job_pause],
        )
        .await;
    }
    // The operator runs as its ServiceAccount with the documented RBAC and nothing more.
    apply_manifests(
        &client,
        &namespace,
        &[
            "deploy/base/rbac.yaml",
            "deploy/base/gated-kinds.yaml",
            "deploy/examples/hold-built-in-kinds.yaml",
        ],
        |text| text,
    )
    .await;
    let (service_account, operator_writes) = counting_writes(
        preflight_kube_harness::service_account_config(&namespace, "preflight-operator").await,
    );
    let mut config = operator_config(&namespace);
    config.hold_at_admission = true;
    let operator = start_operator(&service_account, config).await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let dynamic_deployments: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &kube::api::ApiResource::erase::<Deployment>(&()),
    );
    let dynamic_jobs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &kube::api::ApiResource::erase::<Job>(&()),
    );
    let replica_sets_api: Api<ReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &namespace);
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), &namespace);
    let dynamic_cron_jobs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &kube::api::ApiResource::erase::<CronJob>(&()),
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);

    // The API server loads each kind's admission policy on its own, within a second or so of its creation:
    // every kind this test creates is probed until its creates come back held.
    until_creations_are_held(
        &deployments,
        |name| deployment(name, json!({}), None),
        is_paused,
    )
    .await;
    until_creations_are_held(&jobs, job, is_suspended).await;
    until_creations_are_held(&cron_jobs, cron_job, |cron_job| {
        cron_job.spec.suspend == Some(true)
    })
    .await;

    // 1. Creation race: every create comes back paused and marked; no ReplicaSet, no Pod.
    for run in 0..RUNS {
        let name = format!("web-{run}");
        let created = post(&deployments, &deployment(&name, json!({}), None)).await;
        assert!(
            is_paused(&created) && is_marked(&created),
            "run {run}: the creating request itself pauses and marks: {:?}",
            created.spec
        );
    }
    let created_job = post(&jobs, &job("task")).await;
    assert_eq!(
        created_job.spec.as_ref().and_then(|spec| spec.suspend),
        Some(true),
        "a Job created without suspend is suspended by its creating request"
    );
    for run in 0..RUNS {
        wait_preflight(&dynamic_deployments, &format!("web-{run}"), "False").await;
    }
    wait_preflight(&dynamic_jobs, "task", "False").await;
    let created_cron_job = post(&cron_jobs, &cron_job("nightly")).await;
    assert!(
        created_cron_job.spec.suspend == Some(true) && is_marked(&created_cron_job),
        "a CronJob created without suspend is suspended by its creating request"
    );
    // A CronJob's status has no conditions list: the condition is kept in the annotation.
    wait_preflight(&dynamic_cron_jobs, "nightly", "False").await;
    // The controllers had all this time (and one second more) to act.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let early_sets = beyond_probes(&replica_sets_api).await;
    assert!(
        early_sets.is_empty(),
        "no ReplicaSet before the check proceeds: {early_sets:?}"
    );
    let early_pods = beyond_probes(&pods).await;
    assert!(
        early_pods.is_empty(),
        "no Pod before the check proceeds: {early_pods:?}"
    );
    for run in 0..RUNS {
        let held = deployments.get(&format!("web-{run}")).await.unwrap();
        assert!(
            is_paused(&held) && is_marked(&held),
            "run {run}: the pause admission set stands while the check waits"
        );
    }

    // 2. Approval: each is released within a second of the approving edit, then rolls out.
    let mut slowest = (Duration::ZERO, Duration::ZERO);
    for run in 0..RUNS {
        let name = format!("web-{run}");
        label_team(&deployments, &name, Some("shop")).await;
        let released = until(&format!("{name} to be released"), || async {
            let object = deployments.get(&name).await.ok()?;
            (!is_paused(&object) && !is_marked(&object)).then_some(())
        })
        .await;
        let rolled_out = until(&format!("{name} to roll out"), || async {
            (!replica_sets(&replica_sets_api, &name).await.is_empty()).then_some(())
        })
        .await;
        eprintln!(
            "{name}: released {released:?} after its approval, ReplicaSet {rolled_out:?} after that"
        );
        slowest = (slowest.0.max(released), slowest.1.max(rolled_out));
    }
    eprintln!(
        "slowest of {RUNS}: released {:?}, ReplicaSet {:?} later",
        slowest.0, slowest.1
    );
    assert!(
        slowest.0 + slowest.1 < Duration::from_secs(2) && slowest.0 < Duration::from_secs(1),
        "every Deployment is released within a second of its approval and rolls out: {slowest:?}"
    );
    label_team(&jobs, "task", Some("shop")).await;
    eventually("the Job's Pod", SOON, || async {
        let listed = pods
            .list(&ListParams::default().labels("job-name=task"))
            .await
            .ok()?;
        (!listed.items.is_empty()).then_some(())
    })
    .await;
    let released_job = jobs.get("task").await.unwrap();
    assert_ne!(
        released_job.spec.as_ref().and_then(|spec| spec.suspend),
        Some(true),
        "the Job is resumed"
    );
    label_team(&cron_jobs, "nightly", Some("shop")).await;
    wait_preflight(&dynamic_cron_jobs, "nightly", "True").await;
    eventually("the CronJob to be resumed", SOON, || async {
        let cron_job = cron_jobs.get("nightly").await.ok()?;
        (cron_job.spec.suspend != Some(true) && !is_marked(&cron_job)).then_some(())
    })
    .await;

    // 3. A template change made while the check says wait is held: no new ReplicaSet until approval.
    let changed = deployments
        .patch(
            "web-0",
            &PatchParams {
                field_manager: Some(TESTER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({
                "metadata": {"labels": {"team": null}},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "web", "image": "example.com/web:2"}]}}},
            })),
        )
        .await
        .unwrap();
    assert!(
        is_paused(&changed) && is_marked(&changed),
        "the changing request itself pauses"
    );
    wait_preflight(&dynamic_deployments, "web-0", "False").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        replica_sets(&replica_sets_api, "web-0").await.len(),
        1,
        "no ReplicaSet for the new template while the check waits"
    );
    label_team(&deployments, "web-0", Some("shop")).await;
    eventually("web-0's new template to roll out", SOON, || async {
        (replica_sets(&replica_sets_api, "web-0").await.len() == 2).then_some(())
    })
    .await;

    // 4. Approved from the start: held at creation, released by the operator alone.
    post(
        &deployments,
        &deployment("early", json!({"team": "shop"}), None),
    )
    .await;
    eventually("early to roll out with no human step", SOON, || async {
        (!replica_sets(&replica_sets_api, "early").await.is_empty()).then_some(())
    })
    .await;

    // 5. A person's own pause survives the check's proceed.
    post(
        &deployments,
        &deployment("mine", json!({"team": "shop"}), Some(true)),
    )
    .await;
    wait_preflight(&dynamic_deployments, "mine", "True").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mine = deployments.get("mine").await.unwrap();
    assert!(
        is_paused(&mine) && !is_marked(&mine),
        "a pause preflight did not set stays"
    );
    assert!(replica_sets(&replica_sets_api, "mine").await.is_empty());

    // 6. Steady state: no write by the operator in 60 s, nor across 10 annotation edits on each kind (the
    // CronJob's condition lives in an annotation of its own).
    wait_preflight(&dynamic_deployments, "early", "True").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = (
        operator_writes.load(Ordering::SeqCst),
        operator_events(&client, &namespace).await,
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    edit_annotations(&deployments, "web-1").await;
    edit_annotations(&jobs, "task").await;
    edit_annotations(&cron_jobs, "nightly").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = (
        operator_writes.load(Ordering::SeqCst),
        operator_events(&client, &namespace).await,
    );
    assert_eq!(
        before, after,
        "(requests other than GET the operator sent, its Events in the namespace) in a steady state"
    );

    // 7. Every write of the operator names its field manager.
    let all_deployments = deployments.list(&ListParams::default()).await.unwrap();
    for object in &all_deployments.items {
        let names = managers(object);
        assert!(
            !names.iter().any(|name| name == "unknown"),
            "{}: {names:?}",
            object.name_any()
        );
    }
    let web = deployments.get("web-1").await.unwrap();
    assert!(
        managers(&web).iter().any(|name| name == FIELD_MANAGER),
        "the condition is written as {FIELD_MANAGER}: {:?}",
        managers(&web)
    );
    assert!(
        !managers(&jobs.get("task").await.unwrap())
            .iter()
            .any(|name| name == "unknown")
    );

    // 8. Someone deletes a hold, or changes one, while the operator runs (a GitOps prune, an uninstall
    // begun too early): the operator puts it back, and the next creation is held again.
    let policy = |name: &str| format!("{POLICIES}/{name}");
    let binding = |name: &str| format!("{BINDINGS}/{name}");
    let (deployments_hold, jobs_hold) = (
        "preflight-hold.deployments.apps",
        "preflight-hold.jobs.batch",
    );
    for path in [binding(deployments_hold), policy(deployments_hold)] {
        as_someone_else(&client, Method::DELETE, &path, None)
            .await
            .unwrap();
    }
    let loosened = json!({"spec": {"failurePolicy": "Fail"}});
    as_someone_else(&client, Method::PATCH, &policy(jobs_hold), Some(loosened))
        .await
        .unwrap();
    eventually("the Deployments' hold to be put back", SOON, || async {
        for path in [policy(deployments_hold), binding(deployments_hold)] {
            as_someone_else(&client, Method::GET, &path, None)
                .await
                .ok()?;
        }
        Some(())
    })
    .await;
    until_creations_are_held(
        &deployments,
        |name| deployment(name, json!({}), None),
        is_paused,
    )
    .await;
    eventually("the Jobs' policy to be put back", SOON, || async {
        let answer = as_someone_else(&client, Method::GET, &policy(jobs_hold), None).await;
        (answer.ok()?["spec"]["failurePolicy"] == "Ignore").then_some(())
    })
    .await;
    // Said where the kinds' checks are.
    event_noting(
        &client,
        &namespace,
        "AdmissionHoldRestored",
        &format!("admission policy {deployments_hold} was deleted while the operator ran"),
    )
    .await;
    event_noting(
        &client,
        &namespace,
        "AdmissionHoldRestored",
        &format!("admission policy {jobs_hold} was changed by someone-else"),
    )
    .await;

    // 9. A restart (or a new leader) keeps the holds in place: none is deleted and made again while the
    // new process starts its controllers.
    let uids = || async {
        let mut uids = Vec::new();
        for name in [deployments_hold, jobs_hold, "preflight-hold.cronjobs.batch"] {
            for path in [policy(name), binding(name)] {
                let object = as_someone_else(&client, Method::GET, &path, None).await;
                uids.push(object.unwrap()["metadata"]["uid"].clone());
            }
        }
        uids
    };
    let before_restart = uids().await;
    operator.stop().await;
    let mut config = operator_config(&namespace);
    config.hold_at_admission = true;
    let operator = start_operator(&service_account, config).await;
    post(&deployments, &deployment("after-restart", json!({}), None)).await;
    wait_preflight(&dynamic_deployments, "after-restart", "False").await;
    assert_eq!(
        uids().await,
        before_restart,
        "the same policies and bindings across a restart"
    );

    operator.stop().await;
    // The policies stay while the operator is away (nothing rolls out unchecked); the test removes them.
    for name in [deployments_hold, jobs_hold, "preflight-hold.cronjobs.batch"] {
        for path in [binding(name), policy(name)] {
            as_someone_else(&client, Method::DELETE, &path, None)
                .await
                .unwrap();
        }
    }
}

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings";

/// Sends `method` to `path` as someone other than the operator (a JSON merge patch when there is a `body`)
/// and returns the answer.
async fn as_someone_else(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, kube::Error> {
    let request = http::Request::builder()
        .method(method)
        .uri(format!("{path}?fieldManager=someone-else"))
        .header("Content-Type", "application/merge-patch+json")
        .body(body.map_or_else(Vec::new, |body| body.to_string().into_bytes()))
        .unwrap();
    let answer = client.request_text(request).await?;
    Ok(serde_json::from_str(&answer).unwrap())
}
