//! Which Kubernetes object a preflight check request is about (the contract's `target`): its API group,
//! version, kind, namespace and name, read from the object itself. One rule, used by the host when it builds
//! a request and by the guest SDK's testing helpers when they build one the way the host would.

#![warn(missing_docs)]

/// Which object is being checked: the contract's `target` record. The host's engine and the guest SDK both
/// re-export this type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The API group, empty for the core group.
    pub group: String,
    /// The API version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Database`.
    pub kind: String,
    /// The namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl Target {
    /// Reads `apiVersion` (`group/version`, or `version` for the core group), `kind`, `metadata.namespace`
    /// and `metadata.name`; what is missing is empty (an empty namespace is none).
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
        assert_eq!(
            Target::of_object(&object),
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
        assert_eq!(
            Target::of_object(&serde_json::json!("not an object")),
            Target::default()
        );
    }
}
