//! One kube-rs controller per gated kind, started when the kind's first check appears and stopped when its
//! last check goes; each reconcile is the gate. Kinds are resolved through discovery; a kind the server does
//! not serve yet (its CRD is missing) is reported and retried until it appears.

use super::check_set::{CheckSet, GateEntry};
use super::gate::{Gate, controller_action, summarize};
use super::kind::GatedKind;
use super::metrics::{KindLabels, Metrics};
use super::outcome_writer::{
    CONDITION_ANNOTATION, OutcomeWriter, Placement, Recorded, existing_condition,
};
use crate::action::{self, Decision};
use futures::{Stream, StreamExt, stream};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::controller::{self, Action as ControllerAction, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{Instrument, info, info_span, warn};

/// How soon an object is retried after its outcome could not be written (an API error).
const RETRY_AFTER_API_ERROR: Duration = Duration::from_secs(5);
/// How long a stopping controller may take to finish its reconciles.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// What every kind's controller shares.
pub struct Shared {
    /// The API client.
    pub client: Client,
    /// The gate.
    pub gate: Arc<Gate>,
    /// Condition and Event writer.
    pub writer: OutcomeWriter,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Reconciles one kind may run at once: less than the engine's evaluation slots, so that a kind whose
    /// checks hog their whole time budget (endless loops) always leaves slots to the other kinds.
    pub kind_concurrency: u16,
}

/// The context of one kind's controller.
struct KindContext {
    shared: Arc<Shared>,
    kind: GatedKind,
    label: String,
    resource: ApiResource,
    placement: Placement,
}

/// The reconcile error: the outcome could not be read or written.
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("cannot record the outcome: {0}")]
    Write(#[from] kube::Error),
    #[error("cannot serialise the object: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// The gate as a reconcile: evaluate, record, and return the action the decision maps to.
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
    if recorded == Recorded::Written {
        context
            .shared
            .metrics
            .status_writes
            .get_or_create(&kind_labels(&context.label))
            .inc();
    }
    tracing::debug!(
        action = result.decision.action.as_str(),
        reason = %result.summary.reason,
        written = recorded == Recorded::Written,
        "gated"
    );
    Ok(controller_action(result.decision.action))
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
        .get_or_create(&kind_labels(&context.label))
        .inc();
    ControllerAction::requeue(RETRY_AFTER_API_ERROR)
}

/// A hash of what a check may read and what changes when the object changes for a reason other than our
/// own writes: generation, labels, annotations (without ours) and every top-level field but `status`.
/// Status-only updates (including our condition) do not trigger a re-check.
fn gate_inputs(object: &DynamicObject) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    object.metadata.generation.hash(&mut hasher);
    object.labels().hash(&mut hasher);
    object
        .annotations()
        .iter()
        .filter(|(key, _)| key.as_str() != CONDITION_ANNOTATION)
        .for_each(|entry| entry.hash(&mut hasher));
    if let Some(fields) = object.data.as_object() {
        for (key, value) in fields.iter().filter(|(key, _)| key.as_str() != "status") {
            key.hash(&mut hasher);
            // Streamed into the hasher: no copy of the field as text.
            let _ = serde_json::to_writer(HashWriter(&mut hasher), value);
        }
    }
    Some(hasher.finish())
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
    let objects = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(gate_inputs, Default::default());
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

/// A running controller.
struct Running {
    stop: oneshot::Sender<()>,
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
    loop {
        let wanted = checks.kinds();
        for kind in running
            .keys()
            .filter(|kind| !wanted.contains(*kind))
            .cloned()
            .collect::<Vec<_>>()
        {
            if let Some(controller) = running.remove(&kind) {
                stop(&kind, controller.stop, controller.task).await;
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
            if let Some(controller) = running.remove(&kind) {
                stop(&kind, controller.stop, controller.task).await;
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
                                .writer
                                .warn_on_config_map(entry.name(), "KindNotServed", &problem)
                                .await;
                        }
                    }
                    unresolved.insert(kind, problem);
                }
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(retry), if !unresolved.is_empty() => {}
            _ = shutdown.wait_for(|stopping| *stopping) => break,
        }
    }
    for (kind, controller) in running {
        stop(&kind, controller.stop, controller.task).await;
    }
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
    });
    let (stop, stopped) = oneshot::channel();
    let task =
        tokio::spawn(run_kind(context, stopped).instrument(info_span!("controller", kind = %kind)));
    Running {
        stop,
        task,
        resource,
        placement,
        versions,
    }
}

async fn stop(kind: &GatedKind, stop: oneshot::Sender<()>, mut task: JoinHandle<()>) {
    info!(%kind, "stopping controller");
    let _ = stop.send(());
    if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
        task.abort();
    }
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
