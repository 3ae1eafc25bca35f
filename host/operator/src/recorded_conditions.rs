//! The `Preflight` condition the operator last recorded on each object, so that the watch can tell its own
//! writes (which must not trigger a re-check) from another manager removing or altering the condition (which
//! must: the condition is restored at once, not when something else changes).

use crate::condition::PreflightCondition;
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A digest of what a condition says: status, reason, message and observed generation (the transition time
/// follows from them). A digest, not a copy: the steady state records every object on every reconcile.
type Said = u64;

fn said(condition: &PreflightCondition) -> Said {
    let mut hasher = DefaultHasher::new();
    (
        &condition.status,
        &condition.reason,
        &condition.message,
        condition.observed_generation,
    )
        .hash(&mut hasher);
    hasher.finish()
}

/// Per object (by UID), the condition the operator wrote or found correct last.
#[derive(Debug, Default)]
pub(crate) struct RecordedConditions {
    by_uid: Mutex<HashMap<String, Said>>,
}

impl RecordedConditions {
    /// Remembers `condition` as what object `uid` carries (or is about to: call this before the write, so
    /// that the write's own watch event already matches).
    pub fn remember(&self, uid: &str, condition: &PreflightCondition) {
        let said = said(condition);
        let mut by_uid = self.lock();
        match by_uid.get_mut(uid) {
            Some(recorded) => *recorded = said,
            None => {
                by_uid.insert(uid.to_owned(), said);
            }
        }
    }

    /// Whether object `uid`, which carries `current`, no longer says what the operator recorded: someone
    /// else removed or changed the condition. `false` for an object the operator has not recorded yet.
    pub fn was_altered(&self, uid: &str, current: Option<&PreflightCondition>) -> bool {
        self.lock()
            .get(uid)
            .is_some_and(|recorded| current.map(said) != Some(*recorded))
    }

    /// Forgets a deleted object.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Said>> {
        // Plain values: a panicking holder leaves nothing half-updated that matters.
        self.by_uid.lock().unwrap_or_else(PoisonError::into_inner)
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
            !recorded.was_altered("a", None),
            "unknown objects are not altered"
        );
        recorded.remember("a", &ours);
        assert!(!recorded.was_altered("a", Some(&ours)));
        let later = PreflightCondition {
            last_transition_time: "2026-12-03T08:00:00Z".into(),
            ..ours.clone()
        };
        assert!(
            !recorded.was_altered("a", Some(&later)),
            "the time alone is no news"
        );
        assert!(recorded.was_altered("a", None), "removed");
        assert!(
            recorded.was_altered("a", Some(&condition("True", "Proceed", ""))),
            "changed"
        );
        recorded.forget("a");
        assert!(!recorded.was_altered("a", None));
    }
}
