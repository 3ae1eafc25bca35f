//! Watches the check ConfigMaps (selected by label, in one namespace unless told otherwise), compiles each
//! new version off the reconcile path, grants it what its ConfigMap says (reading credentials from their
//! Secret), has it validate its configuration, and swaps it into the [`CheckSet`]; a broken version (or a
//! configuration the check rejects) is reported on its ConfigMap (Event), in the log and in metrics, and
//! never replaces the last good one.
//!
//! A check shipped in parts is loaded again when one of its parts appears, changes or is deleted, also while
//! the parts watch was down ([`PartChanges`]; a deleted part is reported at once, by number). The component
//! of every version loaded from parts is kept on disk ([`KeptComponents`]), so that a version whose parts
//! went missing still serves after a restart.
//!
//! A load that failed for something outside the ConfigMap is tried again after a backoff; one that ended
//! for good is not loaded again until its ConfigMap or a part changes, not even by a relist
//! ([`LoadOutcome`]).
//!
//! Versions compile in parallel (a slow compile of one check never delays another), and only the newest
//! version of each ConfigMap is ever installed: every change takes a sequence number, and a compile whose
//! number is no longer the newest for its name is dropped.

use crate::check_set::{CheckSet, LoadedCheck};
use crate::check_source;
use crate::config_map_format::{PART_OF_LABEL, SOURCE_KEY};
use crate::events::EventPublisher;
use crate::kept_components::KeptComponents;
use crate::lookups::{GrantedLookups, ObjectCaches};
use crate::metrics::{KindLabels, LoadFailureLabels, Metrics};
use crate::oci_source::{OciSources, PulledComponent};
use crate::part_changes::{PartChanges, PartMeta};
use crate::parts;
use crate::signing::{Signing, blob_signatures};
use crate::tasks::AbortOnDrop;
use crate::vocabulary::{CheckSource, Rejection, RejectionCause};
use crate::watch_failures;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use preflight_engine::{Digest, Engine, FailureKind, Limits};
use preflight_oci::SignaturePolicy;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tracing::{debug, error, info};

/// Where to look for check ConfigMaps.
#[derive(Debug, Clone)]
pub struct CheckSelection {
    /// The namespace to watch; `None` watches every namespace.
    pub namespace: Option<String>,
    /// A label selector, e.g. `preflight.dev/gates`.
    pub label_selector: String,
}

/// Keeps the check set in step with the ConfigMaps.
pub struct CheckWatcher {
    /// The API client.
    pub client: Client,
    /// Compiles checks.
    pub engine: Arc<Engine>,
    /// Where loaded checks go.
    pub checks: Arc<CheckSet>,
    /// Limits for checks whose ConfigMap sets none.
    pub default_limits: Limits,
    /// Reports broken checks.
    pub events: EventPublisher,
    /// Counts load failures.
    pub metrics: Arc<Metrics>,
    /// The watch caches that granted lookups read.
    pub lookups: Arc<ObjectCaches>,
    /// Copies of the components of checks in parts; `None` without a cache directory.
    pub(crate) kept: Option<Arc<KeptComponents>>,
    /// Pulls the checks whose ConfigMap names a `source` in a registry.
    pub(crate) oci: Arc<OciSources>,
    /// The signatures checks must carry.
    pub(crate) signing: Signing,
}

/// The newest change per check name, the kinds the `checks_loaded` gauge has reported, the loads tried
/// again in a row per check (the backoff's exponent), and the newest ConfigMap of each check shipped in
/// parts, which a change of one of its parts loads again (never a copy read later, which could be older
/// than one the check watcher already started loading), and the `resourceVersion` of each check's
/// ConfigMap whose load ended for good (see [`LoadOutcome::Final`]), which a relist does not load again.
#[derive(Debug, Default)]
struct Progress {
    sequence: u64,
    newest: HashMap<String, u64>,
    gauged: BTreeSet<String>,
    load_retries: HashMap<String, u32>,
    in_parts: HashMap<String, ConfigMap>,
    settled: HashMap<String, String>,
}

/// The first wait before a load whose failure may pass ([`LoadOutcome::MayPass`]) is tried again; it
/// doubles with every such failure in a row.
const FIRST_LOAD_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between loads of a check that keeps failing so (the kubelet's image pull cap).
const LONGEST_LOAD_RETRY: Duration = Duration::from_secs(300);

impl CheckWatcher {
    /// Watches until the stream ends (never, in practice: the watcher retries with backoff). `synced` turns
    /// true once the first complete list has been loaded.
    pub async fn run(self, selection: CheckSelection, synced: watch::Sender<bool>) {
        let api: Api<ConfigMap> = match &selection.namespace {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        };
        let loader = Arc::new(Loader {
            watcher: self,
            progress: Mutex::default(),
            compile_slots: Semaphore::new(PARALLEL_COMPILES),
        });
        let (parts_listed, mut listed_parts) = watch::channel(false);
        let parts = tokio::spawn(watch_parts(
            Arc::clone(&loader),
            selection.namespace.clone(),
            parts_listed,
        ));
        // The parts watcher ends with the check watcher.
        let _parts = AbortOnDrop(parts);
        // Checks are listed only once the parts are: a part deleted or changed after a check's load listed
        // its parts then reaches the parts watch as an event, never in a gap before its first list.
        if listed_parts.wait_for(|listed| *listed).await.is_err() {
            error!("the parts watch ended before listing; no check is loaded");
            return;
        }
        let config = watcher::Config::default().labels(&selection.label_selector);
        let mut events = watcher(api, config).default_backoff().boxed();
        let mut listed = BTreeSet::new();
        let mut initial = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listed.clear(),
                Ok(watcher::Event::InitApply(config_map)) => {
                    listed.insert(check_name(&config_map));
                    if !loader.is_settled(&config_map) {
                        initial.push(loader.apply(config_map));
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    for load in initial.drain(..) {
                        let _ = load.await;
                    }
                    let known = loader.watcher.checks.names();
                    for gone in known.iter().filter(|name| !listed.contains(*name)) {
                        loader.delete(gone);
                    }
                    loader.watcher.oci.initial_loads_done();
                    synced.send_replace(true);
                }
                Ok(watcher::Event::Apply(config_map)) if !loader.is_settled(&config_map) => {
                    drop(loader.apply(config_map));
                }
                Ok(watcher::Event::Apply(_)) => {}
                Ok(watcher::Event::Delete(config_map)) => loader.delete(&check_name(&config_map)),
                Err(failure) => watch_failures::report(&failure, "check ConfigMaps"),
            }
        }
    }
}

impl CheckWatcher {
    /// The part ConfigMaps of a check shipped in parts (none for a check in one ConfigMap), or why they
    /// could not be listed: then the check is rejected for its missing parts, saying why they are missing
    /// (or served from its kept copy), and loaded again after a backoff.
    async fn parts_of(&self, config_map: &ConfigMap) -> Result<Vec<ConfigMap>, String> {
        parts_of(&self.client, config_map).await.map_err(|error| {
            error!(check = %check_name(config_map), %error, "listing the check's parts");
            error.to_string()
        })
    }

    async fn prepare(&self, check: LoadedCheck) -> Result<LoadedCheck, Rejection> {
        prepare(&self.client, &self.engine, &self.lookups, check).await
    }
}

/// The part ConfigMaps of `config_map`, a check that may be shipped in parts (none when it is not).
pub(crate) async fn parts_of(
    client: &Client,
    config_map: &ConfigMap,
) -> Result<Vec<ConfigMap>, kube::Error> {
    if !parts::ships_in_parts(config_map) {
        return Ok(Vec::new());
    }
    let namespace = config_map.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let selector = format!("{PART_OF_LABEL}={}", config_map.name_any());
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// Grants a compiled check what its ConfigMap says (credentials read from their Secret in the check's
/// namespace, lookups served from `lookups`), then has the check validate its configuration; either
/// failing rejects this version.
pub(crate) async fn prepare(
    client: &Client,
    engine: &Engine,
    lookups: &Arc<ObjectCaches>,
    mut check: LoadedCheck,
) -> Result<LoadedCheck, Rejection> {
    let namespace = check
        .settings
        .name
        .split_once('/')
        .map_or("", |(namespace, _)| namespace)
        .to_owned();
    let capabilities = check.settings.capabilities.clone();
    if let Some(http) = &capabilities.http {
        let secrets = Api::namespaced(client.clone(), &namespace);
        let grant = http.grant(&secrets, &namespace).await;
        check.grants.http =
            Some(grant.map_err(|problem| check.rejection(RejectionCause::Grant, problem))?);
    }
    if let Some(settings) = capabilities.lookups {
        check.grants.lookups_per_evaluation = settings.per_evaluation;
        check.grants.cluster = Some(Arc::new(GrantedLookups::new(settings, Arc::clone(lookups))));
    }
    let validated = engine
        .validate_config(&check.check, &check.settings.config, &check.settings.limits)
        .await;
    validated.map_err(|failure| match failure.kind {
        FailureKind::InvalidConfig => check.rejection(
            RejectionCause::Configuration,
            format!("the check rejects its configuration: {}", failure.message),
        ),
        kind => check.rejection(
            RejectionCause::Validation,
            format!(
                "the check could not validate its configuration ({}): {}",
                kind.as_str(),
                failure.message
            ),
        ),
    })?;
    Ok(check)
}

/// Loads the newest version of a check again when one of its parts is created, changed or deleted after it
/// (parts are applied before their check by `preflight pack`'s manifests, but nothing forces that order; a
/// deleted part of the version in force is reported at once, like a missing one). A relist of the parts
/// (after a watch the API server expired) loads again the checks whose parts it shows changed; the first
/// list loads nothing: the check watcher waits for it (`listed` turns true) and then loads every check with
/// the parts it lists itself.
async fn watch_parts(loader: Arc<Loader>, namespace: Option<String>, listed: watch::Sender<bool>) {
    let client = loader.watcher.client.clone();
    // Metadata only: the parts' bytes are read when their check is loaded, never by this watch.
    let api: Api<PartMeta> = match &namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let config = watcher::Config::default().labels(PART_OF_LABEL);
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut changes = PartChanges::default();
    while let Some(event) = events.next().await {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            listed.send_replace(true);
        }
        let changed = match event {
            Ok(event) => changes.checks_to_load(event),
            Err(failure) => {
                watch_failures::report(&failure, "check parts");
                continue;
            }
        };
        for check in changed {
            let newest = loader.progress().in_parts.get(&check).cloned();
            if let Some(config_map) = newest {
                debug!(%check, "a part changed: loading the check again");
                drop(loader.apply(config_map));
            }
        }
    }
}

/// Compiles and installs versions, newest wins.
struct Loader {
    watcher: CheckWatcher,
    progress: Mutex<Progress>,
    /// Compiles running at once: each already uses every core, more would only add memory.
    compile_slots: Semaphore,
}

/// See [`Loader::compile_slots`]: two, so that one slow compile never holds up every other check.
const PARALLEL_COMPILES: usize = 2;

impl Loader {
    /// Starts loading the ConfigMap's version (a change) in the background.
    fn apply(self: &Arc<Self>, config_map: ConfigMap) -> tokio::task::JoinHandle<()> {
        let name = check_name(&config_map);
        let mut progress = self.progress();
        progress.load_retries.remove(&name);
        if parts::ships_in_parts(&config_map) {
            progress.in_parts.insert(name, config_map.clone());
        } else {
            progress.in_parts.remove(&name);
        }
        drop(progress);
        self.load(config_map)
    }

    /// Loads the ConfigMap's version in the background; a load whose failure may pass is tried again after
    /// a backoff, unless a newer change came meanwhile.
    fn load(self: &Arc<Self>, config_map: ConfigMap) -> tokio::task::JoinHandle<()> {
        let name = check_name(&config_map);
        let sequence = self.supersede(&name);
        let loader = self.clone();
        tokio::spawn(async move {
            // A registry that answers slowly must not hold a compile slot: pull first, then wait for one.
            let client = &loader.watcher.client;
            let policy = loader.watcher.signing.policy_for(client, &config_map).await;
            let pulled = loader
                .watcher
                .oci
                .pull(client, &config_map, policy.as_ref().ok())
                .await;
            let pull_may_pass = pulled.as_ref().is_some_and(|pulled| pulled.retry)
                || policy.as_ref().is_err_and(|problem| problem.retry);
            // The semaphore is never closed: acquiring only waits for a slot.
            let _slot = loader.compile_slots.acquire().await.ok();
            if !loader.is_newest(&name, sequence) {
                return;
            }
            let engine = loader.watcher.engine.clone();
            let defaults = loader.watcher.default_limits;
            let kept = loader.watcher.kept.clone();
            let parts = loader.watcher.parts_of(&config_map).await;
            let parts_listed = parts.is_ok();
            let version = config_map.clone();
            // Decompressing and compiling are CPU-heavy: off the async workers.
            let loaded = tokio::task::spawn_blocking(move || {
                let policy = policy.map_err(|problem| problem.problem);
                let delivered = Delivered {
                    parts,
                    pulled,
                    policy,
                };
                load_version(&engine, &version, delivered, &defaults, kept.as_deref())
            })
            .await
            .unwrap_or_else(|join_error| {
                Err(Rejection {
                    gates: None,
                    failure_policy: Default::default(),
                    mode: Default::default(),
                    selector: None,
                    pause: None,
                    problem: format!("compilation did not finish: {join_error}"),
                    cause: RejectionCause::Host,
                })
            });
            let prepared = match loaded {
                Ok((check, problem)) => match loader.watcher.prepare(check).await {
                    Ok(check) => Ok((check, problem)),
                    Err(rejection) => Err(rejection),
                },
                Err(rejection) => Err(rejection),
            };
            let rejected = prepared.as_ref().err().map(|rejection| rejection.cause);
            let outcome = LoadOutcome::of(rejected, pull_may_pass || !parts_listed);
            if outcome == LoadOutcome::MayPass {
                loader.load_again_later(&name, sequence, config_map.clone());
            } else {
                loader.progress().load_retries.remove(&name);
            }
            loader
                .settle(&name, sequence, prepared, outcome, &config_map)
                .await;
        })
    }

    /// Loads `config_map` again after the backoff of its failures in a row that may pass by themselves
    /// ([`LoadOutcome::MayPass`]), if no change came meanwhile.
    fn load_again_later(self: &Arc<Self>, name: &str, sequence: u64, config_map: ConfigMap) {
        let delay = {
            let mut progress = self.progress();
            let retries = progress.load_retries.entry(name.to_owned()).or_default();
            let delay = load_retry_delay(*retries);
            *retries = retries.saturating_add(1);
            delay
        };
        info!(check = %name, ?delay, "loading again after a failure that may pass");
        let loader = self.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if loader.is_newest(&name, sequence) {
                drop(loader.load(config_map));
            }
        });
    }

    /// Records that a newer change of `name` exists; returns its sequence number.
    fn supersede(&self, name: &str) -> u64 {
        let mut progress = self.progress();
        progress.sequence += 1;
        let sequence = progress.sequence;
        progress.newest.insert(name.to_owned(), sequence);
        sequence
    }

    /// Whether this version of a check ConfigMap was loaded already, for good: a relist (after the API
    /// server expired the watch or restarted) shows every ConfigMap again, and loading an unchanged one
    /// would only validate its configuration and report its rejection a second time.
    fn is_settled(&self, config_map: &ConfigMap) -> bool {
        let version = config_map.resource_version();
        version.is_some()
            && self.progress().settled.get(&check_name(config_map)) == version.as_ref()
    }

    /// Whether no change of `name` came after the one numbered `sequence`.
    fn is_newest(&self, name: &str, sequence: u64) -> bool {
        self.progress().newest.get(name) == Some(&sequence)
    }

    /// Installs or rejects a compiled version of `config_map`, unless a newer change of the same name came
    /// meanwhile. A version loaded from its kept copy is installed, and its problem (a missing part)
    /// reported. The load's `outcome` says whether a relist loads this version again and whether the
    /// report says that it is tried again by itself.
    async fn settle(
        &self,
        name: &str,
        sequence: u64,
        loaded: Result<(LoadedCheck, Option<String>), Rejection>,
        outcome: LoadOutcome,
        config_map: &ConfigMap,
    ) {
        let checks = &self.watcher.checks;
        let rejected = {
            let mut progress = self.progress();
            if progress.newest.get(name) != Some(&sequence) {
                return;
            }
            match config_map.resource_version() {
                Some(version) if outcome == LoadOutcome::Final => {
                    progress.settled.insert(name.to_owned(), version)
                }
                _ => progress.settled.remove(name),
            };
            let rejected = match loaded {
                Ok((mut check, problem)) => {
                    check.stand_in_note = problem.is_some().then(|| {
                        format!(
                            "serving the copy kept on the operator's disk while its source fails \
                             (CheckRejected Event on ConfigMap {name})"
                        )
                    });
                    let (kind, digest) = (check.settings.gates.to_string(), check.digest());
                    let rejection =
                        problem.map(|problem| check.rejection(RejectionCause::ConfigMap, problem));
                    if checks.install(check) {
                        info!(check = %name, %kind, %digest, "check loaded");
                    }
                    rejection.map(|rejection| (rejection, Consequence::KeptCopyServes(digest)))
                }
                Err(rejection) => {
                    let consequence = if checks.reject(name, rejection.clone()) {
                        Consequence::Unserved
                    } else {
                        Consequence::LastGoodServes
                    };
                    Some((rejection, consequence))
                }
            };
            self.refresh_loaded_gauge(&mut progress);
            rejected
        };
        if let Some((rejection, consequence)) = rejected {
            let retried = outcome == LoadOutcome::MayPass;
            self.report(name, rejection, consequence, retried).await;
        }
    }

    /// Says what is wrong with a rejected version: log, metric, Event on the ConfigMap; and, when it is
    /// `retried` by itself, that it is (in words that do not change between tries, so that the Event
    /// counts them instead of making one per try).
    async fn report(
        &self,
        name: &str,
        rejection: Rejection,
        consequence: Consequence,
        retried: bool,
    ) {
        let kind = rejection
            .gates
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let consequence = match consequence {
            Consequence::Unserved => {
                "no good version exists: objects of the kind are held per its failurePolicy"
                    .to_owned()
            }
            Consequence::LastGoodServes => "the last good version keeps serving".to_owned(),
            Consequence::KeptCopyServes(digest) => format!(
                "the copy of this version (sha256 {digest}) kept on the operator's disk serves"
            ),
        };
        let consequence = match retried {
            true => format!(
                "{consequence}; loaded again by itself (after {} s, doubling up to {} s)",
                FIRST_LOAD_RETRY.as_secs(),
                LONGEST_LOAD_RETRY.as_secs()
            ),
            false => consequence,
        };
        let problem = &rejection.problem;
        error!(check = %name, %kind, %problem, consequence, "check rejected");
        self.watcher
            .metrics
            .check_load_failures
            .get_or_create(&LoadFailureLabels {
                kind,
                check: name.to_owned(),
                cause: rejection.cause.as_str().to_owned(),
            })
            .inc();
        self.watcher
            .events
            .warn_on_config_map(name, "CheckRejected", &format!("{problem}; {consequence}"))
            .await;
    }

    /// Removes a check whose ConfigMap is gone; a compile still running for it is dropped when it ends.
    fn delete(&self, name: &str) {
        self.supersede(name);
        if let Some(kept) = &self.watcher.kept {
            kept.forget(name);
        }
        if self.watcher.oci.forget(name) {
            self.watcher.oci.sweep();
        }
        let mut progress = self.progress();
        progress.load_retries.remove(name);
        progress.in_parts.remove(name);
        progress.settled.remove(name);
        if let Some(kind) = self.watcher.checks.remove(name) {
            info!(check = %name, %kind, "check removed");
        }
        self.refresh_loaded_gauge(&mut progress);
    }

    /// Sets `checks_loaded` for every kind with checks, and to 0 for kinds that had some.
    fn refresh_loaded_gauge(&self, progress: &mut Progress) {
        let metrics = &self.watcher.metrics;
        for kind in progress.gauged.iter() {
            metrics
                .checks_loaded
                .get_or_create(&KindLabels { kind: kind.clone() })
                .set(0);
        }
        for (kind, count) in self.watcher.checks.loaded_per_kind() {
            let kind = kind.to_string();
            metrics
                .checks_loaded
                .get_or_create(&KindLabels { kind: kind.clone() })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
            progress.gauged.insert(kind);
        }
    }

    fn progress(&self) -> MutexGuard<'_, Progress> {
        self.progress
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The wait before loading again after `retries` earlier failures in a row: doubling from
/// [`FIRST_LOAD_RETRY`], at most [`LONGEST_LOAD_RETRY`].
fn load_retry_delay(retries: u32) -> Duration {
    FIRST_LOAD_RETRY
        .saturating_mul(1 << retries.min(16))
        .min(LONGEST_LOAD_RETRY)
}

/// How a load ended, which says when to load the same version again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoadOutcome {
    /// Installed, or rejected for what the ConfigMap and its component are: loading it again would end
    /// the same way, so only a change loads it again (of the ConfigMap, or of one of its parts).
    Final,
    /// Something outside the ConfigMap failed that may pass by itself (a registry's refusal; a pull
    /// secret, key or credentials Secret missing; parts that could not be listed; a validation that gave no
    /// verdict): loaded again after a backoff ([`load_retry_delay`]), like the kubelet's image pulls.
    MayPass,
    /// The host could not finish loading it: the next relist loads it again.
    Unfinished,
}

impl LoadOutcome {
    /// How a load ended, from why it was rejected (`None`: installed) and whether fetching what it needed
    /// failed in a way that may pass (`fetch_may_pass`).
    fn of(rejected: Option<RejectionCause>, fetch_may_pass: bool) -> Self {
        match rejected {
            _ if fetch_may_pass => Self::MayPass,
            Some(RejectionCause::Grant | RejectionCause::Validation) => Self::MayPass,
            Some(RejectionCause::Host) => Self::Unfinished,
            _ => Self::Final,
        }
    }
}

/// What follows from a rejected version.
enum Consequence {
    /// No version serves: objects are held per the failure policy.
    Unserved,
    /// The last good version in memory keeps serving.
    LastGoodServes,
    /// The version was loaded from its copy kept on disk (its parts are missing).
    KeptCopyServes(preflight_engine::Digest),
}

/// What was fetched for a check ConfigMap before it is parsed: its parts (or why they could not be listed),
/// or its component pulled from a registry, and the signatures it must carry (or why its keys cannot be
/// read).
struct Delivered {
    parts: Result<Vec<ConfigMap>, String>,
    pulled: Option<PulledComponent>,
    policy: Result<SignaturePolicy, String>,
}

/// Reads, verifies and compiles one version of a check ConfigMap. A version in parts is kept on disk once
/// loaded; one whose parts cannot be assembled is loaded from its kept copy when there is one (verified
/// like any other), with the problem beside it (to report), else rejected. A version pulled from the cache
/// because its registry failed is loaded with that failure beside it.
fn load_version(
    engine: &Engine,
    config_map: &ConfigMap,
    delivered: Delivered,
    defaults: &Limits,
    kept: Option<&KeptComponents>,
) -> Result<(LoadedCheck, Option<String>), Rejection> {
    let (pulled, fallback, unsigned) = match delivered.pulled {
        Some(pulled) => (Some(pulled.component), pulled.fallback, pulled.unsigned),
        None => (None, None, None),
    };
    let signed = |source: &CheckSource, config_map: &ConfigMap| {
        verify(source, config_map, &delivered.policy, unsigned.clone())
    };
    let parts = delivered.parts.as_deref().unwrap_or_default();
    let read =
        check_source::with_pulled(config_map, parts, pulled, defaults).map_err(|mut rejection| {
            if let Err(error) = &delivered.parts {
                rejection.problem = format!(
                    "{} (its parts could not be listed: {error})",
                    rejection.problem
                );
            }
            rejection
        });
    match read {
        Ok(source) if fallback.is_some() => {
            signed(&source, config_map)?;
            LoadedCheck::load(engine, source).map(|check| (check, fallback))
        }
        Ok(source) => {
            signed(&source, config_map)?;
            let component = (parts::ships_in_parts(config_map) && kept.is_some())
                .then(|| source.component.clone());
            let check = LoadedCheck::load(engine, source)?;
            if let (Some(kept), Some(component)) = (kept, component) {
                kept.keep(
                    &check_name(config_map),
                    &check.digest().to_string(),
                    &component,
                );
            }
            Ok((check, None))
        }
        Err(rejection) => {
            let stand_in = kept.and_then(|kept| kept.stand_in(&check_name(config_map), config_map));
            let Some(stand_in) = stand_in else {
                return Err(rejection);
            };
            check_source::from_config_maps(&stand_in, &[], defaults)
                .and_then(|source| signed(&source, &stand_in).map(|()| source))
                .and_then(|source| LoadedCheck::load(engine, source))
                .map(|check| (check, Some(rejection.problem.clone())))
                .map_err(|_| rejection)
        }
    }
}

/// Refuses `source` unless it carries the signatures `policy` asks for: a check from a registry was
/// verified when it was pulled (`unsigned` says why not), a check in ConfigMaps is verified here against
/// the `signature` of `config_map`.
pub(crate) fn verify(
    source: &CheckSource,
    config_map: &ConfigMap,
    policy: &Result<SignaturePolicy, String>,
    unsigned: Option<String>,
) -> Result<(), Rejection> {
    let from_registry = config_map
        .data
        .as_ref()
        .is_some_and(|data| data.contains_key(SOURCE_KEY));
    let problem = match policy {
        Err(problem) => Some(problem.clone()),
        Ok(_) if from_registry => unsigned,
        Ok(policy) => {
            let digest = Digest::of(&source.component).to_string();
            policy
                .verify_blob(&source.component, &digest, &blob_signatures(config_map))
                .err()
        }
    };
    match problem {
        Some(problem) => Err(source
            .settings
            .rejection(RejectionCause::Signature, problem)),
        None => Ok(()),
    }
}

/// `namespace/name` of a ConfigMap: the check's name.
fn check_name(config_map: &ConfigMap) -> String {
    format!(
        "{}/{}",
        config_map.namespace().unwrap_or_default(),
        config_map.name_any()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response, StatusCode};
    use kube::client::Body;
    use preflight_engine::EngineConfig;
    use serde_json::json;
    use tower_test::mock;

    /// A check watcher over the mock API, with nothing on disk and no keys.
    fn check_watcher(client: Client) -> CheckWatcher {
        CheckWatcher {
            client: client.clone(),
            engine: Arc::new(
                Engine::new(EngineConfig {
                    max_concurrent_evaluations: 2,
                    ..EngineConfig::default()
                })
                .unwrap(),
            ),
            checks: Arc::new(CheckSet::new()),
            default_limits: Limits::default(),
            events: EventPublisher::new(client.clone(), "preflight", None),
            metrics: Arc::new(Metrics::default()),
            lookups: ObjectCaches::new(client),
            kept: None,
            oci: Arc::new(OciSources::new(&Default::default(), None)),
            signing: Signing::new(Vec::new()),
        }
    }

    /// Whether `request` lists (not watches) the ConfigMaps of namespace `ops` labelled `label`.
    fn lists(request: &Request<Body>, label: &str) -> bool {
        let uri = request.uri();
        let query = uri.query().unwrap_or_default().replace("%2F", "/");
        uri.path() == "/api/v1/namespaces/ops/configmaps"
            && !query.contains("watch=true")
            && query.contains(&format!("labelSelector={label}"))
    }

    #[tokio::test]
    async fn checks_are_listed_only_once_the_parts_watch_has_listed_their_metadata() {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "ops");
        let (synced, _) = watch::channel(false);
        let selection = CheckSelection {
            namespace: Some("ops".into()),
            label_selector: "preflight.dev/gates".into(),
        };
        let run = AbortOnDrop(tokio::spawn(check_watcher(client).run(selection, synced)));
        let (request, parts_list) = handle.next_request().await.expect("a request");
        assert!(
            lists(&request, PART_OF_LABEL),
            "the parts are listed first, not {}",
            request.uri()
        );
        let accept = request.headers().get(http::header::ACCEPT);
        assert!(
            accept.is_some_and(|accept| accept
                .to_str()
                .is_ok_and(|accept| accept.contains("as=PartialObjectMetadataList"))),
            "the parts' metadata only, not their bytes: {accept:?}"
        );
        let early = tokio::time::timeout(Duration::from_millis(500), handle.next_request()).await;
        assert!(
            early.is_err(),
            "a request before the parts were listed: {:?}",
            early.map(|request| request.map(|(request, _)| request.uri().clone()))
        );
        parts_list.send_response(
            Response::builder()
                .status(StatusCode::OK)
                .body(Body::from(
                    serde_json::to_vec(&json!({
                        "apiVersion": "meta.k8s.io/v1",
                        "kind": "PartialObjectMetadataList",
                        "metadata": {"resourceVersion": "10"},
                        "items": [],
                    }))
                    .unwrap(),
                ))
                .unwrap(),
        );
        // Next come the parts watch's watch and the checks' list, in either order.
        let mut checks_listed = false;
        for _ in 0..2 {
            let (request, _) = tokio::time::timeout(Duration::from_secs(10), handle.next_request())
                .await
                .expect("a request after the parts were listed")
                .expect("a request");
            checks_listed |= lists(&request, "preflight.dev/gates");
        }
        assert!(checks_listed, "the checks are listed once the parts are");
        drop(run);
    }

    #[test]
    fn parts_that_could_not_be_listed_are_reported_as_such_not_only_as_missing() {
        let engine = Engine::new(EngineConfig {
            max_concurrent_evaluations: 1,
            ..EngineConfig::default()
        })
        .unwrap();
        let mut config_map = ConfigMap::default();
        config_map.metadata.name = Some("deps".into());
        config_map.metadata.namespace = Some("ops".into());
        config_map.metadata.labels = Some(
            [(
                "preflight.dev/gates".to_owned(),
                "App.apps.example.com".to_owned(),
            )]
            .into(),
        );
        config_map.data = Some(
            [
                ("parts".to_owned(), "2".to_owned()),
                ("sha256".to_owned(), "ab".repeat(32)),
            ]
            .into(),
        );
        let load = |parts| {
            let delivered = Delivered {
                parts,
                pulled: None,
                policy: Ok(SignaturePolicy::default()),
            };
            match load_version(&engine, &config_map, delivered, &Limits::default(), None) {
                Ok(_) => panic!("loaded with no part there"),
                Err(rejection) => rejection.problem,
            }
        };
        let unlisted = load(Err("configmaps is forbidden".into()));
        assert!(
            unlisted.contains("part 1 of 2")
                && unlisted.ends_with("(its parts could not be listed: configmaps is forbidden)"),
            "{unlisted}"
        );
        let missing = load(Ok(Vec::new()));
        assert!(
            missing.contains("part 1 of 2") && !missing.contains("could not be listed"),
            "{missing}"
        );
    }

    #[test]
    fn only_loads_that_may_end_otherwise_are_tried_again() {
        use LoadOutcome::{Final, MayPass, Unfinished};
        use RejectionCause::{
            Component, ConfigMap, Configuration, Grant, Host, Signature, Validation,
        };
        let compile = Component(preflight_engine::ComponentProblem::Compile);
        let table = [
            (None, false, Final),
            (None, true, MayPass),
            (Some(ConfigMap), false, Final),
            (Some(ConfigMap), true, MayPass),
            (Some(compile), false, Final),
            (Some(Configuration), false, Final),
            (Some(Validation), false, MayPass),
            (Some(Signature), false, Final),
            (Some(Signature), true, MayPass),
            (Some(Grant), false, MayPass),
            (Some(Host), false, Unfinished),
            (Some(Host), true, MayPass),
        ];
        for (rejected, fetch_may_pass, outcome) in table {
            assert_eq!(
                LoadOutcome::of(rejected, fetch_may_pass),
                outcome,
                "rejected {rejected:?}, fetch may pass: {fetch_may_pass}"
            );
        }
    }

    #[test]
    fn refused_pulls_back_off_doubling_from_five_seconds_to_five_minutes() {
        let table = [
            (0, 5),
            (1, 10),
            (2, 20),
            (5, 160),
            (6, 300),
            (40, 300),
            (u32::MAX, 300),
        ];
        for (retries, seconds) in table {
            assert_eq!(
                load_retry_delay(retries),
                Duration::from_secs(seconds),
                "after {retries} refusals"
            );
        }
    }
}
