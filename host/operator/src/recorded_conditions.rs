//! The `Preflight` condition the operator last recorded on each object, so that the watch can tell its own
//! writes (which must not trigger a re-check) from another manager removing or altering the condition (which
//! must: the condition is restored at once, not when something else changes).

use crate::condition::{ConditionType, PreflightCondition};
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A digest of what a condition says: status, reason, message and observed generation (the transition time
/// follows from them), or that there is none. A digest, not a copy: the steady state records every object
/// on every reconcile.
type Said = u64;

fn said(condition: Option<&PreflightCondition>) -> Said {
    let mut hasher = DefaultHasher::new();
    condition
        .map(|condition| {
            (
                &condition.status,
                &condition.reason,
                &condition.message,
                condition.observed_generation,
            )
        })
        .hash(&mut hasher);
    hasher.finish()
}

/// Per object (by UID), what the operator wrote or found correct last, per condition type.
#[derive(Debug, Default)]
pub(crate) struct RecordedConditions {
    by_uid: Mutex<HashMap<String, [Option<Said>; 2]>>,
}

impl RecordedConditions {
    /// Remembers `condition` (`None`: no condition of that type) as what object `uid` carries (or is about
    /// to: call this before the write, so that the write's own watch event already matches).
    pub fn remember(
        &self,
        uid: &str,
        condition_type: ConditionType,
        condition: Option<&PreflightCondition>,
    ) {
        let said = said(condition);
        let mut by_uid = self.lock();
        match by_uid.get_mut(uid) {
            Some(recorded) => recorded[slot(condition_type)] = Some(said),
            None => {
                let mut recorded = [None; 2];
                recorded[slot(condition_type)] = Some(said);
                by_uid.insert(uid.to_owned(), recorded);
            }
        }
    }

    /// Whether object `uid`, which carries `current` of `condition_type`, no longer says what the operator
    /// recorded: someone else removed, added or changed the condition. `false` for an object the operator
    /// has not recorded yet.
    pub fn was_altered(
        &self,
        uid: &str,
        condition_type: ConditionType,
        current: Option<&PreflightCondition>,
    ) -> bool {
        self.lock()
            .get(uid)
            .and_then(|recorded| recorded[slot(condition_type)])
            .is_some_and(|recorded| said(current) != recorded)
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, [Option<Said>; 2]>> {
        // Plain values: a panicking holder leaves nothing half-updated that matters.
        self.by_uid.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn slot(condition_type: ConditionType) -> usize {
    match condition_type {
        ConditionType::Preflight => 0,
        ConditionType::Monitor => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(status: &str, reason: &str, message: &str) -> PreflightCondition {
        PreflightCondition {
            type_: "Preflight".into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(1),
            last_transition_time: "2026-12-03T07:00:00Z".into(),
        }
    }

    #[test]
    fn tells_our_writes_from_someone_elses() {
        let recorded = RecordedConditions::default();
        let ours = condition("False", "DependencyMissing", "waiting for redis");
        assert!(
            !recorded.was_altered("a", ConditionType::Preflight, None),
            "unknown objects are not altered"
        );
        recorded.remember("a", ConditionType::Preflight, Some(&ours));
        assert!(!recorded.was_altered("a", ConditionType::Preflight, Some(&ours)));
        let later = PreflightCondition {
            last_transition_time: "2026-12-03T08:00:00Z".into(),
            ..ours.clone()
        };
        assert!(
            !recorded.was_altered("a", ConditionType::Preflight, Some(&later)),
            "the time alone is no news"
        );
        assert!(
            recorded.was_altered("a", ConditionType::Preflight, None),
            "removed"
        );
        assert!(
            recorded.was_altered(
                "a",
                ConditionType::Preflight,
                Some(&condition("True", "Proceed", ""))
            ),
            "changed"
        );
        assert!(
            !recorded.was_altered("a", ConditionType::Monitor, None),
            "a type not recorded is not altered"
        );
        recorded.remember("a", ConditionType::Monitor, None);
        assert!(
            recorded.was_altered("a", ConditionType::Monitor, Some(&ours)),
            "added where the operator recorded none"
        );
        assert!(!recorded.was_altered("a", ConditionType::Monitor, None));
        recorded.forget("a");
        assert!(!recorded.was_altered("a", ConditionType::Preflight, None));
    }
}
