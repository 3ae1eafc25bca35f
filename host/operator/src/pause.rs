//! Pause switches: gate a controller that does not embed the gate. Many controllers already stop
//! reconciling an object when a field or annotation says so (Flux `spec.suspend`, Cluster API `spec.paused`,
//! Crossplane's `crossplane.io/paused` and KEDA's `autoscaling.keda.sh/paused` annotations, a Deployment's
//! `spec.paused`, a Job's `spec.suspend`). While an object's verdict is not proceed, the operator sets the
//! kind's switch by server-side apply under its own field manager; when the verdict turns proceed it
//! withdraws its ownership, so the switch disappears unless another manager also set it. It never overrides
//! a switch another manager set to another value unless the switch says `,force` (then it takes the switch
//! alone over while the object runs); without it the apply conflicts, and that is reported once; the
//! operator then stays quiet (no request, no Event) until who holds the switch, its value or the verdict
//! changes. It writes only on transitions (it reads its ownership from `managedFields`).
//!
//! Set after creation, a switch loses the race against a controller that acts at once (a Deployment's
//! ReplicaSet is written milliseconds after the Deployment). The operator's admission policy
//! ([`crate::admission_hold`]) sets it in the creating request itself and marks it with
//! [`HELD_AT_ADMISSION_ANNOTATION`]; the operator takes a marked switch over and releases it like its own.

use crate::field_managers::PAUSE_FIELD_MANAGER;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, PoisonError};

/// The annotation the operator's admission policy sets beside the switch it sets on creation (and on spec
/// changes): "preflight holds this object; the switch is preflight's to release". Its value is the switch.
/// An admission policy cannot name a field manager, so what it sets belongs to no one (or, for a field the
/// API server defaults, to the creator); the annotation is how the operator knows to take it over and
/// release it, while a pause a person set without it is never the operator's to release.
pub const HELD_AT_ADMISSION_ANNOTATION: &str = "preflight.dev/held-at-admission";

/// The suffix that lets the operator take a switch over from another field manager while the object runs.
const FORCE_SUFFIX: &str = ",force";

/// Where a kind's controller looks to know that it must not reconcile an object, and the value that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchTarget {
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

/// A kind's pause switch: where it is, and whether the operator may take it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseSwitch {
    /// Where the switch is and the value that pauses.
    pub target: SwitchTarget,
    /// `,force`: while the object runs (the switch is absent or says anything but pause) and another field
    /// manager owns the switch, take it over by a forced apply of the switch alone. Needed for fields the
    /// API server defaults, which the creator owns from the start (a Job's `spec.suspend: false`). A switch
    /// already at the pause value is never forced: that pause is someone else's, and survives.
    pub force: bool,
}

impl PauseSwitch {
    /// Parses `annotation:KEY=VALUE` or `field:DOTTED.PATH=VALUE`, optionally followed by `,force`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let invalid = || {
            format!(
                "pause `{text}` is not annotation:KEY=VALUE or field:PATH=VALUE, optionally followed by \
                 {FORCE_SUFFIX} (e.g. annotation:crossplane.io/paused=true, field:spec.suspend=true{FORCE_SUFFIX})"
            )
        };
        let trimmed = text.trim();
        let (switch, force) = match trimmed.strip_suffix(FORCE_SUFFIX) {
            Some(switch) => (switch, true),
            None => (trimmed, false),
        };
        let (kind, rest) = switch.split_once(':').ok_or_else(invalid)?;
        let (place, value) = rest.split_once('=').ok_or_else(invalid)?;
        // A comma is where options begin (`,force`); a value with one is a misspelt option.
        if value.contains(',') {
            return Err(invalid());
        }
        let target = match kind {
            "annotation" if !place.is_empty() => SwitchTarget::Annotation {
                key: place.to_owned(),
                value: value.to_owned(),
            },
            "field" => {
                let path: Vec<String> = place.split('.').map(str::to_owned).collect();
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
                SwitchTarget::Field { path, value }
            }
            _ => return Err(invalid()),
        };
        Ok(Self { target, force })
    }

    /// Whether the switch says "paused" on `object` now, whoever set it.
    pub(crate) fn is_set_on(&self, object: &DynamicObject) -> bool {
        match &self.target {
            SwitchTarget::Annotation { key, value } => object.annotations().get(key) == Some(value),
            SwitchTarget::Field { path, value } => {
                path.iter()
                    .try_fold(&object.data, |node, step| node.get(step))
                    == Some(value)
            }
        }
    }

    /// The value that says "paused", as JSON.
    fn paused_value(&self) -> Value {
        match &self.target {
            SwitchTarget::Annotation { value, .. } => json!(value),
            SwitchTarget::Field { value, .. } => value.clone(),
        }
    }

    /// Writes `value` where the switch is, into a patch body.
    fn write_into(&self, body: &mut Value, value: Value) {
        let mut node = &mut *body;
        let steps = match &self.target {
            SwitchTarget::Annotation { key, .. } => vec!["metadata", "annotations", key.as_str()],
            SwitchTarget::Field { path, .. } => path.iter().map(String::as_str).collect(),
        };
        for step in steps {
            node = &mut node[step];
        }
        *node = value;
    }

    /// The switch's path in a `managedFields` FieldsV1 set (`f:metadata` → `f:annotations` → `f:KEY`).
    fn fields_path(&self) -> Vec<String> {
        match &self.target {
            SwitchTarget::Annotation { key, .. } => {
                vec![
                    "f:metadata".into(),
                    "f:annotations".into(),
                    format!("f:{key}"),
                ]
            }
            SwitchTarget::Field { path, .. } => {
                path.iter().map(|step| format!("f:{step}")).collect()
            }
        }
    }

    /// The entries of `managedFields` that own the switch on `object` now.
    fn owning_entries<'a>(
        &self,
        object: &'a DynamicObject,
    ) -> impl Iterator<Item = &'a ManagedFieldsEntry> + 'a {
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
    }

    /// The field managers that own the switch on `object` now.
    fn owners<'a>(&self, object: &'a DynamicObject) -> impl Iterator<Item = &'a str> + 'a {
        self.owning_entries(object)
            .filter_map(|entry| entry.manager.as_deref())
    }

    /// Whether the operator's server-side apply owns the switch on `object` now.
    fn owned_by_us(&self, object: &DynamicObject) -> bool {
        self.owning_entries(object).any(is_our_apply)
    }

    /// Who holds the switch on `object` and what it says, as a fingerprint: a conflict reported under one
    /// fingerprint is not tried again until it changes.
    fn holders(&self, object: &DynamicObject) -> u64 {
        let mut hasher = DefaultHasher::new();
        let mut owners: Vec<&str> = self.owners(object).collect();
        owners.sort_unstable();
        owners.hash(&mut hasher);
        let value = match &self.target {
            SwitchTarget::Annotation { key, .. } => object
                .annotations()
                .get(key)
                .map(|value| Value::String(value.clone())),
            SwitchTarget::Field { path, .. } => path
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
        match &self.target {
            SwitchTarget::Annotation { key, value } => write!(f, "annotation:{key}={value}")?,
            SwitchTarget::Field { path, value } => {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                write!(f, "field:{}={value}", path.join("."))?;
            }
        }
        if self.force {
            f.write_str(FORCE_SUFFIX)?;
        }
        Ok(())
    }
}

/// A server-side apply body for `object` owning `switch` (when given); without, a body that owns nothing,
/// which withdraws everything the operator owned.
fn apply_body(
    object: &DynamicObject,
    resource: &ApiResource,
    switch: Option<&PauseSwitch>,
) -> Value {
    let mut body = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": object.name_any()},
    });
    if let Some(namespace) = object.namespace() {
        body["metadata"]["namespace"] = json!(namespace);
    }
    if let Some(switch) = switch {
        switch.write_into(&mut body, switch.paused_value());
    }
    body
}

/// A merge patch that removes the admission mark and, when it says pause on `object`, the switch `held`
/// names. No resourceVersion precondition: the reconcile has just written the condition, which makes the
/// version read stale, and a pause set meanwhile under the mark could not be told from preflight's anyway.
fn release_patch(object: &DynamicObject, held: Option<&PauseSwitch>) -> Value {
    let mut patch = json!({"metadata": {
        "annotations": {HELD_AT_ADMISSION_ANNOTATION: null},
    }});
    if let Some(held) = held.filter(|held| held.is_set_on(object)) {
        held.write_into(&mut patch, Value::Null);
    }
    patch
}

/// Releases what the admission policy held: removes the switch and the mark by a merge patch, which takes
/// them from every field manager. Server-side apply could not: the policy's write belongs to no one, and a
/// field the API server defaults (a Job's `spec.suspend`) to the creator, who would keep it set after
/// preflight withdrew. Removed, a defaulted field is defaulted again (to running).
async fn release_marked(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    held: Option<&PauseSwitch>,
) -> Result<(), kube::Error> {
    let params = PatchParams {
        field_manager: Some(PAUSE_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(
        &object.name_any(),
        &params,
        &Patch::Merge(release_patch(object, held)),
    )
    .await?;
    Ok(())
}

/// Whether `entry` is what the operator's server-side applies of switches own: what withdrawing releases.
/// (The release of an admission hold is a merge patch under the same manager: an `Update` entry, which owns
/// at most a value the API server defaulted again, such as a Job's `suspend: false`, and is not a pause.)
fn is_our_apply(entry: &ManagedFieldsEntry) -> bool {
    entry.manager.as_deref() == Some(PAUSE_FIELD_MANAGER)
        && entry.operation.as_deref() == Some("Apply")
}

/// Withdraws everything the operator's server-side apply owns on `object`, by applying nothing: a switch
/// another manager also set stays. When the switch was the only field of its parent (an object created
/// with `spec: {}`), the API server turns the parent into null, which the kind's schema refuses (422); the
/// operator owned the switch alone then, and removes exactly what it owns by a merge patch, keeping the
/// parent.
async fn withdraw(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    object: &DynamicObject,
) -> Result<(), kube::Error> {
    let name = object.name_any();
    let params = PatchParams::apply(PAUSE_FIELD_MANAGER);
    let body = apply_body(object, resource, None);
    match api.patch(&name, &params, &Patch::Apply(body)).await {
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let patch = removal_patch(object);
            let params = PatchParams {
                field_manager: Some(PAUSE_FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            api.patch(&name, &params, &Patch::Merge(patch)).await?;
            Ok(())
        }
        result => result.map(drop),
    }
}

/// A merge patch that removes every field the operator's server-side apply owns on `object` (its
/// `managedFields` sets: `f:spec` → `f:suspend` becomes `{"spec": {"suspend": null}}`), and nothing else.
fn removal_patch(object: &DynamicObject) -> Value {
    fn removal(fields: &Value) -> Value {
        let children: serde_json::Map<String, Value> = fields
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(key, child)| Some((key.strip_prefix("f:")?.to_owned(), removal(child))))
            .collect();
        if children.is_empty() {
            Value::Null
        } else {
            Value::Object(children)
        }
    }
    let mut patch = json!({});
    for entry in object.meta().managed_fields.iter().flatten() {
        if is_our_apply(entry)
            && let Some(fields) = &entry.fields_v1
        {
            merge_into(&mut patch, removal(&fields.0));
        }
    }
    patch
}

/// Merges `addition` into `target` (both merge patches).
fn merge_into(target: &mut Value, addition: Value) {
    match (target, addition) {
        (Value::Object(target), Value::Object(addition)) => {
            for (key, value) in addition {
                merge_into(
                    target
                        .entry(key)
                        .or_insert(Value::Object(Default::default())),
                    value,
                );
            }
        }
        (target, addition) => *target = addition,
    }
}

/// Whether the operator's server-side apply owns anything on `object`.
fn owns_anything(object: &DynamicObject) -> bool {
    object
        .meta()
        .managed_fields
        .iter()
        .flatten()
        .any(is_our_apply)
}

/// What syncing a switch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PauseSync {
    /// The switch already said what the verdict wants, or its conflict was reported already and nothing
    /// changed since: no request.
    Unchanged,
    /// The switch was set (the verdict is not proceed), or the one set at admission taken over.
    Set,
    /// The operator's ownership was withdrawn (the verdict is proceed, or the kind has no switch any more).
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

/// Makes `object`'s switch say what the verdict wants: set while not proceeding, withdrawn when proceeding
/// or when the kind has no switch (any more). A switch the admission policy set (the object carries
/// [`HELD_AT_ADMISSION_ANNOTATION`]) is left as it is while the object waits and removed with the mark when
/// it proceeds ([`release_marked`]). Writes only when the operator's ownership has to change, and does not
/// try again a conflict `conflicts` already holds while the switch's holders and value are the same.
pub(crate) async fn sync(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    object: &DynamicObject,
    switch: Option<&PauseSwitch>,
    proceed: bool,
    conflicts: &ReportedConflicts,
) -> Result<PauseSync, kube::Error> {
    let uid = object.uid().unwrap_or_default();
    let name = object.name_any();
    if let Some(mark) = object.annotations().get(HELD_AT_ADMISSION_ANNOTATION) {
        let held = PauseSwitch::parse(mark).ok().or_else(|| switch.cloned());
        if proceed || switch.is_none() {
            release_marked(api, object, held.as_ref()).await?;
            conflicts.forget(&uid);
            return Ok(PauseSync::Withdrawn);
        }
        if held.is_some_and(|held| held.is_set_on(object)) {
            return Ok(PauseSync::Unchanged);
        }
    }
    let Some(switch) = switch else {
        if !owns_anything(object) {
            return Ok(PauseSync::Unchanged);
        }
        withdraw(api, resource, object).await?;
        return Ok(PauseSync::Withdrawn);
    };
    let set = !proceed;
    if switch.owned_by_us(object) == set {
        conflicts.forget(&uid);
        return Ok(PauseSync::Unchanged);
    }
    if !set {
        withdraw(api, resource, object).await?;
        conflicts.forget(&uid);
        return Ok(PauseSync::Withdrawn);
    }
    let holders = switch.holders(object);
    if conflicts.reported(&uid) == Some(holders) {
        return Ok(PauseSync::Unchanged);
    }
    let mut params = PatchParams::apply(PAUSE_FIELD_MANAGER);
    params.force = switch.force && !switch.is_set_on(object);
    let body = apply_body(object, resource, Some(switch));
    match api.patch(&name, &params, &Patch::Apply(body)).await {
        Ok(_) => {
            conflicts.forget(&uid);
            Ok(PauseSync::Set)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            conflicts.remember(uid, holders);
            Ok(PauseSync::OwnedElsewhere(status.message))
        }
        Err(error) => Err(error),
    }
}

/// Whether the operator holds (or its admission policy marked) anything on `object` that a release must
/// withdraw.
pub(crate) fn holds_anything(object: &DynamicObject) -> bool {
    owns_anything(object)
        || object
            .annotations()
            .contains_key(HELD_AT_ADMISSION_ANNOTATION)
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
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use kube::api::GroupVersionKind;

    fn resource() -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("source.toolkit.example", "v1", "Repo"),
            "repos",
        )
    }

    #[test]
    fn parses_the_presets_and_refuses_the_rest() {
        let field = |path: &[&str], value: Value| PauseSwitch {
            target: SwitchTarget::Field {
                path: path.iter().map(|step| step.to_string()).collect(),
                value,
            },
            force: false,
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
            Ok(PauseSwitch {
                target: SwitchTarget::Annotation {
                    key: "crossplane.io/paused".into(),
                    value: "true".into()
                },
                force: false
            })
        );
        assert_eq!(
            PauseSwitch::parse("field:spec.suspend=true,force"),
            Ok(PauseSwitch {
                force: true,
                ..field(&["spec", "suspend"], json!(true))
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
            "field:spec.suspend=true,forced",
        ] {
            assert!(PauseSwitch::parse(bad).is_err(), "{bad}");
        }
        for text in [
            "annotation:autoscaling.keda.sh/paused=true",
            "field:spec.suspend=true",
            "field:spec.suspend=true,force",
        ] {
            assert_eq!(PauseSwitch::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn apply_bodies_own_the_switch_or_nothing() {
        let object = DynamicObject::new("podinfo", &resource()).within("apps");
        let suspend = PauseSwitch::parse("field:spec.suspend=true").unwrap();
        assert_eq!(
            apply_body(&object, &resource(), Some(&suspend)),
            json!({"apiVersion": "source.toolkit.example/v1", "kind": "Repo",
                "metadata": {"name": "podinfo", "namespace": "apps"}, "spec": {"suspend": true}})
        );
        assert_eq!(
            apply_body(&object, &resource(), None),
            json!({"apiVersion": "source.toolkit.example/v1", "kind": "Repo",
                "metadata": {"name": "podinfo", "namespace": "apps"}})
        );
        let paused = PauseSwitch::parse("annotation:crossplane.io/paused=true").unwrap();
        assert_eq!(
            apply_body(&object, &resource(), Some(&paused))["metadata"]["annotations"],
            json!({"crossplane.io/paused": "true"})
        );
    }

    #[test]
    fn a_release_of_what_admission_held_removes_the_mark_and_a_switch_that_still_pauses() {
        let mut object = DynamicObject::new("task", &resource()).within("apps");
        object.data = json!({"spec": {"suspend": true}});
        let suspend = PauseSwitch::parse("field:spec.suspend=true,force").unwrap();
        assert_eq!(
            release_patch(&object, Some(&suspend)),
            json!({"metadata": {"annotations": {HELD_AT_ADMISSION_ANNOTATION: null}},
                   "spec": {"suspend": null}})
        );
        object.data = json!({"spec": {"suspend": false}});
        assert_eq!(
            release_patch(&object, Some(&suspend)),
            json!({"metadata": {"annotations": {HELD_AT_ADMISSION_ANNOTATION: null}}}),
            "a switch someone turned to running is left alone"
        );
        let paused = PauseSwitch::parse("annotation:crossplane.io/paused=true").unwrap();
        object.metadata.annotations = Some([("crossplane.io/paused".into(), "true".into())].into());
        assert_eq!(
            release_patch(&object, Some(&paused))["metadata"]["annotations"],
            json!({HELD_AT_ADMISSION_ANNOTATION: null, "crossplane.io/paused": null})
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
        object.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            operation: Some("Update".into()),
            ..entry(PAUSE_FIELD_MANAGER, annotation.clone())
        }]);
        assert!(
            !paused.owned_by_us(&object) && !owns_anything(&object),
            "a release's merge patch is no pause to withdraw"
        );
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
    fn whether_a_switch_is_set_and_what_a_release_must_withdraw() {
        let mut object = DynamicObject::new("web", &resource()).within("apps");
        let paused = PauseSwitch::parse("field:spec.paused=true,force").unwrap();
        assert!(!paused.is_set_on(&object) && !holds_anything(&object));
        object.data = json!({"spec": {"paused": false}});
        assert!(!paused.is_set_on(&object), "running");
        object.data = json!({"spec": {"paused": true}});
        assert!(paused.is_set_on(&object));
        object.metadata.annotations =
            Some([(HELD_AT_ADMISSION_ANNOTATION.into(), paused.to_string())].into());
        assert!(
            holds_anything(&object),
            "marked at admission: preflight's to release"
        );
        object.metadata.annotations = None;
        object.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(PAUSE_FIELD_MANAGER.into()),
            operation: Some("Apply".into()),
            fields_v1: Some(FieldsV1(json!({"f:spec": {"f:paused": {}}}))),
            ..ManagedFieldsEntry::default()
        }]);
        assert!(holds_anything(&object), "owned by preflight-pause");
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

    #[test]
    fn the_fallback_removal_takes_exactly_what_the_operator_applied() {
        let mut object = DynamicObject::new(
            "web",
            &ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
        );
        object.metadata.managed_fields = Some(vec![
            ManagedFieldsEntry {
                manager: Some(PAUSE_FIELD_MANAGER.into()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(json!({"f:spec": {"f:suspend": {}}}))),
                ..ManagedFieldsEntry::default()
            },
            ManagedFieldsEntry {
                manager: Some(PAUSE_FIELD_MANAGER.into()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(
                    json!({"f:metadata": {"f:annotations": {"f:example.com/paused": {}}}}),
                )),
                ..ManagedFieldsEntry::default()
            },
            ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                operation: Some("Apply".into()),
                fields_v1: Some(FieldsV1(json!({"f:spec": {"f:replicas": {}}}))),
                ..ManagedFieldsEntry::default()
            },
        ]);
        assert_eq!(
            removal_patch(&object),
            json!({
                "spec": {"suspend": null},
                "metadata": {"annotations": {"example.com/paused": null}},
            })
        );
    }
}
