//! One kube-rs controller per gated kind, started when the kind's first check appears and stopped when its
//! last check goes; each reconcile is the gate. Kinds are resolved through discovery; a kind the server does
//! not serve yet (its CRD is missing) is reported and retried until it appears, and a kind whose CRD is
//! deleted is reported and watched afresh as soon as it is created again. The reconcile itself is in
//! [`crate::reconcile`], what starts one in [`crate::triggers`].

use crate::admission_hold::{AdmissionHolds, group_name, hold_policy};
use crate::api_answer::api_answer;
use crate::check_set::{CheckSet, GateEntry, KindSwitch, selector_of, switch_of};
use crate::condition::{ConditionType, Placement, existing_condition};
use crate::context::{KindContext, Shared};
use crate::gated_record::GatedRecord;
use crate::kind::GatedKind;
use crate::pause::{self, ReportedConflicts};
use crate::reconcile::{error_policy, reconcile};
use crate::shard_share::{count_share, ring_changes};
use crate::status_writer::ConditionUpdate;
use crate::summary::summarize;
use crate::tasks::AbortOnDrop;
use crate::triggers::{check_changes, reconcile_triggers};
use futures::{StreamExt, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use preflight_engine::action::{self, Decision};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{Instrument, info, info_span, warn};

/// How often a kind is looked up again right after its CRD was established (discovery may lag behind).
const QUICK_RETRY: Duration = Duration::from_millis(250);
/// How many quick lookups follow a CRD becoming established.
const QUICK_RETRIES: u32 = 8;
/// Runs the controller of one kind until `stop` fires.
async fn run_kind(context: Arc<KindContext>, stop: oneshot::Receiver<()>) {
    let client = context.shared.client.clone();
    let api: Api<DynamicObject> = Api::all_with(client, &context.resource);
    let writer = reflector::store::Writer::new(context.resource.clone());
    let reader = writer.as_reader();
    let mut config = watcher::Config::default();
    if let Some(selector) = &context.shared.watch_selector {
        config = config.labels(selector);
    }
    let objects = reconcile_triggers(
        watcher(api, config).default_backoff().reflect(writer),
        context.shared.writer.recorded().clone(),
        context.pause_conflicts.clone(),
        context.held.clone(),
        context.placement,
    );
    let triggers = stream::select(
        check_changes(context.shared.gate.checks().clone(), context.kind.clone()),
        ring_changes(context.shared.shard.clone()),
    );
    let _share = context.shared.shard.clone().map(|shard| {
        AbortOnDrop(tokio::spawn(count_share(
            shard,
            reader.clone(),
            context.shared.metrics.clone(),
            context.label.clone(),
        )))
    });
    Controller::for_stream_with(objects, reader, context.resource.clone())
        .with_config(controller::Config::default().concurrency(context.shared.kind_concurrency))
        .reconcile_all_on(triggers)
        .graceful_shutdown_on(async move {
            let _ = stop.await;
        })
        .run(reconcile, error_policy, context.clone())
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
        })
        .await;
    context.held.clear();
}

/// Finds how the server serves `kind`: its resource and where its condition goes. Prefers the group's
/// preferred version; with `versions`, the first of them the server serves.
pub async fn resolve(
    client: &Client,
    kind: &GatedKind,
    versions: &[String],
) -> Result<(ApiResource, Placement), String> {
    let group = kube::discovery::group(client, &kind.group)
        .await
        .map_err(|error| {
            format!(
                "API group `{}` is not served ({}); is the CustomResourceDefinition of {kind} installed?",
                kind.group,
                api_answer(&error)
            )
        })?;
    let found = if versions.is_empty() {
        group.recommended_kind(&kind.kind)
    } else {
        versions.iter().find_map(|version| {
            group
                .versioned_resources(version)
                .into_iter()
                .find(|(resource, _)| resource.kind == kind.kind)
        })
    };
    let (resource, capabilities) = found.ok_or_else(|| {
        format!(
            "kind {kind} is not served{}; is its CustomResourceDefinition installed?",
            if versions.is_empty() {
                String::new()
            } else {
                format!(" in versions {}", versions.join(", "))
            }
        )
    })?;
    let placement = if capabilities
        .subresources
        .iter()
        .any(|(subresource, _)| subresource.plural == "status")
    {
        Placement::Status
    } else {
        Placement::Annotation
    };
    Ok((resource, placement))
}

/// A Warning Event with `reason` on every check ConfigMap of `kind`: a problem of the kind, not of one check.
async fn warn_on_checks_of(
    shared: &Shared,
    checks: &CheckSet,
    kind: &GatedKind,
    reason: &str,
    problem: &str,
) {
    for entry in checks.for_kind(kind) {
        shared
            .events
            .warn_on_config_map(entry.name(), reason, problem)
            .await;
    }
}

/// Reports, once per change, that the checks of `kind` name different pause switches (none is applied then):
/// a `PauseSwitchDisagreement` Warning Event on each of their ConfigMaps.
async fn report_pause_disagreement(
    shared: &Shared,
    checks: &CheckSet,
    kind: &GatedKind,
    reported: &mut HashMap<GatedKind, String>,
) {
    let entries = checks.for_kind(kind);
    match switch_of(&entries) {
        Ok(_) => {
            reported.remove(kind);
        }
        Err(problem) if reported.get(kind) != Some(&problem) => {
            warn!(%kind, %problem, "pause switches disagree");
            for entry in &entries {
                shared
                    .events
                    .warn_on_config_map(entry.name(), "PauseSwitchDisagreement", &problem)
                    .await;
            }
            reported.insert(kind.clone(), problem);
        }
        Err(_) => {}
    }
}

/// What the CustomResourceDefinition watch tells the supervisor, by the CRD's name (`<plural>.<group>`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum CrdChange {
    /// A CRD was listed, created or changed (becoming established is a change of its status).
    Changed(CrdName),
    /// A CRD was deleted, and with it every object of its kind.
    Deleted(CrdName),
}

/// A CRD's name, `<plural>.<group>`, which the API server requires of every CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CrdName {
    plural: String,
    group: String,
}

impl std::fmt::Display for CrdName {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}.{}", self.plural, self.group)
    }
}

impl CrdName {
    /// Whether this CRD serves `resource`.
    fn serves(&self, resource: &ApiResource) -> bool {
        self.plural == resource.plural && self.group == resource.group
    }
}

/// The change a watch event of a CRD's metadata means for the supervisor, if any.
fn crd_change(
    event: watcher::Event<PartialObjectMeta<CustomResourceDefinition>>,
) -> Option<CrdChange> {
    let name_of = |crd: &PartialObjectMeta<CustomResourceDefinition>| {
        let name = crd.name_any();
        let (plural, group) = name.split_once('.')?;
        Some(CrdName {
            plural: plural.to_owned(),
            group: group.to_owned(),
        })
    };
    match event {
        watcher::Event::Apply(crd) | watcher::Event::InitApply(crd) => {
            name_of(&crd).map(CrdChange::Changed)
        }
        watcher::Event::Delete(crd) => name_of(&crd).map(CrdChange::Deleted),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

/// Sends every CustomResourceDefinition created, changed (its status too: becoming established) or
/// deleted, so that a kind whose CRD appears after its check is gated within about a second instead of at
/// the next slow retry, and a running kind whose CRD is deleted and created again is watched afresh at once
/// instead of after its watch's backoff. Only the CRDs' metadata is watched: a cluster's CRDs can weigh
/// hundreds of megabytes (their schemas), and the kind is resolved through discovery anyway. Reads CRDs
/// only (RBAC: get, list, watch); if that is refused, the slow retry still finds the kind.
async fn watch_crds(client: Client, changes: mpsc::Sender<CrdChange>) {
    let crds: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(client);
    let mut events = watcher(crds, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let change = match event {
            Ok(event) => crd_change(event),
            Err(error) => {
                tracing::debug!(%error, "cannot watch CustomResourceDefinitions");
                continue;
            }
        };
        let Some(change) = change else {
            continue;
        };
        // A deletion must arrive; a change may be dropped when the channel is full (it already holds a
        // wake-up).
        let sent = match change {
            CrdChange::Deleted(_) => changes.send(change).await.is_ok(),
            CrdChange::Changed(_) => !matches!(
                changes.try_send(change),
                Err(mpsc::error::TrySendError::Closed(_))
            ),
        };
        if !sent {
            return;
        }
    }
}

/// The admission holds of the running kinds, and the problems already reported about them.
struct Holds {
    installed: AdmissionHolds,
    /// The problem last reported, by kind.
    reported: HashMap<GatedKind, String>,
    /// Whether the last sync failed somewhere (it is tried again at the slow retry pace).
    failing: bool,
}

impl Holds {
    /// Makes the installed policies those of the running, still wanted kinds with a pause switch (none when
    /// hold at admission is off: an earlier run's are deleted). Each new problem is reported once, as a
    /// Warning Event on the kind's check ConfigMaps.
    async fn sync(
        &mut self,
        shared: &Shared,
        checks: &CheckSet,
        running: &BTreeMap<GatedKind, Running>,
        wanted: &BTreeSet<GatedKind>,
    ) {
        let mut policies = Vec::new();
        let mut problems: HashMap<GatedKind, String> = HashMap::new();
        let mut kinds_by_policy = HashMap::new();
        let held = running
            .iter()
            .filter(|(kind, _)| shared.hold_at_admission && wanted.contains(*kind));
        for (kind, controller) in held {
            let entries = checks.for_kind(kind);
            let Ok(Some(switch)) = switch_of(&entries) else {
                continue;
            };
            let selector = selector_of(&entries);
            match hold_policy(
                &controller.resource,
                &switch,
                selector.as_ref(),
                &shared.installation,
            ) {
                Ok(policy) => {
                    kinds_by_policy.insert(policy.name.clone(), kind.clone());
                    policies.push(policy);
                }
                Err(problem) => {
                    problems.insert(
                        kind.clone(),
                        format!("objects cannot be held at admission: {problem}"),
                    );
                }
            }
        }
        // Kinds still wanted whose controller is not running (at start, or not served yet): their holds
        // from an earlier run stay.
        let pending_groups = wanted
            .iter()
            .filter(|kind| !running.contains_key(*kind))
            .map(|kind| group_name(&kind.group).to_owned())
            .collect();
        let failures = self.installed.sync(policies, &pending_groups).await;
        self.failing = !failures.is_empty();
        for (policy, problem) in failures {
            match kinds_by_policy.get(&policy) {
                Some(kind) => {
                    problems.insert(
                        kind.clone(),
                        format!("admission policy {policy}: {problem}"),
                    );
                }
                // Deleting a policy of a kind no longer held, or listing them: the log says it.
                None if shared.hold_at_admission => warn!(%policy, %problem, "admission hold"),
                None => tracing::debug!(%policy, %problem, "admission hold"),
            }
        }
        for (policy, note) in self.installed.take_put_back() {
            if let Some(kind) = kinds_by_policy.get(&policy) {
                warn_on_checks_of(shared, checks, kind, "AdmissionHoldRestored", &note).await;
            }
        }
        self.reported.retain(|kind, _| problems.contains_key(kind));
        for (kind, problem) in problems {
            if self.reported.get(&kind) == Some(&problem) {
                continue;
            }
            warn!(%kind, %problem, "admission hold");
            warn_on_checks_of(shared, checks, &kind, "AdmissionHoldFailed", &problem).await;
            self.reported.insert(kind, problem);
        }
    }
}

/// A running controller.
struct Running {
    /// Taken when the controller is told to stop.
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    resource: ApiResource,
    placement: Placement,
    /// The `versions` setting the kind was resolved with.
    versions: Vec<String>,
}

/// The `versions` setting of a kind's checks (the first good check's): what the kind is resolved with.
fn versions_of(checks: &CheckSet, kind: &GatedKind) -> Vec<String> {
    checks
        .for_kind(kind)
        .iter()
        .find_map(|entry| match entry {
            GateEntry::Ready(check) => Some(check.settings.versions.clone()),
            GateEntry::Unavailable { .. } => None,
        })
        .unwrap_or_default()
}

/// Starts and stops controllers as the set of gated kinds changes, until `shutdown` turns true.
pub async fn supervise(shared: Arc<Shared>, retry: Duration, mut shutdown: watch::Receiver<bool>) {
    // Until the check ConfigMaps are listed and loaded no kind looks wanted: starting now would remove an
    // earlier run's admission holds, and a restart or a new leader would leave the kinds unheld meanwhile.
    let mut synced = shared.checks_synced.clone();
    tokio::select! {
        _ = synced.wait_for(|synced| *synced) => {}
        _ = shutdown.wait_for(|stopping| *stopping) => return,
    }
    let checks = shared.gate.checks().clone();
    let mut changes = checks.subscribe();
    let mut record = GatedRecord::new(&shared.client, shared.record_namespace.as_deref());
    let mut running: BTreeMap<GatedKind, Running> = BTreeMap::new();
    let mut unresolved: HashMap<GatedKind, String> = HashMap::new();
    let (crd_changes, mut crds) = mpsc::channel(64);
    let crd_watch = tokio::spawn(watch_crds(shared.client.clone(), crd_changes));
    // Running kinds whose CRD was deleted, and those whose CRD was created again since: the latter are
    // watched afresh as soon as discovery serves them.
    let mut crd_deleted: BTreeSet<GatedKind> = BTreeSet::new();
    let mut restart: BTreeSet<GatedKind> = BTreeSet::new();
    let mut quick_retries = 0;
    let mut disagreements: HashMap<GatedKind, String> = HashMap::new();
    let mut holds = Holds {
        installed: AdmissionHolds::new(&shared.client, shared.installation.clone()),
        reported: HashMap::new(),
        failing: false,
    };
    // What happens to the installed holds behind the operator's back: a deleted one is put back.
    let (hold_changes, mut hold_events) = mpsc::channel(64);
    let _hold_watch = shared
        .hold_at_admission
        .then(|| AbortOnDrop(tokio::spawn(holds.installed.watch_installed(hold_changes))));
    loop {
        let wanted = checks.kinds();
        for kind in &wanted {
            shared.metrics.register_kind(&kind.to_string());
            report_pause_disagreement(&shared, &checks, kind, &mut disagreements).await;
        }
        disagreements.retain(|kind, _| wanted.contains(kind));
        // A kind that goes stops being held at admission before its objects are released.
        holds.sync(&shared, &checks, &running, &wanted).await;
        if let Some(earlier) = record.earlier().await {
            release_earlier(&shared, earlier.difference(&wanted)).await;
        }
        // Recorded before its controller starts; forgotten once its objects are released.
        record.keep(gated(&wanted, &running)).await;
        for kind in running
            .keys()
            .filter(|kind| !wanted.contains(*kind))
            .cloned()
            .collect::<Vec<_>>()
        {
            if let Some(mut controller) = running.remove(&kind) {
                stop(&kind, &mut controller, shared.stop_grace).await;
                release(&shared, &kind, &controller.resource, controller.placement).await;
            }
        }
        record.keep(gated(&wanted, &running)).await;
        crd_deleted.retain(|kind| running.contains_key(kind));
        restart.retain(|kind| running.contains_key(kind));
        // A kind whose CRD was created again is watched afresh as soon as discovery serves it; until then
        // its controller, and its admission hold, stay as they are.
        for kind in restart.clone() {
            let versions = versions_of(&checks, &kind);
            match resolve(&shared.client, &kind, &versions).await {
                Ok((resource, placement)) => {
                    restart.remove(&kind);
                    if let Some(mut controller) = running.remove(&kind) {
                        stop(&kind, &mut controller, shared.stop_grace).await;
                    }
                    let controller = start(&shared, kind.clone(), resource, placement, versions);
                    running.insert(kind, controller);
                }
                Err(problem) => tracing::debug!(%kind, %problem, "not served again yet"),
            }
        }
        // A kind whose checks now ask for other versions is resolved again.
        let moved: Vec<GatedKind> = running
            .iter()
            .filter(|(kind, controller)| controller.versions != versions_of(&checks, kind))
            .map(|(kind, _)| kind.clone())
            .collect();
        for kind in moved {
            if let Some(mut controller) = running.remove(&kind) {
                stop(&kind, &mut controller, shared.stop_grace).await;
            }
        }
        unresolved.retain(|kind, _| wanted.contains(kind));
        let missing: Vec<GatedKind> = wanted
            .iter()
            .filter(|kind| !running.contains_key(*kind))
            .cloned()
            .collect();
        for kind in missing {
            let versions = versions_of(&checks, &kind);
            match resolve(&shared.client, &kind, &versions).await {
                Ok((resource, placement)) => {
                    unresolved.remove(&kind);
                    let controller = start(&shared, kind.clone(), resource, placement, versions);
                    running.insert(kind, controller);
                }
                Err(problem) => {
                    if unresolved.get(&kind) != Some(&problem) {
                        warn!(%kind, %problem, "cannot gate kind yet; retrying");
                        warn_on_checks_of(&shared, &checks, &kind, "KindNotServed", &problem).await;
                    }
                    unresolved.insert(kind, problem);
                }
            }
        }
        holds.sync(&shared, &checks, &running, &wanted).await;
        // Soon after a CRD of an unresolved kind is established, then at the slow pace (aggregated APIs
        // and a refused CRD watch still get there). Other CRDs wake nothing.
        let wait = if quick_retries > 0 {
            quick_retries -= 1;
            QUICK_RETRY
        } else {
            retry
        };
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        let mut just_deleted = None;
        let retrying =
            !unresolved.is_empty() || holds.failing || !restart.is_empty() || !record.is_read();
        let stopping = loop {
            let recheck_at = holds.installed.recheck_at();
            tokio::select! {
                changed = changes.changed() => break changed.is_err(),
                _ = &mut sleep, if retrying => break false,
                Some(change) = crds.recv() => match change {
                    CrdChange::Changed(crd) => {
                        let recreated = running
                            .iter()
                            .find(|(kind, controller)| {
                                crd_deleted.contains(*kind) && crd.serves(&controller.resource)
                            })
                            .map(|(kind, _)| kind.clone());
                        let awaited = unresolved.keys().any(|kind| kind.group == crd.group);
                        if let Some(kind) = &recreated {
                            info!(%kind, "its CustomResourceDefinition is back: watching it afresh");
                            crd_deleted.remove(kind);
                            restart.insert(kind.clone());
                        } else if awaited {
                            tracing::debug!(%crd, "a CRD in the group of a kind not served yet changed");
                        }
                        if recreated.is_some() || awaited {
                            quick_retries = QUICK_RETRIES;
                            break false;
                        }
                    }
                    CrdChange::Deleted(crd) => {
                        let deleted = running
                            .iter()
                            .find(|(_, controller)| crd.serves(&controller.resource))
                            .map(|(kind, _)| kind.clone());
                        if let Some(kind) = deleted {
                            crd_deleted.insert(kind.clone());
                            just_deleted = Some(kind);
                            break false;
                        }
                    }
                },
                Some(event) = hold_events.recv() => {
                    holds.installed.notice(event);
                }
                _ = tokio::time::sleep_until(recheck_at.unwrap_or_else(Instant::now)),
                    if recheck_at.is_some() => break false,
                _ = shutdown.wait_for(|stopping| *stopping) => break true,
            }
        };
        if stopping {
            break;
        }
        if let Some(kind) = just_deleted {
            let problem = format!(
                "the CustomResourceDefinition of {kind} was deleted, and with it every object of the \
                 kind; its objects are gated again once it is created"
            );
            warn!(%kind, "its CustomResourceDefinition was deleted");
            warn_on_checks_of(&shared, &checks, &kind, "KindNotServed", &problem).await;
        }
    }
    crd_watch.abort();
    // Every kind at once: shutting down takes as long as the slowest running reconcile, not their sum.
    let stopping = running
        .iter_mut()
        .map(|(kind, controller)| stop(kind, controller, shared.stop_grace));
    futures::future::join_all(stopping).await;
}

fn start(
    shared: &Arc<Shared>,
    kind: GatedKind,
    resource: ApiResource,
    placement: Placement,
    versions: Vec<String>,
) -> Running {
    info!(%kind, version = %resource.version, ?placement, "starting controller");
    let context = Arc::new(KindContext {
        shared: shared.clone(),
        label: kind.to_string(),
        kind: kind.clone(),
        resource: resource.clone(),
        placement,
        pause: KindSwitch::default(),
        pause_conflicts: Arc::default(),
        held: Arc::new(shared.metrics.held_objects(&kind.to_string())),
    });
    let (stop, stopped) = oneshot::channel();
    let task =
        tokio::spawn(run_kind(context, stopped).instrument(info_span!("controller", kind = %kind)));
    Running {
        stop: Some(stop),
        task,
        resource,
        placement,
        versions,
    }
}

/// Stops a controller: its running reconciles finish, for at most `grace`.
async fn stop(kind: &GatedKind, controller: &mut Running, grace: Duration) {
    info!(%kind, "stopping controller");
    if let Some(stop) = controller.stop.take() {
        let _ = stop.send(());
    }
    crate::finish(&mut controller.task, grace).await;
}

/// The kinds to record as gated: those with checks, and those whose controller still runs.
fn gated(
    wanted: &BTreeSet<GatedKind>,
    running: &BTreeMap<GatedKind, Running>,
) -> BTreeSet<GatedKind> {
    wanted.iter().chain(running.keys()).cloned().collect()
}

/// Releases the objects of `gone`, kinds an earlier run gated (as its record says) that no check gates any
/// more: their last check went while no operator ran. A kind the server no longer serves has no objects
/// left.
async fn release_earlier(shared: &Shared, gone: impl Iterator<Item = &GatedKind>) {
    for kind in gone {
        match resolve(&shared.client, kind, &[]).await {
            Ok((resource, placement)) => {
                info!(%kind, "its last check went while no operator ran: releasing its objects");
                release(shared, kind, &resource, placement).await;
            }
            Err(problem) => tracing::debug!(%kind, %problem, "an earlier run's kind is not served"),
        }
    }
}

/// The last check of a kind is gone: objects the gate held back may proceed; say so on each of them and
/// withdraw the pause switches the operator (or its admission policy) set.
async fn release(shared: &Shared, kind: &GatedKind, resource: &ApiResource, placement: Placement) {
    let api: Api<DynamicObject> = Api::all_with(shared.client.clone(), resource);
    let objects = match api.list(&ListParams::default()).await {
        Ok(objects) => objects,
        Err(error) => {
            warn!(%kind, %error, "cannot list objects to release them");
            return;
        }
    };
    let decision = Decision {
        action: action::Action::Proceed {
            recheck_after: None,
        },
        failures: 0,
    };
    let summary = summarize(&decision, &[]);
    let no_conflicts = ReportedConflicts::default();
    // Says NoChecks where the operator said something, and takes back what monitored checks said.
    let updates = [
        ConditionUpdate {
            condition_type: ConditionType::Preflight,
            summary: Some(&summary),
            warning: false,
        },
        ConditionUpdate {
            condition_type: ConditionType::Monitor,
            summary: None,
            warning: false,
        },
    ];
    for object in &objects.items {
        if existing_condition(object, placement, ConditionType::Preflight).is_some()
            && let Err(error) = shared
                .writer
                .record_all(resource, placement, object, &updates)
                .await
        {
            warn!(%kind, object = %object.name_any(), %error, "cannot release object");
        }
        if pause::holds_anything(object) {
            let api = match object.namespace() {
                Some(namespace) => {
                    Api::namespaced_with(shared.client.clone(), &namespace, resource)
                }
                None => Api::all_with(shared.client.clone(), resource),
            };
            if let Err(error) = pause::sync(&api, resource, object, None, true, &no_conflicts).await
            {
                warn!(%kind, object = %object.name_any(), %error, "cannot withdraw its pause");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::core::PartialObjectMetaExt;

    fn crd(name: &str) -> PartialObjectMeta<CustomResourceDefinition> {
        ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        }
        .into_response_partial()
    }

    #[test]
    fn crd_changes_and_deletions_are_named_by_plural_and_group() {
        let apps = || CrdName {
            plural: "apps".into(),
            group: "apps.example.com".into(),
        };
        let table = [
            (
                watcher::Event::Apply(crd("apps.apps.example.com")),
                Some(CrdChange::Changed(apps())),
            ),
            (
                watcher::Event::InitApply(crd("apps.apps.example.com")),
                Some(CrdChange::Changed(apps())),
            ),
            (
                watcher::Event::Delete(crd("apps.apps.example.com")),
                Some(CrdChange::Deleted(apps())),
            ),
            (watcher::Event::Apply(crd("nodot")), None),
            (watcher::Event::Init, None),
            (watcher::Event::InitDone, None),
        ];
        for (event, change) in table {
            let description = format!("{event:?}");
            assert_eq!(crd_change(event), change, "{description}");
        }
        let resource = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("apps.example.com", "v1", "App"),
            "apps",
        );
        assert!(apps().serves(&resource));
        let other = CrdName {
            plural: "apps".into(),
            group: "example.com".into(),
        };
        assert!(!other.serves(&resource));
    }
}
