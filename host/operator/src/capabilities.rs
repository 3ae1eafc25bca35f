//! What a check's ConfigMap grants it beyond its object (contract 0.2), as written and as enforced: the
//! `http` key (outbound HTTP: allow-list, limits, credentials from a Secret, a private CA) and the `lookups`
//! key (which kinds of objects it may read, whether beyond the gated object's namespace, which Secrets by
//! name). Nothing is granted without these keys.
//!
//! ```yaml
//! http: |
//!   allow: ["https://deps.example.com/api"]
//!   allowPrivateNetworks: false      # or true, or ["10.20.0.0/16"]
//!   timeout: 2s
//!   maxResponseSize: 64KiB
//!   maxRequests: 4
//!   credentials: {secret: deps-token, key: token, header: Authorization, prefix: "Bearer ",
//!                 for: ["https://deps.example.com"]}
//! lookups: |
//!   kinds: ["v1/ConfigMap", "db.example.com/v1/Database"]
//!   clusterScope: false
//!   secrets: ["db-credentials"]
//! ```

use crate::api_answer::api_answer;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use preflight_engine::{Grants, HttpGrant, HttpPolicy, InjectedHeader, ObjectKind, UrlPattern};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// The `http` key, as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpKey {
    allow: Vec<String>,
    allow_private_networks: Option<PrivateNetworksKey>,
    timeout: Option<String>,
    max_response_size: Option<String>,
    max_requests: Option<u32>,
    cache_entries: Option<usize>,
    credentials: Option<CredentialsKey>,
    ca_bundle: Option<String>,
}

/// `allowPrivateNetworks`: all of them, or the CIDRs listed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
enum PrivateNetworksKey {
    All(bool),
    Listed(Vec<String>),
}

/// Where the credentials of outbound requests come from, and where they go.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CredentialsKey {
    secret: String,
    key: String,
    #[serde(default = "authorization")]
    header: String,
    #[serde(default)]
    prefix: String,
    #[serde(default, rename = "for")]
    only_to: Vec<String>,
}

fn authorization() -> String {
    "Authorization".to_owned()
}

/// Outbound HTTP as granted by a ConfigMap, checked when the ConfigMap is read; the credentials are read
/// from their Secret when the check is loaded ([`HttpSettings::grant`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    allow: Vec<UrlPattern>,
    private_networks: Vec<ipnet::IpNet>,
    timeout: Duration,
    max_response_bytes: usize,
    max_requests: u32,
    cache_entries: usize,
    credentials: Option<Credentials>,
    ca_bundle: Option<String>,
}

/// A header whose value the operator reads from a Secret in the check's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The Secret's name.
    pub secret: String,
    /// The key in the Secret's data.
    pub key: String,
    /// The header to set, e.g. `Authorization`.
    pub header: http::HeaderName,
    /// Text put before the secret value, e.g. `Bearer `.
    pub prefix: String,
    /// The destinations it is sent to (`for`; the one allowed destination when `allow` lists one).
    pub only_to: Vec<UrlPattern>,
}

impl HttpSettings {
    /// Parses the `http` key (YAML or JSON).
    pub fn parse(text: &str) -> Result<Self, String> {
        let key: HttpKey =
            serde_norway::from_str(text).map_err(|error| format!("http: {error}"))?;
        if key.allow.is_empty() {
            return Err("http: `allow` lists no destination".to_owned());
        }
        let patterns = |patterns: &[String]| {
            patterns
                .iter()
                .map(|pattern| UrlPattern::parse(pattern))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| format!("http: {error}"))
        };
        let allow = patterns(&key.allow)?;
        let private_networks = match &key.allow_private_networks {
            None | Some(PrivateNetworksKey::All(false)) => Vec::new(),
            Some(PrivateNetworksKey::All(true)) => HttpPolicy::all_private_networks(),
            Some(PrivateNetworksKey::Listed(networks)) => networks
                .iter()
                .map(|network| {
                    network.parse::<ipnet::IpNet>().map_err(|_| {
                        format!(
                            "http: allowPrivateNetworks: `{network}` is not a CIDR such as 10.20.0.0/16"
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let timeout = match &key.timeout {
            None => HttpPolicy::DEFAULT_REQUEST_TIMEOUT,
            Some(text) => humantime::parse_duration(text)
                .ok()
                .filter(|timeout| !timeout.is_zero())
                .ok_or_else(|| format!("http: timeout `{text}` is not a duration such as 2s"))?,
        };
        let max_response_bytes = match &key.max_response_size {
            None => HttpPolicy::DEFAULT_MAX_RESPONSE_BYTES,
            Some(text) => preflight_engine::parse_size(text)
                .map_err(|error| format!("http: maxResponseSize: {error}"))?,
        };
        let credentials = key
            .credentials
            .map(|credentials| {
                let header = http::HeaderName::try_from(credentials.header.as_str())
                    .map_err(|_| format!("http: `{}` is not a header name", credentials.header))?;
                let only_to = match (credentials.only_to.is_empty(), allow.as_slice()) {
                    (false, _) => patterns(&credentials.only_to)?,
                    (true, [only]) => vec![only.clone()],
                    (true, _) => {
                        return Err(format!(
                            "http: credentials: `allow` lists {} destinations; name the ones the \
                             credentials go to with `for` (they are never sent anywhere else)",
                            allow.len()
                        ));
                    }
                };
                Ok::<_, String>(Credentials {
                    secret: credentials.secret,
                    key: credentials.key,
                    header,
                    prefix: credentials.prefix,
                    only_to,
                })
            })
            .transpose()?;
        Ok(Self {
            allow,
            private_networks,
            timeout,
            max_response_bytes,
            max_requests: key.max_requests.unwrap_or(HttpPolicy::DEFAULT_MAX_REQUESTS),
            cache_entries: key
                .cache_entries
                .unwrap_or(HttpPolicy::DEFAULT_CACHE_ENTRIES),
            credentials,
            ca_bundle: key.ca_bundle,
        })
    }

    /// The Secret the credentials come from, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// The grant the engine enforces, with the credentials read from their Secret in `namespace` (the
    /// check's ConfigMap's). Fails, naming the Secret and key, when they cannot be read.
    pub async fn grant(
        &self,
        secrets: &Api<Secret>,
        namespace: &str,
    ) -> Result<Arc<HttpGrant>, String> {
        let secret = match &self.credentials {
            Some(credentials) => {
                let where_ = format!("Secret {namespace}/{}", credentials.secret);
                let secret = secrets
                    .get_opt(&credentials.secret)
                    .await
                    .map_err(|error| {
                        format!(
                            "http credentials: cannot read {where_}: {}",
                            api_answer(&error)
                        )
                    })?
                    .ok_or_else(|| format!("http credentials: {where_} does not exist"))?;
                Some((where_, secret))
            }
            None => None,
        };
        self.grant_with(
            secret
                .as_ref()
                .map(|(where_, secret)| (where_.as_str(), secret)),
        )
    }

    /// The grant the engine enforces, with the credentials read from `secret` (where it came from, for
    /// messages, and the Secret): what the operator reads from the API server, or the CLI from a file.
    pub fn grant_with(&self, secret: Option<(&str, &Secret)>) -> Result<Arc<HttpGrant>, String> {
        let mut policy = HttpPolicy::allowing(self.allow.clone());
        policy.private_networks.clone_from(&self.private_networks);
        policy.request_timeout = self.timeout;
        policy.max_response_bytes = self.max_response_bytes;
        policy.max_requests_per_evaluation = self.max_requests;
        policy.cache_entries = self.cache_entries;
        policy.extra_roots_pem = self.ca_bundle.as_ref().map(|pem| pem.as_bytes().to_vec());
        if let Some(credentials) = &self.credentials {
            let (where_, secret) = secret.ok_or_else(|| {
                format!(
                    "http credentials: Secret {} was not given",
                    credentials.secret
                )
            })?;
            let value = secret
                .data
                .as_ref()
                .and_then(|data| data.get(&credentials.key))
                .map(|value| value.0.clone())
                .or_else(|| {
                    secret
                        .string_data
                        .as_ref()
                        .and_then(|data| data.get(&credentials.key))
                        .map(|value| value.as_bytes().to_vec())
                })
                .ok_or_else(|| {
                    format!(
                        "http credentials: {where_} has no key `{}`",
                        credentials.key
                    )
                })?;
            let mut header = credentials.prefix.as_bytes().to_vec();
            header.extend_from_slice(&value);
            let mut value = http::HeaderValue::from_bytes(&header).map_err(|_| {
                format!(
                    "http credentials: {where_} key `{}` is not a valid header value",
                    credentials.key
                )
            })?;
            value.set_sensitive(true);
            policy.headers.push(InjectedHeader {
                name: credentials.header.clone(),
                value,
                only_to: credentials.only_to.clone(),
            });
        }
        HttpGrant::new(policy)
            .map(Arc::new)
            .map_err(|error| format!("http: {error}"))
    }
}

/// The `lookups` key, as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LookupsKey {
    kinds: Vec<String>,
    #[serde(default)]
    cluster_scope: bool,
    #[serde(default)]
    secrets: Vec<String>,
    per_evaluation: Option<u32>,
}

/// Lookups as granted by a ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupSettings {
    /// Kinds the check may get and list (Secrets only by name, see `secrets`).
    pub kinds: Vec<ObjectKind>,
    /// Whether the check may read beyond the gated object's namespace.
    pub cluster_scope: bool,
    /// Secrets the check may get, by name (never listed).
    pub secrets: Vec<String>,
    /// Lookups per evaluation (the engine's default, 16, when the key does not say).
    pub per_evaluation: u32,
}

impl LookupSettings {
    /// Parses the `lookups` key (YAML or JSON). Kinds are written `apiVersion/Kind`: `v1/ConfigMap`,
    /// `db.example.com/v1/Database`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let key: LookupsKey =
            serde_norway::from_str(text).map_err(|error| format!("lookups: {error}"))?;
        let mut kinds = key
            .kinds
            .iter()
            .map(|written| {
                let parts: Vec<&str> = written.split('/').collect();
                let (group, version, kind) = match parts.as_slice() {
                    [version, kind] => ("", *version, *kind),
                    [group, version, kind] => (*group, *version, *kind),
                    _ => {
                        return Err(format!(
                            "lookups: `{written}` is not apiVersion/Kind, e.g. v1/ConfigMap"
                        ));
                    }
                };
                if version.is_empty() || kind.is_empty() {
                    return Err(format!(
                        "lookups: `{written}` is not apiVersion/Kind, e.g. v1/ConfigMap"
                    ));
                }
                Ok(ObjectKind {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    kind: kind.to_owned(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !key.secrets.is_empty() {
            kinds.push(secret_kind());
        }
        if kinds.is_empty() {
            return Err("lookups: `kinds` lists no kind".to_owned());
        }
        Ok(Self {
            kinds,
            cluster_scope: key.cluster_scope,
            secrets: key.secrets,
            per_evaluation: key
                .per_evaluation
                .unwrap_or(Grants::DEFAULT_LOOKUPS_PER_EVALUATION),
        })
    }
}

/// `v1/Secret`.
pub(crate) fn secret_kind() -> ObjectKind {
    ObjectKind {
        group: String::new(),
        version: "v1".to_owned(),
        kind: "Secret".to_owned(),
    }
}

/// Everything a check is granted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapabilitySettings {
    /// Outbound HTTP, when the ConfigMap has an `http` key.
    pub http: Option<HttpSettings>,
    /// Lookups, when the ConfigMap has a `lookups` key.
    pub lookups: Option<LookupSettings>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_key_reads_every_setting_and_names_mistakes() {
        let settings = HttpSettings::parse(
            "allow: [\"http://127.0.0.1:8080/deps\"]\ntimeout: 500ms\nmaxResponseSize: 4KiB\nmaxRequests: 2\n\
             credentials: {secret: token, key: t, prefix: \"Bearer \"}",
        )
        .unwrap();
        assert!(settings.allow[0].matches("http", "127.0.0.1", 8080, "/deps/x"));
        assert_eq!(settings.timeout, Duration::from_millis(500));
        assert_eq!(
            (settings.max_response_bytes, settings.max_requests),
            (4096, 2)
        );
        let credentials = settings.credentials().unwrap();
        assert_eq!(
            (credentials.header.as_str(), credentials.prefix.as_str()),
            ("authorization", "Bearer ")
        );
        assert_eq!(
            credentials.only_to, settings.allow,
            "one allowed destination: the credentials go there"
        );
        assert!(settings.private_networks.is_empty(), "refused by default");

        let two = HttpSettings::parse(
            "allow: [\"https://a.example.com\", \"https://b.example.com\"]\n\
             allowPrivateNetworks: [\"10.20.0.0/16\"]\n\
             credentials: {secret: s, key: k, for: [\"https://a.example.com\"]}",
        )
        .unwrap();
        let only_to = &two.credentials().unwrap().only_to;
        assert!(only_to.len() == 1 && only_to[0].matches("https", "a.example.com", 443, "/"));
        assert_eq!(
            two.private_networks,
            ["10.20.0.0/16".parse::<ipnet::IpNet>().unwrap()]
        );
        let all =
            HttpSettings::parse("allow: [\"https://h\"]\nallowPrivateNetworks: true").unwrap();
        assert_eq!(all.private_networks, HttpPolicy::all_private_networks());

        for (text, says) in [
            ("allow: []", "lists no destination"),
            ("allow: [\"deps.example.com\"]", "needs a scheme"),
            ("allow: [\"https://h\"]\ntimeout: soon", "timeout `soon`"),
            (
                "allow: [\"https://h\"]\nmaxResponseSize: lots",
                "maxResponseSize",
            ),
            (
                "allow: [\"https://h\"]\nallowRedirects: true",
                "unknown field `allowRedirects`",
            ),
            (
                "allow: [\"https://h\"]\ncredentials: {secret: s, key: k, header: \"bad header\"}",
                "not a header name",
            ),
            (
                "allow: [\"https://a\", \"https://b\"]\ncredentials: {secret: s, key: k}",
                "name the ones the credentials go to with `for`",
            ),
            (
                "allow: [\"https://h\"]\nallowPrivateNetworks: [\"10.0.0.0\"]",
                "is not a CIDR",
            ),
        ] {
            let error = HttpSettings::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn the_lookups_key_reads_kinds_scope_and_secrets() {
        let settings = LookupSettings::parse(
            "kinds: [v1/ConfigMap, db.example.com/v1/Database]\nsecrets: [db-credentials]\nperEvaluation: 3",
        )
        .unwrap();
        let kinds: Vec<String> = settings.kinds.iter().map(ToString::to_string).collect();
        assert_eq!(
            kinds,
            ["v1/ConfigMap", "db.example.com/v1/Database", "v1/Secret"]
        );
        assert!(!settings.cluster_scope);
        assert_eq!(settings.per_evaluation, 3);
        for (text, says) in [
            ("kinds: [ConfigMap]", "not apiVersion/Kind"),
            ("kinds: []", "lists no kind"),
            (
                "kinds: [v1/ConfigMap]\nnamespaces: [a]",
                "unknown field `namespaces`",
            ),
        ] {
            let error = LookupSettings::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
