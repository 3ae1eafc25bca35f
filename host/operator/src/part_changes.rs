//! Which checks to load again, from the events of the watch on part ConfigMaps: the check of a part
//! created, changed or deleted, and after a relist (the API server expired the watch) the checks whose
//! parts the relist shows changed. A relist sends no Delete for a part deleted while the watch was down
//! (kube's watcher says objects missing from it are to be assumed deleted), and a part created or changed
//! meanwhile comes as a listed object, not as a change; so the parts seen (each with the check it belongs
//! to and its `resourceVersion`) are compared with those relisted. Only the parts' metadata is watched:
//! their bytes (up to 1 MiB each) are read when a check is loaded, never by this watch.

use crate::config_map_format::PART_OF_LABEL;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use std::collections::{BTreeSet, HashMap};

/// A part as the watch sees it: its metadata only.
pub(crate) type PartMeta = PartialObjectMeta<ConfigMap>;

/// The parts watch's state: the parts seen, those of a relist under way, and whether a list completed.
#[derive(Debug, Default)]
pub(crate) struct PartChanges {
    seen: SeenParts,
    relisted: SeenParts,
    listed_before: bool,
}

impl PartChanges {
    /// The checks (`namespace/check`) to load again after `event`. The first list names none: the check
    /// watcher starts after it and loads every check with the parts it lists itself.
    pub(crate) fn checks_to_load(&mut self, event: Event<PartMeta>) -> BTreeSet<String> {
        match event {
            Event::Init => {
                self.relisted = SeenParts::default();
                BTreeSet::new()
            }
            Event::InitApply(part) => {
                self.relisted.record(&part);
                BTreeSet::new()
            }
            Event::InitDone => {
                let before = std::mem::replace(&mut self.seen, std::mem::take(&mut self.relisted));
                if std::mem::replace(&mut self.listed_before, true) {
                    self.seen.checks_changed_since(&before)
                } else {
                    BTreeSet::new()
                }
            }
            Event::Apply(part) => self.seen.record(&part).into_iter().collect(),
            Event::Delete(part) => self.seen.forget(&part).into_iter().collect(),
        }
    }
}

/// The parts seen, by the reference kube's reflector keys objects with.
#[derive(Debug, Default)]
struct SeenParts(HashMap<ObjectRef<PartMeta>, SeenPart>);

/// A part as last seen: the check it belongs to (`namespace/check`) and its version.
#[derive(Debug, PartialEq, Eq)]
struct SeenPart {
    check: String,
    resource_version: Option<String>,
}

impl SeenParts {
    /// Records `part` as seen; returns the check it belongs to (`None` for a ConfigMap without a
    /// namespace or a `part-of` label, which is no part of any check).
    fn record(&mut self, part: &PartMeta) -> Option<String> {
        let check = check_of(part)?;
        let seen = SeenPart {
            check: check.clone(),
            resource_version: part.resource_version(),
        };
        self.0.insert(ObjectRef::from_obj(part), seen);
        Some(check)
    }

    /// Forgets a deleted part; returns the check it belonged to.
    fn forget(&mut self, part: &PartMeta) -> Option<String> {
        let check = check_of(part)?;
        self.0.remove(&ObjectRef::from_obj(part));
        Some(check)
    }

    /// The checks with a part here that `before` lacked or saw at another version, or a part `before`
    /// saw that is gone here.
    fn checks_changed_since(&self, before: &SeenParts) -> BTreeSet<String> {
        let changed_or_new = self
            .0
            .iter()
            .filter(|(key, seen)| before.0.get(*key) != Some(*seen))
            .map(|(_, seen)| seen.check.clone());
        let gone = before
            .0
            .iter()
            .filter(|(key, _)| !self.0.contains_key(*key))
            .map(|(_, seen)| seen.check.clone());
        changed_or_new.chain(gone).collect()
    }
}

/// The part's check, `namespace/check`.
fn check_of(part: &PartMeta) -> Option<String> {
    let namespace = part.namespace()?;
    let check = part.labels().get(PART_OF_LABEL)?;
    Some(format!("{namespace}/{check}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::core::PartialObjectMetaExt;

    fn part(namespace: &str, name: &str, check: &str, version: &str) -> PartMeta {
        ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            resource_version: Some(version.to_owned()),
            labels: Some([(PART_OF_LABEL.to_owned(), check.to_owned())].into()),
            ..ObjectMeta::default()
        }
        .into_response_partial()
    }

    /// Parts 1 and 2 of check `a`, part 1 of `b` and of `c`, in namespace `ns`.
    fn four_parts() -> [PartMeta; 4] {
        [
            part("ns", "a-part-1", "a", "10"),
            part("ns", "a-part-2", "a", "11"),
            part("ns", "b-part-1", "b", "12"),
            part("ns", "c-part-1", "c", "13"),
        ]
    }

    fn seen(parts: &[PartMeta]) -> SeenParts {
        let mut seen = SeenParts::default();
        for part in parts {
            seen.record(part);
        }
        seen
    }

    fn checks(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn a_relist_names_the_checks_whose_parts_changed() {
        let [a1, a2, b1, _] = four_parts();
        let b1_other_namespace = part("other", "b-part-1", "b", "12");
        // What was seen, what a relist shows, the checks it names.
        type Case = (
            &'static str,
            Vec<PartMeta>,
            Vec<PartMeta>,
            &'static [&'static str],
        );
        let cases: [Case; 6] = [
            (
                "nothing changed",
                vec![a1.clone(), b1.clone()],
                vec![a1.clone(), b1.clone()],
                &[],
            ),
            (
                "a part deleted",
                vec![a1.clone(), a2.clone(), b1.clone()],
                vec![a1.clone(), b1.clone()],
                &["ns/a"],
            ),
            (
                "a part created",
                vec![a1.clone()],
                vec![a1.clone(), a2.clone()],
                &["ns/a"],
            ),
            (
                "a part replaced",
                vec![a1.clone(), b1.clone()],
                vec![a1.clone(), part("ns", "b-part-1", "b", "13")],
                &["ns/b"],
            ),
            (
                "the same name elsewhere",
                vec![b1.clone()],
                vec![b1.clone(), b1_other_namespace],
                &["other/b"],
            ),
            (
                "everything gone",
                vec![a1, a2, b1],
                vec![],
                &["ns/a", "ns/b"],
            ),
        ];
        for (case, before, after, expected) in cases {
            let changed = seen(&after).checks_changed_since(&seen(&before));
            assert_eq!(changed, checks(expected), "{case}");
        }
    }

    #[test]
    fn changes_load_their_check_and_so_do_parts_a_relist_shows_changed_but_not_the_first_list() {
        let [a1, a2, b1, c1] = four_parts();
        let mut changes = PartChanges::default();
        let steps = [
            ("first list begins", Event::Init, checks(&[])),
            ("first list: a1", Event::InitApply(a1.clone()), checks(&[])),
            ("first list: a2", Event::InitApply(a2.clone()), checks(&[])),
            ("first list: b1", Event::InitApply(b1.clone()), checks(&[])),
            ("first list done", Event::InitDone, checks(&[])),
            ("c1 created", Event::Apply(c1.clone()), checks(&["ns/c"])),
            ("b1 deleted", Event::Delete(b1.clone()), checks(&["ns/b"])),
            (
                "b1 created again",
                Event::Apply(b1.clone()),
                checks(&["ns/b"]),
            ),
            ("relist begins", Event::Init, checks(&[])),
            ("relist: a1", Event::InitApply(a1.clone()), checks(&[])),
            (
                "relist: b1 changed",
                Event::InitApply(part("ns", "b-part-1", "b", "20")),
                checks(&[]),
            ),
            ("relist: c1", Event::InitApply(c1.clone()), checks(&[])),
            (
                "relist done: a2 is gone",
                Event::InitDone,
                checks(&["ns/a", "ns/b"]),
            ),
            ("a relist with nothing changed", Event::Init, checks(&[])),
            ("again: a1", Event::InitApply(a1), checks(&[])),
            (
                "again: b1",
                Event::InitApply(part("ns", "b-part-1", "b", "20")),
                checks(&[]),
            ),
            ("again: c1", Event::InitApply(c1), checks(&[])),
            ("loads nothing", Event::InitDone, checks(&[])),
        ];
        for (step, event, expected) in steps {
            assert_eq!(changes.checks_to_load(event), expected, "{step}");
        }
    }

    #[test]
    fn a_configmap_that_is_no_part_is_not_recorded() {
        let mut unlabelled = part("ns", "x", "a", "1");
        unlabelled.metadata.labels = None;
        let mut seen = SeenParts::default();
        assert_eq!(seen.record(&unlabelled), None);
        assert_eq!(seen.forget(&unlabelled), None);
        assert!(seen.0.is_empty());
    }
}
