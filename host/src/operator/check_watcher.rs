//! Watches the check ConfigMaps (selected by label, in one namespace unless told otherwise), compiles each
//! new version off the reconcile path and swaps it into the [`CheckSet`]; a broken version is reported on its
//! ConfigMap (Event), in the log and in metrics, and never replaces the last good one.

use super::check_set::{CheckSet, LoadedCheck};
use super::check_source::{self, Rejection};
use super::metrics::{CheckLabels, KindLabels, Metrics};
use super::outcome_writer::OutcomeWriter;
use crate::{Engine, Limits};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::watch;
use tracing::{error, info};

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
    pub writer: OutcomeWriter,
    /// Counts load failures.
    pub metrics: Arc<Metrics>,
}

impl CheckWatcher {
    /// Watches until the stream ends (never, in practice: the watcher retries with backoff). `synced` turns
    /// true once the first complete list has been loaded.
    pub async fn run(self, selection: CheckSelection, synced: watch::Sender<bool>) {
        let api: Api<ConfigMap> = match &selection.namespace {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        };
        let config = watcher::Config::default().labels(&selection.label_selector);
        let mut events = watcher(api, config).default_backoff().boxed();
        let mut listed = BTreeSet::new();
        let mut gauged = BTreeSet::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => listed.clear(),
                Ok(watcher::Event::InitApply(config_map)) => {
                    listed.insert(check_name(&config_map));
                    self.apply(&config_map).await;
                }
                Ok(watcher::Event::InitDone) => {
                    for gone in self
                        .checks
                        .names()
                        .into_iter()
                        .filter(|name| !listed.contains(name))
                    {
                        self.delete(&gone);
                    }
                    synced.send_replace(true);
                }
                Ok(watcher::Event::Apply(config_map)) => self.apply(&config_map).await,
                Ok(watcher::Event::Delete(config_map)) => self.delete(&check_name(&config_map)),
                Err(error) => error!(%error, "watching check ConfigMaps"),
            }
            self.refresh_loaded_gauge(&mut gauged);
        }
    }

    /// Sets `checks_loaded` for every kind with checks, and to 0 for kinds that had some (`gauged`).
    fn refresh_loaded_gauge(&self, gauged: &mut BTreeSet<String>) {
        let loaded = self.checks.loaded_per_kind();
        for kind in gauged.iter() {
            self.metrics
                .checks_loaded
                .get_or_create(&KindLabels { kind: kind.clone() })
                .set(0);
        }
        for (kind, count) in loaded {
            let kind = kind.to_string();
            self.metrics
                .checks_loaded
                .get_or_create(&KindLabels { kind: kind.clone() })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
            gauged.insert(kind);
        }
    }

    async fn apply(&self, config_map: &ConfigMap) {
        let name = check_name(config_map);
        let loaded = match check_source::from_config_map(config_map, &self.default_limits) {
            Ok(source) => {
                let engine = self.engine.clone();
                tokio::task::spawn_blocking(move || LoadedCheck::load(&engine, source))
                    .await
                    .unwrap_or_else(|join_error| {
                        Err(Rejection {
                            gates: None,
                            failure_policy: Default::default(),
                            problem: format!("compilation did not finish: {join_error}"),
                        })
                    })
            }
            Err(rejection) => Err(rejection),
        };
        match loaded {
            Ok(check) => {
                let (kind, digest) = (check.settings.gates.to_string(), check.digest());
                if self.checks.install(check) {
                    info!(check = %name, %kind, %digest, "check loaded");
                }
            }
            Err(rejection) => self.reject(&name, rejection).await,
        }
    }

    async fn reject(&self, name: &str, rejection: Rejection) {
        let kind = rejection
            .gates
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let problem = rejection.problem.clone();
        let unserved = self.checks.reject(name, rejection);
        let consequence = if unserved {
            "no good version exists: objects of the kind are held per its failurePolicy"
        } else {
            "the last good version keeps serving"
        };
        error!(check = %name, %kind, %problem, consequence, "check rejected");
        self.metrics
            .check_load_failures
            .get_or_create(&CheckLabels {
                kind,
                check: name.to_owned(),
            })
            .inc();
        self.writer
            .warn_on_config_map(name, "CheckRejected", &format!("{problem}; {consequence}"))
            .await;
    }

    fn delete(&self, name: &str) {
        if let Some(kind) = self.checks.remove(name) {
            info!(check = %name, %kind, "check removed");
        }
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
