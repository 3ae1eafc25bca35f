//! Which signatures a check must carry before it is compiled: one by a key of the operator's (its
//! `--verify-key` files: "only signed checks run", for every check), and one by the key its ConfigMap names
//! in `verify` — a Secret or ConfigMap in the check's namespace holding `cosign.pub`, as
//! `cosign generate-key-pair k8s://NAMESPACE/NAME` writes it. A check in a registry is verified against the
//! cosign signatures stored beside it; a check in ConfigMaps against the `sign-blob` signatures in its
//! `signature` key.

use crate::api_answer::api_answer;
use crate::config_map_format::SIGNATURE_KEY;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::{Client, ResourceExt};
use preflight_oci::{SignaturePolicy, VerificationKey};

/// The key of the public key in a key Secret or ConfigMap (cosign's name for it).
pub const PUBLIC_KEY_KEY: &str = "cosign.pub";

/// Where a check ConfigMap's `verify` key says its signing key is: `secret/NAME` or `configmap/NAME`, in
/// the check's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyReference {
    /// A Secret (what `cosign generate-key-pair k8s://…` writes; RBAC may grant it by name).
    Secret(String),
    /// A ConfigMap (a public key is no secret).
    ConfigMap(String),
}

impl KeyReference {
    /// Parses `secret/NAME` or `configmap/NAME`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let refused = || {
            format!(
                "verify `{text}` names no key: write secret/NAME or configmap/NAME (holding {PUBLIC_KEY_KEY})"
            )
        };
        let (kind, name) = text.trim().split_once('/').ok_or_else(refused)?;
        let name = name.trim();
        let valid_name = !name.is_empty()
            && name.len() <= 253
            && name.bytes().all(|byte| {
                byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-.".contains(&byte)
            });
        match kind.trim() {
            "secret" if valid_name => Ok(Self::Secret(name.to_owned())),
            "configmap" if valid_name => Ok(Self::ConfigMap(name.to_owned())),
            _ => Err(refused()),
        }
    }
}

/// Why a check's keys could not be read: the problem, and whether it may pass by itself (a key Secret not
/// created yet), so that the watcher tries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProblem {
    /// What is wrong, naming the Secret or ConfigMap.
    pub problem: String,
    /// The problem may pass by itself.
    pub retry: bool,
}

/// The operator's signing keys, and how to add a check's own.
#[derive(Debug, Clone, Default)]
pub struct Signing {
    operator_keys: Vec<VerificationKey>,
}

impl Signing {
    /// Every check must be signed by one of `operator_keys` (none: only checks whose ConfigMap says
    /// `verify` are verified).
    pub fn new(operator_keys: Vec<VerificationKey>) -> Self {
        Self { operator_keys }
    }

    /// What `config_map`'s check must be signed with: a key of the operator's, and the key its `verify`
    /// names (read now from the API server).
    pub async fn policy_for(
        &self,
        client: &Client,
        config_map: &ConfigMap,
    ) -> Result<SignaturePolicy, KeyProblem> {
        let mut policy = SignaturePolicy::default();
        policy.require_one_of(self.operator_keys.clone());
        let Some(text) = config_map.data.as_ref().and_then(|data| data.get("verify")) else {
            return Ok(policy);
        };
        let reference = KeyReference::parse(text).map_err(|problem| KeyProblem {
            problem,
            retry: false,
        })?;
        let namespace = config_map.namespace().unwrap_or_default();
        policy.require_one_of(vec![read_key(client, &namespace, &reference).await?]);
        Ok(policy)
    }
}

/// The public key `reference` names in `namespace`.
async fn read_key(
    client: &Client,
    namespace: &str,
    reference: &KeyReference,
) -> Result<VerificationKey, KeyProblem> {
    let (what, pem) = match reference {
        KeyReference::Secret(name) => {
            let what = format!("key Secret {namespace}/{name}");
            let secret = Api::<Secret>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await;
            let pem = secret.map(|secret| {
                secret.map(|secret| {
                    secret
                        .data
                        .and_then(|mut data| data.remove(PUBLIC_KEY_KEY))
                        .map(|bytes| bytes.0)
                })
            });
            (what, pem)
        }
        KeyReference::ConfigMap(name) => {
            let what = format!("key ConfigMap {namespace}/{name}");
            let config_map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await;
            let pem = config_map.map(|config_map| {
                config_map.map(|config_map| {
                    let text = config_map
                        .data
                        .and_then(|mut data| data.remove(PUBLIC_KEY_KEY))
                        .map(String::into_bytes);
                    text.or_else(|| {
                        config_map
                            .binary_data
                            .and_then(|mut data| data.remove(PUBLIC_KEY_KEY))
                            .map(|bytes| bytes.0)
                    })
                })
            });
            (what, pem)
        }
    };
    let problem = |problem: String, retry| KeyProblem { problem, retry };
    match pem {
        Err(error) => Err(problem(
            format!("cannot read {what}: {}", api_answer(&error)),
            true,
        )),
        Ok(None) => Err(problem(format!("{what} does not exist"), true)),
        Ok(Some(None)) => Err(problem(
            format!(
                "{what} has no {PUBLIC_KEY_KEY} (cosign generate-key-pair k8s://NAMESPACE/NAME writes it)"
            ),
            false,
        )),
        Ok(Some(Some(pem))) => {
            VerificationKey::from_pem(format!("{what} ({PUBLIC_KEY_KEY})"), &pem)
                .map_err(|error| problem(error, false))
        }
    }
}

/// The `sign-blob` signatures a check ConfigMap carries in `signature` (several, one per line, when
/// several keys must sign).
pub fn blob_signatures(config_map: &ConfigMap) -> Vec<&str> {
    config_map
        .data
        .as_ref()
        .and_then(|data| data.get(SIGNATURE_KEY))
        .map(|text| text.split_whitespace().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_names_a_secret_or_a_config_map() {
        let table = [
            (
                "secret/check-keys",
                Ok(KeyReference::Secret("check-keys".into())),
            ),
            (
                " configmap/keys.v1 ",
                Ok(KeyReference::ConfigMap("keys.v1".into())),
            ),
            ("secret/", Err(())),
            ("check-keys", Err(())),
            ("pod/keys", Err(())),
            ("secret/Keys", Err(())),
            ("secret/a/b", Err(())),
        ];
        for (text, expected) in table {
            let parsed = KeyReference::parse(text);
            match (&parsed, expected) {
                (Ok(reference), Ok(expected)) => assert_eq!(reference, &expected, "{text}"),
                (Err(problem), Err(())) => assert!(problem.contains("secret/NAME"), "{problem}"),
                _ => panic!("{text}: {parsed:?}"),
            }
        }
    }
}
