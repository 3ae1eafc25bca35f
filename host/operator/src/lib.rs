//! The preflight operator: gates Kubernetes objects with WebAssembly-component checks shipped in ConfigMaps,
//! and offers the same gate as a library to operators written with kube-rs. It uses the engine
//! ([`preflight_engine`], re-exported as [`engine`]) only through its public API.
//!
//! Library mode: build a [`CheckSet`] from [`CheckSource`]s ([`LoadedCheck::load`]), put a [`Gate`] over it,
//! and call [`Gate::evaluate`] at the top of your reconcile; [`controller_action`] turns a decision that
//! does not proceed into kube-rs's requeue or wait. The standalone operator is [`Operator`].
//!
//! Inside, one idea per module: `vocabulary` (what a check is, as the operator applies it), `check_source`
//! (the ConfigMap format), `check_set` (the last good version of each check), `check_watcher` (live reload),
//! `gate`, `condition` (the `Preflight` condition), `status_writer` and `events` (where outcomes are
//! recorded), `recorded_conditions` (telling our writes from others'), `controllers` (one per gated kind),
//! `pause` (pause switches of controllers that do not embed the gate), `admission_hold` (setting them in the
//! creating request), `leader`, `metrics`, `http`; `what_if` evaluates a candidate check against live
//! objects, read-only, for `preflight what-if`.

#![warn(missing_docs)]

mod admission_hold;
mod api_answer;
mod capabilities;
mod check_set;
mod check_source;
mod check_watcher;
mod condition;
mod config_map_format;
mod context;
mod controllers;
mod error;
mod events;
mod field_managers;
mod gate;
mod gated_record;
mod http;
mod kept_components;
mod kind;
mod leader;
mod lookups;
mod membership;
mod metrics;
mod oci_source;
mod outputs;
mod part_changes;
mod parts;
mod pause;
mod reconcile;
mod recorded_conditions;
mod ring;
mod selectors;
mod shard_share;
mod signing;
mod status_writer;
mod summary;
mod tasks;
mod triggers;
mod vocabulary;
mod watch_failures;
pub mod what_if;

pub use capabilities::{CapabilitySettings, Credentials, HttpSettings, LookupSettings};
pub use check_set::{CheckSet, GateEntry, LoadedCheck};
pub use check_watcher::CheckSelection;
pub use condition::{
    CONDITION_ANNOTATION, CONDITION_TYPE, MONITOR_CONDITION_ANNOTATION, MONITOR_CONDITION_TYPE,
    PreflightCondition, condition_of, monitor_condition_of,
};
pub use config_map_format::{
    COMPONENT_KEY, DEFAULT_PART_BYTES, GATES_LABEL, MAX_COMPONENT_BYTES, MAX_PARTS, PART_LABEL,
    PART_OF_LABEL, PARTS_KEY, VERSION_LABEL,
};
pub use error::Error;
pub use field_managers::{FIELD_MANAGER, PAUSE_FIELD_MANAGER};
pub use gate::{Gate, GateResult, MonitorResult, controller_action};
pub use kind::GatedKind;
pub use leader::LeaderElection;
pub use lookups::{GrantedLookups, ObjectCaches};
pub use membership::{RING_LABEL, ShardRing};
pub use outputs::OUTPUTS_ANNOTATION;
pub use parts::{Package, pack};
pub use pause::PauseSwitch;
pub use preflight_engine as engine;
pub use summary::{CheckRun, Summary};
pub use vocabulary::{
    CheckMode, CheckSettings, CheckSource, FailurePolicy, ObjectSelector, OutputsPlacement,
    Rejection, RejectionCause,
};

use check_watcher::CheckWatcher;
use context::Shared;
use events::EventPublisher;
use kube::Client;
use metrics::Metrics;
use preflight_engine::{Engine, EngineConfig, Limits};
use status_writer::StatusWriter;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Where the check ConfigMaps are.
    pub checks: CheckSelection,
    /// Address of `/healthz`, `/readyz`, `/metrics` (port 0 picks one).
    pub listen: SocketAddr,
    /// Lease to hold; `None` runs without election (one replica only).
    pub leader_election: Option<LeaderElection>,
    /// A shard ring to join instead of electing a leader: every member gates its own share of the objects
    /// (see [`ShardRing`]); `None`: the leader gates every object.
    pub shard_ring: Option<ShardRing>,
    /// Limits for checks whose ConfigMap sets none.
    pub default_limits: Limits,
    /// Engine sizing and the compiled-check cache.
    pub engine: EngineConfig,
    /// Where a copy of every version of a check shipped in parts is kept (by digest), so that a restart
    /// serves it while a part is missing; `None` keeps none. `preflight operator` keeps them in
    /// `--cache-dir`/components.
    pub kept_components: Option<std::path::PathBuf>,
    /// How to reach the registries of checks named by `source: oci://…` (plain-HTTP registries, private
    /// CAs, timeouts).
    pub registry: preflight_oci::RegistryOptions,
    /// Every check must carry a signature by one of these keys (the operator's `--verify-key` files) before
    /// it is compiled; none: only checks whose ConfigMap names a `verify` key are verified.
    pub verify_keys: Vec<preflight_oci::VerificationKey>,
    /// Where checks pulled from registries are cached by digest, so that a restart during a registry
    /// outage serves them; `None` caches nothing. `preflight operator` keeps them in `--cache-dir`/oci.
    pub oci_cache: Option<std::path::PathBuf>,
    /// How often a kind the server does not serve yet is looked up again.
    pub kind_retry: Duration,
    /// The name Events are reported under, and this replica's instance name.
    pub controller_name: String,
    /// This replica (the pod name), for Events.
    pub instance: Option<String>,
    /// How long a stopping operator lets running reconciles finish before it drops them.
    pub shutdown_grace: Duration,
    /// A label selector limiting which objects of the gated kinds this operator watches and gates, served
    /// by the API server (static sharding, Flux's `--watch-label-selector`: several deployments, each with
    /// its own selector and Lease, share a kind's objects); `None` gates them all.
    pub watch_selector: Option<String>,
    /// Install, for every gated kind with a pause switch, the admission policy that sets the switch when an
    /// object is created or its data changes (see `docs/operator.md`, "Hold at admission"); off by default.
    pub hold_at_admission: bool,
}

/// A running operator. [`Operator::stop`] shuts it down gracefully.
pub struct Operator {
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub address: SocketAddr,
    shutdown: watch::Sender<bool>,
    shutdown_grace: Duration,
    /// Runs the controllers while leading, then releases the Lease.
    lead: JoinHandle<()>,
    /// Serves the HTTP endpoints until shutdown.
    server: JoinHandle<()>,
    /// Watches the check ConfigMaps; it has nothing to finish, so it is stopped by aborting it.
    watcher: JoinHandle<()>,
}

/// How long the Lease release and the HTTP server may take after the controllers stopped.
const RELEASE_BOUND: Duration = Duration::from_secs(5);

impl Operator {
    /// Starts the check watcher, the HTTP endpoints, leader election and (while leading) the controllers.
    pub async fn start(client: Client, config: OperatorConfig) -> Result<Self, Error> {
        let mut selectors = vec![("check selector", config.checks.label_selector.as_str())];
        selectors.extend(
            config
                .watch_selector
                .as_deref()
                .map(|s| ("watch selector", s)),
        );
        let namespace = config.checks.namespace.as_deref();
        selectors::refuse_unreadable(&client, namespace, &selectors).await?;
        let engine = Arc::new(Engine::new(config.engine.clone())?);
        let checks = Arc::new(CheckSet::new());
        let metrics = Arc::new(Metrics::default());
        let events = EventPublisher::new(
            client.clone(),
            &config.controller_name,
            config.instance.clone(),
        );
        let writer = StatusWriter::new(client.clone(), events.clone());
        let (shutdown, _) = watch::channel(false);
        let (synced_sender, synced) = watch::channel(false);
        let membership = match &config.shard_ring {
            Some(ring) => Some(membership::join(client.clone(), ring, metrics.clone()).await?),
            None => None,
        };
        let checks_synced = synced.clone();
        let ready = match &membership {
            Some(membership) => ready_when_both(synced, membership.ring.clone()),
            None => synced,
        };

        let stopping = shutdown.subscribe();
        let (address, server) = http::serve(config.listen, metrics.clone(), ready, async move {
            let mut stopping = stopping;
            let _ = stopping.wait_for(|stop| *stop).await;
        })
        .await
        .map_err(|source| Error::Serve {
            address: config.listen,
            source,
        })?;
        let server = tokio::spawn(async move {
            if let Err(error) = server.await {
                tracing::error!(%error, "HTTP endpoints stopped");
            }
        });

        let watcher = CheckWatcher {
            client: client.clone(),
            engine: engine.clone(),
            checks: checks.clone(),
            default_limits: config.default_limits,
            events: events.clone(),
            metrics: metrics.clone(),
            lookups: lookups::ObjectCaches::new(client.clone()),
            kept: config
                .kept_components
                .as_deref()
                .and_then(kept_components::KeptComponents::open)
                .map(Arc::new),
            oci: Arc::new(oci_source::OciSources::new(
                &config.registry,
                config
                    .oci_cache
                    .clone()
                    .map(preflight_oci::ArtifactCache::new),
            )),
            signing: signing::Signing::new(config.verify_keys.clone()),
        };
        let watcher = tokio::spawn(watcher.run(config.checks.clone(), synced_sender));

        let shard =
            membership
                .as_ref()
                .zip(config.shard_ring.as_ref())
                .map(|(membership, ring)| context::Shard {
                    identity: ring.identity.clone(),
                    ring: membership.ring.clone(),
                });
        let leadership = match (membership, &config.leader_election) {
            (Some(membership), _) => leader::while_member(membership.ring, membership.task),
            (None, Some(election)) => leader::elect(client.clone(), election).await?,
            (None, None) => leader::always(),
        };
        let shared = Arc::new(Shared {
            client,
            gate: Arc::new(Gate::new(engine, checks.clone())),
            writer,
            events,
            metrics: metrics.clone(),
            kind_concurrency: u16::try_from(config.engine.max_concurrent_evaluations / 2)
                .unwrap_or(u16::MAX)
                .max(1),
            stop_grace: config.shutdown_grace,
            hold_at_admission: config.hold_at_admission,
            installation: config
                .checks
                .namespace
                .clone()
                .unwrap_or_else(|| "all-namespaces".to_owned()),
            record_namespace: config
                .checks
                .namespace
                .clone()
                .or_else(|| Some(config.leader_election.as_ref()?.namespace.clone()))
                .or_else(|| Some(config.shard_ring.as_ref()?.namespace.clone())),
            watch_selector: config.watch_selector.clone(),
            shard,
            checks_synced,
        });
        let lead = tokio::spawn(lead(
            shared,
            config.kind_retry,
            leadership,
            shutdown.subscribe(),
        ));
        Ok(Self {
            address,
            shutdown,
            shutdown_grace: config.shutdown_grace,
            lead,
            server,
            watcher,
        })
    }

    /// Stops the controllers (letting running reconciles finish, for at most the shutdown grace), releases
    /// the Lease and stops serving. Returns as soon as that is done: an idle operator stops at once.
    pub async fn stop(mut self) {
        self.shutdown.send_replace(true);
        self.watcher.abort();
        finish(&mut self.lead, self.shutdown_grace + RELEASE_BOUND).await;
        finish(&mut self.server, RELEASE_BOUND).await;
    }
}

/// Ready when the checks are synced and the shard ring is known: a replica that does not know its share
/// yet gates nothing.
fn ready_when_both(
    mut synced: watch::Receiver<bool>,
    mut ring: watch::Receiver<Option<ring::Ring>>,
) -> watch::Receiver<bool> {
    let (sender, ready) = watch::channel(false);
    tokio::spawn(async move {
        loop {
            sender.send_replace(*synced.borrow_and_update() && ring.borrow_and_update().is_some());
            tokio::select! {
                changed = synced.changed() => if changed.is_err() { break },
                changed = ring.changed() => if changed.is_err() { break },
                _ = sender.closed() => break,
            }
        }
    });
    ready
}

/// Waits for `task` for at most `bound`, then aborts it.
async fn finish(task: &mut JoinHandle<()>, bound: Duration) {
    if tokio::time::timeout(bound, &mut *task).await.is_err() {
        tracing::warn!(?bound, "a task did not stop in time; aborting it");
        task.abort();
    }
}

/// Runs the controllers while this replica leads; stops them when it stops leading or shuts down.
async fn lead(
    shared: Arc<Shared>,
    kind_retry: Duration,
    leadership: leader::Leadership,
    mut shutdown: watch::Receiver<bool>,
) {
    let leader::Leadership {
        mut is_leader,
        task,
    } = leadership;
    loop {
        tokio::select! {
            leading = is_leader.wait_for(|leading| *leading) => if leading.is_err() { break },
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
        tracing::info!("leading: starting controllers");
        let (stop, stopped) = watch::channel(false);
        let mut supervisor =
            tokio::spawn(controllers::supervise(shared.clone(), kind_retry, stopped));
        let shutting_down = tokio::select! {
            _ = is_leader.wait_for(|leading| !*leading) => false,
            _ = shutdown.wait_for(|stop| *stop) => true,
            ended = &mut supervisor => {
                tracing::error!(?ended, "controllers ended unexpectedly; restarting them");
                continue;
            }
        };
        tracing::info!(shutting_down, "no longer leading: stopping controllers");
        stop.send_replace(true);
        let _ = supervisor.await;
        if shutting_down {
            break;
        }
    }
    drop(is_leader);
    let _ = task.await;
}
