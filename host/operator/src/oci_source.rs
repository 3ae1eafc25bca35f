//! Checks named by `source: oci://…`: the watcher pulls the component before the ConfigMap is parsed,
//! with the pull secret the ConfigMap names (a `kubernetes.io/dockerconfigjson` Secret in its namespace),
//! through a cache kept by digest on the operator's disk. A digest already pulled is read from the cache
//! without asking the registry; a `followTag` check whose registry fails serves the digest the tag last
//! resolved to, and that is reported like every other fallback. A pull the registry refused, or whose pull
//! secret is missing, is tried again after a backoff (see `PulledComponent::retry`). A check whose signature
//! policy asks for signatures is verified against the cosign signatures stored beside it (kept in the
//! cache too, so that it verifies again while its registry is down).
//!
//! The cache keeps what a restart would load: per check, the version it last pulled. Once the initial
//! loads are done, and whenever a check pulls another version or goes, every other version is removed
//! (the cache is on an emptyDir whose size limit evicts the pod).

use crate::api_answer::api_answer;
use crate::check_source::oci_reference;
use crate::config_map_format::MAX_COMPONENT_BYTES;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::{Client, ResourceExt};
use preflight_oci::{
    ArtifactCache, Credentials, OciError, Origin, Registry, RegistryOptions, SignaturePolicy,
};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::info;

/// The key of a pull secret's docker config.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// Pulls the components of checks in registries.
pub(crate) struct OciSources {
    registry: Registry,
    cache: Option<ArtifactCache>,
    /// Per check (`namespace/name`), the manifest digest it last pulled.
    in_use: Mutex<HashMap<String, String>>,
    /// Whether the initial loads are done: before, `in_use` is incomplete and nothing is swept.
    synced: AtomicBool,
    /// Pulls hold it shared from their first write to the cache until they record what they pulled; a
    /// sweep takes it alone, without waiting: when pulls are in flight, the last of them sweeps.
    writing: tokio::sync::RwLock<()>,
    /// A sweep was put off for pulls in flight.
    sweep_due: AtomicBool,
}

/// A check's component as pulled: the bytes (or why there are none), and what to report beside bytes
/// that came from the cache because the registry failed.
pub(crate) struct PulledComponent {
    /// The component, or the problem that rejects this version.
    pub component: Result<Vec<u8>, String>,
    /// Set when the component is the cached one a failing registry left.
    pub fallback: Option<String>,
    /// Set when the component's signatures do not meet the policy (or could not be read): it must not be
    /// compiled.
    pub unsigned: Option<String>,
    /// The failure may pass by itself (the registry's answer, a pull secret not there yet, a registry
    /// that failed while its cached copy serves): the watcher pulls again after a backoff, as the kubelet
    /// does with images, until the registry answers.
    pub retry: bool,
}

impl OciSources {
    /// Pulls with `options`, caching in `cache` (none: every load asks the registry).
    pub fn new(options: &RegistryOptions, cache: Option<ArtifactCache>) -> Self {
        Self {
            registry: Registry::new(options),
            cache,
            in_use: Mutex::default(),
            synced: AtomicBool::new(false),
            writing: tokio::sync::RwLock::new(()),
            sweep_due: AtomicBool::new(false),
        }
    }

    /// The initial loads are done: from now on the cache keeps only what the checks use.
    pub fn initial_loads_done(&self) {
        self.synced.store(true, Ordering::SeqCst);
        self.sweep();
    }

    /// `check` is gone, or no longer from a registry: the version it pulled need not be kept (unless
    /// another check uses it). Whether it had pulled one, so that a [`Self::sweep`] is due.
    pub fn forget(&self, check: &str) -> bool {
        self.in_use().remove(check).is_some()
    }

    /// Removes every cached version no check uses, once the initial loads are done (put off while pulls
    /// are in flight).
    pub fn sweep(&self) {
        let Some(cache) = &self.cache else {
            return;
        };
        if !self.synced.load(Ordering::SeqCst) {
            return;
        }
        let Ok(_alone) = self.writing.try_write() else {
            self.sweep_due.store(true, Ordering::SeqCst);
            return;
        };
        let in_use: Vec<String> = self.in_use().values().cloned().collect();
        let removed = cache.retain(&in_use.iter().map(String::as_str).collect::<HashSet<_>>());
        if removed > 0 {
            info!(
                removed,
                kept = in_use.len(),
                "removed cached check versions no check uses"
            );
        }
    }

    fn in_use(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.in_use
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The component of `config_map` if it names a valid `source` (`None` otherwise: the parser reports a
    /// bad one), its signatures verified against `policy` when one is given.
    pub async fn pull(
        &self,
        client: &Client,
        config_map: &ConfigMap,
        policy: Option<&SignaturePolicy>,
    ) -> Option<PulledComponent> {
        let namespace = config_map.namespace().unwrap_or_default();
        let check = format!("{namespace}/{}", config_map.name_any());
        let Some(Ok(reference)) = oci_reference(config_map) else {
            if self.forget(&check) {
                self.sweep();
            }
            return None;
        };
        let secret = config_map
            .data
            .as_ref()
            .and_then(|data| data.get("pullSecret"))
            .map(|name| name.trim().to_owned());
        let credentials = match secret {
            None => Credentials::Anonymous,
            Some(name) => match docker_config(client, &namespace, &name).await {
                Ok(json) => Credentials::DockerConfigJson(json),
                Err(problem) => {
                    return Some(PulledComponent {
                        component: Err(problem),
                        fallback: None,
                        unsigned: None,
                        retry: true,
                    });
                }
            },
        };
        let pulling = self.writing.read().await;
        let fetched = preflight_oci::fetch(
            &self.registry,
            self.cache.as_ref(),
            &reference,
            &credentials,
            MAX_COMPONENT_BYTES as u64,
        )
        .await;
        let mut another_version = false;
        let pulled = match fetched {
            Ok(fetched) => {
                info!(check, source = %reference, pinned = %fetched.reference, "check pulled");
                if let Some(digest) = fetched.reference.digest() {
                    let before = self.in_use().insert(check, digest.to_owned());
                    another_version = before.as_deref() != Some(digest);
                }
                let fallback = match fetched.origin {
                    Origin::CacheAfterRegistryFailure(error) => Some(format!(
                        "{}; {reference} last resolved to {}",
                        error.describe(),
                        fetched.reference
                    )),
                    Origin::Registry | Origin::Cache => None,
                };
                let verified = match policy {
                    Some(policy) => {
                        preflight_oci::verify_signatures(
                            &self.registry,
                            self.cache.as_ref(),
                            &fetched.reference,
                            &credentials,
                            policy,
                        )
                        .await
                    }
                    None => Ok(()),
                };
                PulledComponent {
                    component: Ok(fetched.pulled.component),
                    retry: fallback.is_some() || matches!(verified, Err(OciError::Registry { .. })),
                    fallback,
                    unsigned: verified.err().map(|error| error.describe()),
                }
            }
            Err(error) => PulledComponent {
                retry: matches!(error, OciError::Registry { .. }),
                component: Err(error.describe()),
                fallback: None,
                unsigned: None,
            },
        };
        drop(pulling);
        if another_version | self.sweep_due.swap(false, Ordering::SeqCst) {
            self.sweep();
        }
        Some(pulled)
    }
}

/// The docker config of pull secret `name` in `namespace`.
async fn docker_config(client: &Client, namespace: &str, name: &str) -> Result<Vec<u8>, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets
        .get_opt(name)
        .await
        .map_err(|error| {
            format!(
                "cannot read pull secret {namespace}/{name}: {}",
                api_answer(&error)
            )
        })?
        .ok_or_else(|| format!("pull secret {namespace}/{name} does not exist"))?;
    secret
        .data
        .and_then(|mut data| data.remove(DOCKER_CONFIG_KEY))
        .map(|bytes| bytes.0)
        .ok_or_else(|| {
            format!(
                "pull secret {namespace}/{name} has no {DOCKER_CONFIG_KEY} (kubectl create secret docker-registry)"
            )
        })
}
