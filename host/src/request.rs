//! What the engine hands a check: the object and configuration as JSON, the object's identity and the time.

use std::time::SystemTime;

/// The input of one evaluation.
#[derive(Debug, Clone)]
pub struct Request {
    /// The object, as JSON.
    pub object: String,
    /// The check's configuration, as JSON (`{}` when none).
    pub config: String,
    /// The object's identity.
    pub target: Target,
    /// The time the check should take as "now".
    pub now: SystemTime,
}

/// The identity of the object being checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// API group, empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl Target {
    /// Reads the identity from an object's `apiVersion`, `kind`, `metadata.namespace` and `metadata.name`.
    pub fn of_object(object: &serde_json::Value) -> Self {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let api_version = text("/apiVersion");
        let (group, version) = match api_version.rsplit_once('/') {
            Some((group, version)) => (group.to_owned(), version.to_owned()),
            None => (String::new(), api_version),
        };
        let namespace = text("/metadata/namespace");
        Self {
            group,
            version,
            kind: text("/kind"),
            namespace: (!namespace.is_empty()).then_some(namespace),
            name: text("/metadata/name"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_group_version_kind_namespace_and_name() {
        let object = serde_json::json!({"apiVersion": "apps.example.com/v1", "kind": "App",
            "metadata": {"name": "a", "namespace": "ns"}});
        let target = Target::of_object(&object);
        assert_eq!(
            target,
            Target {
                group: "apps.example.com".into(),
                version: "v1".into(),
                kind: "App".into(),
                namespace: Some("ns".into()),
                name: "a".into()
            }
        );
        let core = Target::of_object(
            &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        );
        assert_eq!(
            (core.group.as_str(), core.version.as_str(), core.namespace),
            ("", "v1", None)
        );
    }
}
