//! What starts a reconcile: an object seen for the first time, a change to what its checks may read, our
//! condition removed or altered by someone else, or a change to its kind's checks. Our own writes start
//! nothing, so a converged kind costs no requests.

use crate::check_set::CheckSet;
use crate::condition::{ConditionType, Placement, existing_condition};
use crate::kind::GatedKind;
use crate::metrics::HeldObjects;
use crate::outputs::OUTPUTS_ANNOTATION;
use crate::pause::ReportedConflicts;
use crate::recorded_conditions::RecordedConditions;
use futures::{Stream, StreamExt, future, stream};
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::watcher;
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A hash of what a check may read and what changes when the object changes for a reason other than our
/// own writes: generation, labels, annotations (without our condition and outputs) and every top-level
/// field but `status`.
/// Status-only updates (including our condition) do not change it.
pub(crate) fn gate_inputs(object: &DynamicObject) -> u64 {
    let mut hasher = DefaultHasher::new();
    object.metadata.generation.hash(&mut hasher);
    object.labels().hash(&mut hasher);
    object
        .annotations()
        .iter()
        .filter(|(key, _)| {
            key.as_str() != OUTPUTS_ANNOTATION
                && ConditionType::ALL
                    .iter()
                    .all(|condition_type| key.as_str() != condition_type.annotation())
        })
        .for_each(|entry| entry.hash(&mut hasher));
    if let Some(fields) = object.data.as_object() {
        for (key, value) in fields.iter().filter(|(key, _)| key.as_str() != "status") {
            key.hash(&mut hasher);
            // Streamed into the hasher: no copy of the field as text.
            let _ = serde_json::to_writer(HashWriter(&mut hasher), value);
        }
    }
    hasher.finish()
}

/// Picks the watch events that start a reconcile: an object seen for the first time, one whose gate inputs
/// changed, and one whose `Preflight` condition someone else removed or altered (restored at once). Our own
/// status writes start nothing. Deleted objects are forgotten (their recorded condition and pause
/// conflict too).
pub(crate) fn reconcile_triggers(
    events: impl Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
    recorded: Arc<RecordedConditions>,
    conflicts: Arc<ReportedConflicts>,
    held: Arc<HeldObjects>,
    placement: Placement,
) -> impl Stream<Item = Result<DynamicObject, watcher::Error>> {
    let mut seen: HashMap<String, u64> = HashMap::new();
    events.filter_map(move |event| {
        let object = match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => object,
            Ok(watcher::Event::Delete(object)) => {
                let uid = object.uid().unwrap_or_default();
                seen.remove(&uid);
                recorded.forget(&uid);
                conflicts.forget(&uid);
                held.forget(&uid);
                return future::ready(None);
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => return future::ready(None),
            Err(error) => return future::ready(Some(Err(error))),
        };
        let uid = object.uid().unwrap_or_default();
        let inputs = gate_inputs(&object);
        let changed = seen.insert(uid.clone(), inputs) != Some(inputs);
        let triggers = changed
            || ConditionType::ALL.into_iter().any(|condition_type| {
                let current = existing_condition(&object, placement, condition_type);
                recorded.was_altered(&uid, condition_type, current.as_ref())
            });
        future::ready(triggers.then_some(Ok(object)))
    })
}

/// Feeds what is written into a hasher.
struct HashWriter<'a>(&'a mut DefaultHasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Ticks whenever the checks of `kind` change: every object of the kind is then re-checked.
pub(crate) fn check_changes(
    checks: Arc<CheckSet>,
    kind: GatedKind,
) -> impl Stream<Item = ()> + Send + 'static {
    let seen = checks.revision(&kind);
    let changes = checks.subscribe();
    stream::unfold((changes, seen), move |(mut changes, seen)| {
        let checks = checks.clone();
        let kind = kind.clone();
        async move {
            loop {
                changes.changed().await.ok()?;
                let revision = checks.revision(&kind);
                if revision != seen {
                    return Some(((), (changes, revision)));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::PreflightCondition;
    use futures::executor::block_on;
    use serde_json::{Value, json};

    /// An object of uid `u1` with `spec`, `labels`, `status` and `annotations` as given.
    fn object(spec: Value, labels: Value, annotations: Value, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps.example.com/v1",
            "kind": "App",
            "metadata": {"name": "a", "namespace": "n", "uid": "u1", "generation": 1,
                         "resourceVersion": "1", "labels": labels, "annotations": annotations},
            "spec": spec,
            "status": status,
        }))
        .unwrap()
    }

    fn condition(status: &str, reason: &str) -> PreflightCondition {
        PreflightCondition {
            type_: "Preflight".into(),
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
            observed_generation: Some(1),
            last_transition_time: "2026-12-04T00:00:00Z".into(),
        }
    }

    fn with_condition(base: &DynamicObject, condition: &PreflightCondition) -> DynamicObject {
        let mut object = base.clone();
        object.data["status"] = json!({"conditions": [condition]});
        object
    }

    /// Which of `events` start a reconcile (by resourceVersion), with `recorded` as the operator's memory
    /// of what it wrote.
    fn triggered(
        events: Vec<watcher::Event<DynamicObject>>,
        recorded: Arc<RecordedConditions>,
    ) -> Vec<String> {
        let stream = reconcile_triggers(
            futures::stream::iter(events.into_iter().map(Ok)),
            recorded,
            Arc::default(),
            Arc::new(crate::metrics::Metrics::default().held_objects("App.example.com")),
            Placement::Status,
        );
        block_on(stream.collect::<Vec<_>>())
            .into_iter()
            .map(|object| object.unwrap().metadata.resource_version.unwrap())
            .collect()
    }

    fn versioned(object: &DynamicObject, version: &str) -> DynamicObject {
        let mut object = object.clone();
        object.metadata.resource_version = Some(version.into());
        object
    }

    #[test]
    fn what_a_check_reads_changing_triggers_and_nothing_else_does() {
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        let base = object(
            json!({"dependsOn": ["db"]}),
            json!({"team": "a"}),
            json!({}),
            json!({}),
        );
        let mut spec = versioned(&base, "3");
        spec.data["spec"]["dependsOn"] = json!(["db", "cache"]);
        let mut label = versioned(&spec, "4");
        label.metadata.labels = Some([("team".to_owned(), "b".to_owned())].into());
        let mut status_only = versioned(&label, "5");
        status_only.data["status"] = json!({"observedGeneration": 7, "phase": "Running"});
        let mut ours = versioned(&status_only, "6");
        ours.metadata.annotations = Some(
            [(
                crate::condition::CONDITION_ANNOTATION.to_owned(),
                "{}".to_owned(),
            )]
            .into(),
        );
        let mut bookkeeping = versioned(&ours, "7");
        bookkeeping.metadata.managed_fields = Some(Vec::new());
        let events = vec![
            Init,
            InitApply(versioned(&base, "1")),
            InitDone,
            Apply(versioned(&base, "2")),
            Apply(spec),
            Apply(label),
            Apply(status_only),
            Apply(ours),
            Apply(bookkeeping.clone()),
            Delete(versioned(&bookkeeping, "8")),
            Apply(versioned(&bookkeeping, "9")),
        ];
        assert_eq!(
            triggered(events, Arc::default()),
            ["1", "3", "4", "9"],
            "first sight, spec, labels, and the object again after its deletion"
        );
    }

    #[test]
    fn our_own_condition_triggers_nothing_and_anyone_else_s_change_to_it_does() {
        use watcher::Event::Apply;
        let recorded = Arc::new(RecordedConditions::default());
        let base = object(json!({}), json!({}), json!({}), json!({}));
        let ours = condition("False", "Waiting");
        recorded.remember("u1", ConditionType::Preflight, Some(&ours));
        let written = with_condition(&versioned(&base, "2"), &ours);
        let altered = with_condition(&versioned(&base, "3"), &condition("True", "Forged"));
        let mut removed = versioned(&base, "4");
        removed.data["status"] = json!({"conditions": []});
        let events = vec![
            Apply(versioned(&base, "1")),
            Apply(written),
            Apply(altered),
            Apply(removed),
        ];
        assert_eq!(triggered(events, recorded), ["1", "3", "4"]);
    }

    #[test]
    fn the_gate_inputs_ignore_status_and_bookkeeping() {
        let base = object(json!({"a": 1}), json!({}), json!({}), json!({}));
        let mut status = base.clone();
        status.data["status"] = json!({"conditions": [condition("True", "Ready")]});
        status.metadata.resource_version = Some("9".into());
        assert_eq!(gate_inputs(&base), gate_inputs(&status));
        let mut generation = base.clone();
        generation.metadata.generation = Some(2);
        assert_ne!(gate_inputs(&base), gate_inputs(&generation));
        let mut other_annotation = base.clone();
        other_annotation.metadata.annotations =
            Some([("example.com/x".to_owned(), "1".to_owned())].into());
        assert_ne!(gate_inputs(&base), gate_inputs(&other_annotation));
        let mut outputs = base.clone();
        outputs.metadata.annotations =
            Some([(OUTPUTS_ANNOTATION.to_owned(), "{\"k\":\"v\"}".to_owned())].into());
        assert_eq!(gate_inputs(&base), gate_inputs(&outputs));
    }
}
