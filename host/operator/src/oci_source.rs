//! Checks named by `source: oci://…`: the watcher pulls the component before the ConfigMap is parsed,
//! with the pull secret the ConfigMap names (a `kubernetes.io/dockerconfigjson` Secret in its namespace),
//! through a cache kept by digest on the operator's disk. A digest already pulled is read from the cache
//! without asking the registry; a `followTag` check whose registry fails serves the digest the tag last
//! resolved to, and that is reported like every other fallback. A pull the registry refused, or whose pull
//! secret is missing, is tried again after a backoff (see `PulledComponent::retry`). A check whose signature
//! policy asks for signatures is verified against the cosign signatures stored beside it (kept in the
//! cache too, so that it verifies again while its registry is down).

use crate::check_source::oci_reference;
use crate::config_map_format::MAX_COMPONENT_BYTES;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::{Client, ResourceExt};
use preflight_oci::{
    ArtifactCache, Credentials, OciError, Origin, Registry, RegistryOptions, SignaturePolicy,
};
use tracing::info;

/// The key of a pull secret's docker config.
const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// Pulls the components of checks in registries.
pub(crate) struct OciSources {
    registry: Registry,
    cache: Option<ArtifactCache>,
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
        }
    }

    /// The component of `config_map` if it names a valid `source` (`None` otherwise: the parser reports a
    /// bad one), its signatures verified against `policy` when one is given.
    pub async fn pull(
        &self,
        client: &Client,
        config_map: &ConfigMap,
        policy: Option<&SignaturePolicy>,
    ) -> Option<PulledComponent> {
        let reference = oci_reference(config_map)?.ok()?;
        let namespace = config_map.namespace().unwrap_or_default();
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
        let fetched = preflight_oci::fetch(
            &self.registry,
            self.cache.as_ref(),
            &reference,
            &credentials,
            MAX_COMPONENT_BYTES as u64,
        )
        .await;
        Some(match fetched {
            Ok(fetched) => {
                let check = format!("{namespace}/{}", config_map.name_any());
                info!(check, source = %reference, pinned = %fetched.reference, "check pulled");
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
        })
    }
}

/// The docker config of pull secret `name` in `namespace`.
async fn docker_config(client: &Client, namespace: &str, name: &str) -> Result<Vec<u8>, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets
        .get_opt(name)
        .await
        .map_err(|error| format!("cannot read pull secret {namespace}/{name}: {error}"))?
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
