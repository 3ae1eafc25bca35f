//! Pause switches: gate a controller that does not embed the gate. Many controllers already stop
//! reconciling an object when a field or annotation says so (Flux `spec.suspend`, Cluster API `spec.paused`,
//! Crossplane's `crossplane.io/paused` and KEDA's `autoscaling.keda.sh/paused` annotations). While an
//! object's verdict is not proceed, the operator sets the kind's switch by server-side apply under its own
//! field manager; when the verdict turns proceed it withdraws its ownership, so the switch disappears unless
//! another manager also set it. It never overrides a switch another manager set to another value: the apply
//! conflicts, and that is reported once; the operator then stays quiet (no request, no Event) until who
//! holds the switch, its value or the verdict changes. It writes only on transitions (it reads its
//! ownership from `managedFields`).

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, PoisonError};

/// The field manager the operator applies pause switches as.
pub const PAUSE_FIELD_MANAGER: &str = "preflight-pause";

/// Where a kind's controller looks to know that it must not reconcile an object, and the value that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PauseSwitch {
    /// An annotation set to a value (`annotation:crossplane.io/paused=true`).
    Annotation {
        /// The annotation key.
        key: String,
        /// Its value while paused.
        value: String,
    },
    /// A field of the object set to a value (`field:spec.suspend=true`); `true`, `false`, numbers and
    /// `null` are JSON, anything else is a string.
    Field {
        /// The path, one element per level (`["spec", "suspend"]`).
        path: Vec<String>,
        /// Its value while paused.
        value: Value,
    },
}

impl PauseSwitch {
    /// Parses `annotation:KEY=VALUE` or `field:DOTTED.PATH=VALUE`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let invalid = || {
            format!(
                "pause `{text}` is not annotation:KEY=VALUE or field:PATH=VALUE \
                 (e.g. annotation:crossplane.io/paused=true, field:spec.suspend=true)"
            )
        };
        let (kind, rest) = text.trim().split_once(':').ok_or_else(invalid)?;
        let (target, value) = rest.split_once('=').ok_or_else(invalid)?;
        match kind {
            "annotation" if !target.is_empty() => Ok(Self::Annotation {
                key: target.to_owned(),
                value: value.to_owned(),
            }),
            "field" => {
                let path: Vec<String> = target.split('.').map(str::to_owned).collect();
                if path.iter().any(String::is_empty)
                    || matches!(
                        path[0].as_str(),
                        "metadata" | "status" | "apiVersion" | "kind"
                    )
                {
                    return Err(format!(
                        "pause `{text}`: the field must be in the object's own data, such as spec.suspend"
                    ));
                }
                let value = serde_json::from_str::<Value>(value)
                    .ok()
                    .filter(|parsed| {
                        !parsed.is_object() && !parsed.is_array() && !parsed.is_string()
                    })
                    .unwrap_or_else(|| Value::String(value.to_owned()));
                Ok(Self::Field { path, value })
            }
            _ => Err(invalid()),
        }
    }

    /// The server-side apply body that sets the switch on `object` (`set`) or owns nothing (`!set`, which
    /// withdraws the operator's ownership).
    fn apply_body(&self, object: &DynamicObject, resource: &ApiResource, set: bool) -> Value {
        let mut body = json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": {"name": object.name_any()},
        });
        if let Some(namespace) = object.namespace() {
            body["metadata"]["namespace"] = json!(namespace);
        }
        if set {
            match self {
                Self::Annotation { key, value } => {
                    body["metadata"]["annotations"] = json!({ key: value });
                }
                Self::Field { path, value } => {
                    let mut node = &mut body;
                    for step in path {
                        node = &mut node[step.as_str()];
                    }
                    *node = value.clone();
                }
            }
        }
        body
    }

    /// The switch's path in a `managedFields` FieldsV1 set (`f:metadata` → `f:annotations` → `f:KEY`).
    fn fields_path(&self) -> Vec<String> {
        match self {
            Self::Annotation { key, .. } => {
                vec![
                    "f:metadata".into(),
                    "f:annotations".into(),
                    format!("f:{key}"),
                ]
            }
            Self::Field { path, .. } => path.iter().map(|step| format!("f:{step}")).collect(),
        }
    }

    /// The field managers that own the switch on `object` now.
    fn owners<'a>(&self, object: &'a DynamicObject) -> impl Iterator<Item = &'a str> + 'a {
        let path = self.fields_path();
        object
            .meta()
            .managed_fields
            .iter()
            .flatten()
            .filter(move |entry| {
                entry.fields_v1.as_ref().is_some_and(|fields| {
                    path.iter()
                        .try_fold(&fields.0, |node, step| node.get(step))
                        .is_some()
                })
            })
            .filter_map(|entry| entry.manager.as_deref())
    }

    /// Whether the operator's field manager owns the switch on `object` now.
    fn owned_by_us(&self, object: &DynamicObject) -> bool {
        self.owners(object)
            .any(|manager| manager == PAUSE_FIELD_MANAGER)
    }

    /// Who holds the switch on `object` and what it says, as a fingerprint: a conflict reported under one
    /// fingerprint is not tried again until it changes.
    fn holders(&self, object: &DynamicObject) -> u64 {
        let mut hasher = DefaultHasher::new();
        let mut owners: Vec<&str> = self.owners(object).collect();
        owners.sort_unstable();
        owners.hash(&mut hasher);
        let value = match self {
            Self::Annotation { key, .. } => object
                .annotations()
                .get(key)
                .map(|value| Value::String(value.clone())),
            Self::Field { path, .. } => path
                .iter()
                .try_fold(&object.data, |node, step| node.get(step))
                .cloned(),
        };
        value.map(|value| value.to_string()).hash(&mut hasher);
        hasher.finish()
    }
}

impl fmt::Display for PauseSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Annotation { key, value } => write!(f, "annotation:{key}={value}"),
            Self::Field { path, value } => {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                write!(f, "field:{}={value}", path.join("."))
            }
        }
    }
}

/// What syncing a switch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PauseSync {
    /// The switch already said what the verdict wants, or its conflict was reported already and nothing
    /// changed since: no request.
    Unchanged,
    /// The switch was set (the verdict is not proceed).
    Set,
    /// The operator's ownership was withdrawn (the verdict is proceed).
    Withdrawn,
    /// Another manager owns the switch with another value: left alone.
    OwnedElsewhere(String),
}

/// The conflicts already reported, per object (uid): the fingerprint of who held the switch then.
#[derive(Debug, Default)]
pub(crate) struct ReportedConflicts {
    by_object: Mutex<HashMap<String, u64>>,
}

impl ReportedConflicts {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.by_object
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn reported(&self, uid: &str) -> Option<u64> {
        self.lock().get(uid).copied()
    }

    fn remember(&self, uid: String, holders: u64) {
        self.lock().insert(uid, holders);
    }

    /// Forgets `uid`'s conflict: its verdict changed, the switch is ours, or the object is gone.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// Makes `object`'s switch say what the verdict wants: set while not proceeding, withdrawn when proceeding.
/// Writes only when the operator's ownership has to change, and does not try again a conflict `conflicts`
/// already holds while the switch's holders and value are the same.
pub(crate) async fn sync(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    object: &DynamicObject,
    switch: &PauseSwitch,
    proceed: bool,
    conflicts: &ReportedConflicts,
) -> Result<PauseSync, kube::Error> {
    let set = !proceed;
    let uid = object.uid().unwrap_or_default();
    if switch.owned_by_us(object) == set {
        conflicts.forget(&uid);
        return Ok(PauseSync::Unchanged);
    }
    let holders = switch.holders(object);
    if set && conflicts.reported(&uid) == Some(holders) {
        return Ok(PauseSync::Unchanged);
    }
    let params = PatchParams::apply(PAUSE_FIELD_MANAGER);
    let body = switch.apply_body(object, resource, set);
    match api
        .patch(&object.name_any(), &params, &Patch::Apply(body))
        .await
    {
        Ok(_) => {
            conflicts.forget(&uid);
            Ok(if set {
                PauseSync::Set
            } else {
                PauseSync::Withdrawn
            })
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            conflicts.remember(uid, holders);
            Ok(PauseSync::OwnedElsewhere(status.message))
        }
        Err(error) => Err(error),
    }
}

/// The switch every check of a kind agrees on: `Ok(None)` when none sets one, an error naming the
/// disagreement when they differ.
pub(crate) fn agreed<'a>(
    switches: impl IntoIterator<Item = (&'a str, Option<&'a PauseSwitch>)>,
) -> Result<Option<PauseSwitch>, String> {
    let switches: Vec<(&str, Option<&PauseSwitch>)> = switches.into_iter().collect();
    let first = switches.first().and_then(|(_, switch)| *switch);
    if switches.iter().all(|(_, switch)| *switch == first) {
        return Ok(first.cloned());
    }
    let said: Vec<String> = switches
        .iter()
        .map(|(name, switch)| match switch {
            Some(switch) => format!("{name} says {switch}"),
            None => format!("{name} sets none"),
        })
        .collect();
    Err(format!(
        "the checks of this kind disagree on its pause switch ({}); none is applied until they agree",
        said.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use kube::api::GroupVersionKind;

    fn resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("source.toolkit.example", "v1", "Repo"),
            "repos",
        )
    }

    #[test]
    fn parses_the_presets_and_refuses_the_rest() {
        let field = |path: &[&str], value: Value| PauseSwitch::Field {
            path: path.iter().map(|step| step.to_string()).collect(),
            value,
        };
        assert_eq!(
            PauseSwitch::parse("field:spec.suspend=true"),
            Ok(field(&["spec", "suspend"], json!(true)))
        );
        assert_eq!(
            PauseSwitch::parse("field:spec.paused=true"),
            Ok(field(&["spec", "paused"], json!(true)))
        );
        assert_eq!(
            PauseSwitch::parse("field:spec.mode=Hold"),
            Ok(field(&["spec", "mode"], json!("Hold")))
        );
        assert_eq!(
            PauseSwitch::parse("annotation:crossplane.io/paused=true"),
            Ok(PauseSwitch::Annotation {
                key: "crossplane.io/paused".into(),
                value: "true".into()
            })
        );
        for bad in [
            "spec.suspend=true",
            "field:spec.suspend",
            "field:status.paused=true",
            "field:metadata.labels.x=y",
            "field:spec..x=1",
            "label:x=y",
            "annotation:=true",
        ] {
            assert!(PauseSwitch::parse(bad).is_err(), "{bad}");
        }
        for text in [
            "annotation:autoscaling.keda.sh/paused=true",
            "field:spec.suspend=true",
        ] {
            assert_eq!(PauseSwitch::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn apply_bodies_own_the_switch_or_nothing() {
        let object = DynamicObject::new("podinfo", &resource()).within("apps");
        let suspend = PauseSwitch::parse("field:spec.suspend=true").unwrap();
        assert_eq!(
            suspend.apply_body(&object, &resource(), true),
            json!({"apiVersion": "source.toolkit.example/v1", "kind": "Repo",
                "metadata": {"name": "podinfo", "namespace": "apps"}, "spec": {"suspend": true}})
        );
        assert_eq!(
            suspend.apply_body(&object, &resource(), false),
            json!({"apiVersion": "source.toolkit.example/v1", "kind": "Repo",
                "metadata": {"name": "podinfo", "namespace": "apps"}})
        );
        let paused = PauseSwitch::parse("annotation:crossplane.io/paused=true").unwrap();
        assert_eq!(
            paused.apply_body(&object, &resource(), true)["metadata"]["annotations"],
            json!({"crossplane.io/paused": "true"})
        );
    }

    #[test]
    fn ownership_is_read_from_managed_fields() {
        let mut object = DynamicObject::new("podinfo", &resource()).within("apps");
        let paused = PauseSwitch::parse("annotation:crossplane.io/paused=true").unwrap();
        let entry = |manager: &str, fields: Value| ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        };
        let annotation = json!({"f:metadata": {"f:annotations": {"f:crossplane.io/paused": {}}}});
        assert!(!paused.owned_by_us(&object));
        object.metadata.managed_fields = Some(vec![entry("kubectl", annotation.clone())]);
        assert!(!paused.owned_by_us(&object), "someone else's");
        let theirs = paused.holders(&object);
        object.metadata.managed_fields = Some(vec![entry(PAUSE_FIELD_MANAGER, annotation.clone())]);
        assert!(paused.owned_by_us(&object));
        assert_ne!(paused.holders(&object), theirs, "another owner");
        object.metadata.managed_fields = Some(vec![entry("kubectl", annotation)]);
        assert_eq!(paused.holders(&object), theirs, "the same owner and value");
        object.metadata.annotations =
            Some([("crossplane.io/paused".into(), "false".into())].into());
        assert_ne!(paused.holders(&object), theirs, "another value");
        let suspend = PauseSwitch::parse("field:spec.suspend=true").unwrap();
        assert!(!suspend.owned_by_us(&object));
    }

    #[test]
    fn the_checks_of_a_kind_must_agree() {
        let suspend = PauseSwitch::parse("field:spec.suspend=true").unwrap();
        let paused = PauseSwitch::parse("annotation:crossplane.io/paused=true").unwrap();
        assert_eq!(agreed([]), Ok(None));
        assert_eq!(agreed([("a", None), ("b", None)]), Ok(None));
        assert_eq!(
            agreed([("a", Some(&suspend)), ("b", Some(&suspend))]),
            Ok(Some(suspend.clone()))
        );
        let disagreement = agreed([("a", Some(&suspend)), ("b", Some(&paused))]).unwrap_err();
        assert!(
            disagreement.contains("a says field:spec.suspend=true"),
            "{disagreement}"
        );
        assert!(agreed([("a", Some(&suspend)), ("b", None)]).is_err());
    }
}
