//! One kube-rs controller per gated kind, started when the kind's first check appears and stopped when its
//! last check goes; each reconcile is the gate. Kinds are resolved through discovery; a kind the server does
//! not serve yet (its CRD is missing) is reported and retried until it appears.

use crate::check_set::{CheckSet, GateEntry};
use crate::condition::{CONDITION_ANNOTATION, Placement, existing_condition};
use crate::events::{EventPublisher, EventType, Notice};
use crate::gate::{Gate, controller_action, summarize};
use crate::kind::GatedKind;
use crate::metrics::{KindLabels, Metrics, ReconcileErrorLabels};
use crate::outputs::{self, OUTPUTS_ANNOTATION};
use crate::pause::{self, KindSwitch, PauseSync, ReportedConflicts};
use crate::recorded_conditions::RecordedConditions;
use crate::status_writer::{Recorded, StatusWriter};
use futures::{Stream, StreamExt, future, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::controller::{self, Action as ControllerAction, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use preflight_engine::action::{self, Decision};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{Instrument, info, info_span, warn};

/// How often a kind is looked up again right after its CRD was established (discovery may lag behind).
const QUICK_RETRY: Duration = Duration::from_millis(250);
/// How many quick lookups follow a CRD becoming established.
const QUICK_RETRIES: u32 = 8;
/// How soon an object is retried after its outcome could not be written (an API error).
const RETRY_AFTER_API_ERROR: Duration = Duration::from_secs(5);

/// What every kind's controller shares.
pub struct Shared {
    /// The API client.
    pub client: Client,
    /// The gate.
    pub gate: Arc<Gate>,
    /// Condition and Event writer.
    pub writer: StatusWriter,
    /// Events on check ConfigMaps (a kind the server does not serve).
    pub events: EventPublisher,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Reconciles one kind may run at once: less than the engine's evaluation slots, so that a kind whose
    /// checks hog their whole time budget (endless loops) always leaves slots to the other kinds.
    pub kind_concurrency: u16,
    /// How long a stopping controller may take to finish its running reconciles.
    pub stop_grace: Duration,
}

/// The context of one kind's controller.
struct KindContext {
    shared: Arc<Shared>,
    kind: GatedKind,
    label: String,
    resource: ApiResource,
    placement: Placement,
    /// The pause switch its checks name.
    pause: KindSwitch,
    /// The pause conflicts already reported on its objects.
    pause_conflicts: Arc<ReportedConflicts>,
}

impl KindContext {
    /// The API of `object`'s kind, in its namespace.
    fn api(&self, object: &DynamicObject) -> Api<DynamicObject> {
        match object.namespace() {
            Some(namespace) => {
                Api::namespaced_with(self.shared.client.clone(), &namespace, &self.resource)
            }
            None => Api::all_with(self.shared.client.clone(), &self.resource),
        }
    }
}

/// The reconcile error: the outcome could not be read or written.
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("cannot record the outcome: {0}")]
    Write(#[from] kube::Error),
    #[error("cannot serialise the object: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("cannot set or withdraw the pause switch: {0}")]
    Pause(kube::Error),
    #[error("cannot record the checks' outputs: {0}")]
    Outputs(kube::Error),
}

impl ReconcileError {
    /// The `cause` label it is counted under (one of `RECONCILE_ERROR_CAUSES`).
    fn cause(&self) -> &'static str {
        match self {
            Self::Write(_) => "status-write",
            Self::Serialize(_) => "serialize",
            Self::Pause(_) => "pause",
            Self::Outputs(_) => "outputs-write",
        }
    }
}

/// The gate as a reconcile: evaluate, record, and return the action the decision maps to. Its span names
/// the object (`object` is its name: `name` is the span's own), so that the lines its checks log say which
/// object they were about.
#[tracing::instrument(skip_all, fields(kind = %context.kind, namespace = object.namespace().unwrap_or_default(), object = %object.name_any()))]
async fn reconcile(
    object: Arc<DynamicObject>,
    context: Arc<KindContext>,
) -> Result<ControllerAction, ReconcileError> {
    let json = serde_json::to_value(object.as_ref())?;
    let result = context.shared.gate.evaluate(&context.kind, json).await;
    context
        .shared
        .metrics
        .record_runs(&context.label, &result.runs);
    let warning = matches!(
        result.decision.action,
        action::Action::Backoff(_) | action::Action::Stop
    );
    let recorded = context
        .shared
        .writer
        .record(
            &context.resource,
            context.placement,
            &object,
            &result.summary,
            warning,
        )
        .await?;
    let mut writes = u64::from(recorded == Recorded::Written);
    for (placement, outputs) in result.outputs().unwrap_or_default() {
        let written = outputs::record(&context.api(&object), &object, &placement, &outputs)
            .await
            .map_err(ReconcileError::Outputs)?;
        writes += u64::from(written);
    }
    if writes > 0 {
        context
            .shared
            .metrics
            .status_writes
            .get_or_create(&kind_labels(&context.label))
            .inc_by(writes);
    }
    sync_pause(&context, &object, result.summary.proceed).await?;
    tracing::debug!(
        action = result.decision.action.as_str(),
        reason = %result.summary.reason,
        written = recorded == Recorded::Written,
        "gated"
    );
    Ok(controller_action(result.decision.action))
}

/// Sets or withdraws the kind's pause switch on `object` after its verdict, when its checks name one.
async fn sync_pause(
    context: &KindContext,
    object: &DynamicObject,
    proceed: bool,
) -> Result<(), ReconcileError> {
    let Some(switch) = context
        .pause
        .get(context.shared.gate.checks(), &context.kind)
    else {
        return Ok(());
    };
    let api = context.api(object);
    match pause::sync(
        &api,
        &context.resource,
        object,
        &switch,
        proceed,
        &context.pause_conflicts,
    )
    .await
    .map_err(ReconcileError::Pause)?
    {
        PauseSync::Unchanged => {}
        PauseSync::Set => info!(%switch, "paused its controller"),
        PauseSync::Withdrawn => info!(%switch, "withdrew the pause"),
        PauseSync::OwnedElsewhere(conflict) => {
            let note = format!(
                "the pause switch {switch} is set to another value by another field manager; \
                 preflight leaves it alone and says so once, until its owners or its value change \
                 ({conflict})"
            );
            let notice = Notice {
                event_type: EventType::Warning,
                reason: "PauseOwnedElsewhere",
                note: &note,
                action: "Pause",
            };
            let reference = object.object_ref(&context.resource);
            context.shared.events.publish(&reference, &notice).await;
        }
    }
    Ok(())
}

fn error_policy(
    object: Arc<DynamicObject>,
    error: &ReconcileError,
    context: Arc<KindContext>,
) -> ControllerAction {
    warn!(kind = %context.kind, object = %object.name_any(), %error, "reconcile failed");
    context
        .shared
        .metrics
        .reconcile_errors
        .get_or_create(&ReconcileErrorLabels {
            kind: context.label.clone(),
            cause: error.cause().to_owned(),
        })
        .inc();
    ControllerAction::requeue(RETRY_AFTER_API_ERROR)
}

/// A hash of what a check may read and what changes when the object changes for a reason other than our
/// own writes: generation, labels, annotations (without our condition and outputs) and every top-level
/// field but `status`.
/// Status-only updates (including our condition) do not change it.
fn gate_inputs(object: &DynamicObject) -> u64 {
    let mut hasher = DefaultHasher::new();
    object.metadata.generation.hash(&mut hasher);
    object.labels().hash(&mut hasher);
    object
        .annotations()
        .iter()
        .filter(|(key, _)| {
            key.as_str() != CONDITION_ANNOTATION && key.as_str() != OUTPUTS_ANNOTATION
        })
        .for_each(|entry| entry.hash(&mut hasher));
    if let Some(fields) = object.data.as_object() {
        for (key, value) in fields.iter().filter(|(key, _)| key.as_str() != "status") {
            key.hash(&mut hasher);
            // Streamed into the hasher: no copy of the field as text.
            let _ = serde_json::to_writer(HashWriter(&mut hasher), value);
        }
    }
    hasher.finish()
}

/// Picks the watch events that start a reconcile: an object seen for the first time, one whose gate inputs
/// changed, and one whose `Preflight` condition someone else removed or altered (restored at once). Our own
/// status writes start nothing. Deleted objects are forgotten (their recorded condition and pause
/// conflict too).
fn reconcile_triggers(
    events: impl Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
    recorded: Arc<RecordedConditions>,
    conflicts: Arc<ReportedConflicts>,
    placement: Placement,
) -> impl Stream<Item = Result<DynamicObject, watcher::Error>> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    events.filter_map(move |event| {
        let object = match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => object,
            Ok(watcher::Event::Delete(object)) => {
                let uid = object.uid().unwrap_or_default();
                seen.remove(&uid);
                recorded.forget(&uid);
                conflicts.forget(&uid);
                return future::ready(None);
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => return future::ready(None),
            Err(error) => return future::ready(Some(Err(error))),
        };
        let uid = object.uid().unwrap_or_default();
        let inputs = gate_inputs(&object);
        let changed = seen.insert(uid.clone(), inputs) != Some(inputs);
        let triggers =
            changed || recorded.was_altered(&uid, existing_condition(&object, placement).as_ref());
        future::ready(triggers.then_some(Ok(object)))
    })
}

/// Feeds what is written into a hasher.
struct HashWriter<'a>(&'a mut DefaultHasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Ticks whenever the checks of `kind` change: every object of the kind is then re-checked.
fn check_changes(
    checks: Arc<CheckSet>,
    kind: GatedKind,
) -> impl Stream<Item = ()> + Send + 'static {
    let seen = checks.revision(&kind);
    let changes = checks.subscribe();
    stream::unfold((changes, seen), move |(mut changes, seen)| {
        let checks = checks.clone();
        let kind = kind.clone();
        async move {
            loop {
                changes.changed().await.ok()?;
                let revision = checks.revision(&kind);
                if revision != seen {
                    return Some(((), (changes, revision)));
                }
            }
        }
    })
}

/// Runs the controller of one kind until `stop` fires.
async fn run_kind(context: Arc<KindContext>, stop: oneshot::Receiver<()>) {
    let client = context.shared.client.clone();
    let api: Api<DynamicObject> = Api::all_with(client, &context.resource);
    let writer = reflector::store::Writer::new(context.resource.clone());
    let reader = writer.as_reader();
    let objects = reconcile_triggers(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer),
        context.shared.writer.recorded().clone(),
        context.pause_conflicts.clone(),
        context.placement,
    );
    let triggers = check_changes(context.shared.gate.checks().clone(), context.kind.clone());
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
                "API group `{}` is not served ({error}); is the CustomResourceDefinition of {kind} installed?",
                kind.group
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

/// Reports, once per change, that the checks of `kind` name different pause switches (none is applied then):
/// a `PauseSwitchDisagreement` Warning Event on each of their ConfigMaps.
async fn report_pause_disagreement(
    shared: &Shared,
    checks: &CheckSet,
    kind: &GatedKind,
    reported: &mut HashMap<GatedKind, String>,
) {
    let entries = checks.for_kind(kind);
    match pause::switch_of(&entries) {
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

/// Sends the kind of every CustomResourceDefinition that is (or becomes) established, so that a kind whose
/// CRD appears after its check is gated within about a second instead of at the next slow retry. Reads CRDs
/// only (RBAC: get, list, watch); if that is refused, the slow retry still finds the kind.
async fn watch_established_crds(client: Client, established: mpsc::Sender<GatedKind>) {
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let mut events = watcher(crds, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let crd = match event {
            Ok(crd) => crd,
            Err(error) => {
                tracing::debug!(%error, "cannot watch CustomResourceDefinitions");
                continue;
            }
        };
        let is_established = crd.status.as_ref().is_some_and(|status| {
            status
                .conditions
                .iter()
                .flatten()
                .any(|condition| condition.type_ == "Established" && condition.status == "True")
        });
        let kind = GatedKind {
            kind: crd.spec.names.kind.clone(),
            group: crd.spec.group.clone(),
        };
        // A full channel already holds a wake-up; this one can be dropped.
        if is_established
            && let Err(mpsc::error::TrySendError::Closed(_)) = established.try_send(kind)
        {
            return;
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
    let checks = shared.gate.checks().clone();
    let mut changes = checks.subscribe();
    let mut running: BTreeMap<GatedKind, Running> = BTreeMap::new();
    let mut unresolved: HashMap<GatedKind, String> = HashMap::new();
    let (established, mut crds) = mpsc::channel(64);
    let crd_watch = tokio::spawn(watch_established_crds(shared.client.clone(), established));
    let mut quick_retries = 0;
    let mut disagreements: HashMap<GatedKind, String> = HashMap::new();
    loop {
        let wanted = checks.kinds();
        for kind in &wanted {
            shared.metrics.register_kind(&kind.to_string());
            report_pause_disagreement(&shared, &checks, kind, &mut disagreements).await;
        }
        disagreements.retain(|kind, _| wanted.contains(kind));
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
            .into_iter()
            .filter(|kind| !running.contains_key(kind))
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
                        for entry in checks.for_kind(&kind) {
                            shared
                                .events
                                .warn_on_config_map(entry.name(), "KindNotServed", &problem)
                                .await;
                        }
                    }
                    unresolved.insert(kind, problem);
                }
            }
        }
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
        let stopping = loop {
            tokio::select! {
                changed = changes.changed() => break changed.is_err(),
                _ = &mut sleep, if !unresolved.is_empty() => break false,
                Some(established) = crds.recv() => {
                    if unresolved.contains_key(&established) {
                        info!(kind = %established, "its CustomResourceDefinition is established");
                        quick_retries = QUICK_RETRIES;
                        break false;
                    }
                }
                _ = shutdown.wait_for(|stopping| *stopping) => break true,
            }
        };
        if stopping {
            break;
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

/// The last check of a kind is gone: objects the gate held back may proceed; say so on each of them.
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
    for object in objects
        .items
        .iter()
        .filter(|object| existing_condition(object, placement).is_some())
    {
        if let Err(error) = shared
            .writer
            .record(resource, placement, object, &summary, false)
            .await
        {
            warn!(%kind, object = %object.name_any(), %error, "cannot release object");
        }
    }
}

fn kind_labels(kind: &str) -> KindLabels {
    KindLabels {
        kind: kind.to_owned(),
    }
}
