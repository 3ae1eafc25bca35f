//! The checks in force, per gated kind: the last good version of each check, the problem with a newer
//! version that could not be used, and a revision per kind so that controllers know when to re-check.
//!
//! A broken version never replaces a good one: [`CheckSet::reject`] records the problem beside the good
//! version, which keeps serving.

use crate::kind::GatedKind;
use crate::pause::{PauseSwitch, agreed};
use crate::vocabulary::{
    CheckMode, CheckSettings, CheckSource, FailurePolicy, ObjectSelector, Rejection, RejectionCause,
};
use preflight_engine::{Check, Digest, Engine, GrantHolder, Grants};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::watch;

/// A compiled check with its settings, ready to evaluate.
#[derive(Debug)]
pub struct LoadedCheck {
    /// How the check is applied.
    pub settings: CheckSettings,
    /// The compiled component.
    pub check: Arc<Check>,
    /// What its evaluations may reach (built from `settings.capabilities` when the check is loaded);
    /// nothing by default.
    pub grants: Grants,
    /// Set when this version serves from a copy on the operator's disk because its source failed (its
    /// registry cannot be reached, a part is missing): the condition of the objects it gates says so.
    pub stand_in_note: Option<String>,
}

impl LoadedCheck {
    /// Compiles `source` (CPU-heavy on a cache miss: call from a blocking thread). Nothing is granted yet
    /// (see [`LoadedCheck::grants`]), but the grants have a holder of their own: instances reused for this
    /// version of the check are never shared with another check or version.
    ///
    /// A memory limit above the largest the engine gives a check is refused (before compiling) rather than
    /// lowered without a word.
    pub fn load(engine: &Engine, source: CheckSource) -> Result<Self, Rejection> {
        let memory = source.settings.limits.memory_bytes;
        if memory > engine.max_memory_bytes() {
            let size = |bytes: usize| bytesize::ByteSize(bytes as u64).to_string();
            return Err(source.settings.rejection(
                RejectionCause::ConfigMap,
                format!(
                    "memoryLimit {} is above the largest the operator gives a check (its --max-memory, here {})",
                    size(memory),
                    size(engine.max_memory_bytes())
                ),
            ));
        }
        let check = engine.load(&source.component).map_err(|error| {
            let cause = error
                .component_problem()
                .map_or(RejectionCause::Host, RejectionCause::Component);
            source.settings.rejection(cause, error.to_string())
        })?;
        let grants = Grants {
            holder: GrantHolder::new(&source.settings.name),
            ..Grants::default()
        };
        Ok(Self {
            settings: source.settings,
            check,
            grants,
            stand_in_note: None,
        })
    }

    /// A rejection of this check for `problem`, caused by `cause`.
    pub fn rejection(&self, cause: RejectionCause, problem: String) -> Rejection {
        self.settings.rejection(cause, problem)
    }

    /// The component's sha256.
    pub fn digest(&self) -> Digest {
        self.check.digest()
    }
}

/// One check of a kind as the gate sees it: usable, or known only by its problem.
#[derive(Debug, Clone)]
pub enum GateEntry {
    /// A good version.
    Ready(Arc<LoadedCheck>),
    /// No good version exists; the last attempt failed for this reason.
    Unavailable {
        /// The check's name.
        name: String,
        /// Its failure policy, as far as it could be read.
        failure_policy: FailurePolicy,
        /// Its mode, as far as it could be read.
        mode: CheckMode,
        /// Its selector, as far as it could be read.
        selector: Option<ObjectSelector>,
        /// Its pause switch, as far as it could be read.
        pause: Option<PauseSwitch>,
        /// What is wrong.
        problem: String,
    },
}

impl GateEntry {
    /// The check's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Ready(check) => &check.settings.name,
            Self::Unavailable { name, .. } => name,
        }
    }
}

/// What the set holds for one check name.
#[derive(Debug, Default)]
struct Entry {
    good: Option<Arc<LoadedCheck>>,
    /// The newest version's problem, when it could not be used.
    rejection: Option<Rejection>,
}

impl Entry {
    /// The kind the entry gates: the good version's, else the one the broken version names.
    fn gates(&self) -> Option<&GatedKind> {
        self.good
            .as_ref()
            .map(|check| &check.settings.gates)
            .or_else(|| self.rejection.as_ref()?.gates.as_ref())
    }

    fn order(&self) -> i32 {
        self.good.as_ref().map_or(0, |check| check.settings.order)
    }
}

#[derive(Debug, Default)]
struct State {
    entries: BTreeMap<String, Entry>,
    revisions: HashMap<GatedKind, u64>,
    next_revision: u64,
}

impl State {
    fn bump(&mut self, kinds: impl IntoIterator<Item = Option<GatedKind>>) {
        for kind in kinds.into_iter().flatten() {
            self.next_revision += 1;
            self.revisions.insert(kind, self.next_revision);
        }
    }
}

/// The checks in force. Cheap to share (`Arc<CheckSet>`); every change is announced on [`CheckSet::subscribe`].
#[derive(Debug)]
pub struct CheckSet {
    state: Mutex<State>,
    changes: watch::Sender<u64>,
}

impl Default for CheckSet {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            changes: watch::Sender::new(0),
        }
    }
}

impl CheckSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Swaps in a good version of a check (atomically: evaluations see the old or the new one, never neither)
    /// and clears its recorded problem. Returns whether objects see a new version (the same version as the
    /// good one, e.g. a revert after a broken edit, only clears the problem).
    pub fn install(&self, check: LoadedCheck) -> bool {
        let mut state = self.state();
        let entry = state
            .entries
            .entry(check.settings.name.clone())
            .or_default();
        if entry
            .good
            .as_ref()
            .is_some_and(|good| same_version(good, &check))
        {
            let cleared = entry.rejection.take().is_some();
            drop(state);
            if cleared {
                self.announce();
            }
            return false;
        }
        let old_kind = entry.gates().cloned();
        let new_kind = Some(check.settings.gates.clone());
        entry.good = Some(Arc::new(check));
        entry.rejection = None;
        state.bump([old_kind, new_kind]);
        drop(state);
        self.announce();
        true
    }

    /// Records that the newest version of `name` cannot be used; the last good version, if any, keeps
    /// serving. Returns whether the check now has no good version (its objects are affected).
    pub fn reject(&self, name: &str, rejection: Rejection) -> bool {
        let mut state = self.state();
        let entry = state.entries.entry(name.to_owned()).or_default();
        if entry.rejection.as_ref() == Some(&rejection) {
            return entry.good.is_none();
        }
        let had_good = entry.good.is_some();
        let old_kind = entry.gates().cloned();
        entry.rejection = Some(rejection);
        let new_kind = entry.gates().cloned();
        // Objects only see a rejection when no good version hides it.
        if !had_good {
            state.bump([old_kind, new_kind]);
        }
        drop(state);
        self.announce();
        !had_good
    }

    /// Removes a check (its ConfigMap was deleted). Returns the kind it gated.
    pub fn remove(&self, name: &str) -> Option<GatedKind> {
        let mut state = self.state();
        let kind = state.entries.remove(name)?.gates().cloned();
        state.bump([kind.clone()]);
        drop(state);
        self.announce();
        kind
    }

    /// The checks of `kind`, in evaluation order (order, then name).
    pub fn for_kind(&self, kind: &GatedKind) -> Vec<GateEntry> {
        let state = self.state();
        let mut entries: Vec<(i32, &String, GateEntry)> = state
            .entries
            .iter()
            .filter(|(_, entry)| entry.gates() == Some(kind))
            .filter_map(|(name, entry)| {
                let gate_entry = match (&entry.good, &entry.rejection) {
                    (Some(good), _) => GateEntry::Ready(good.clone()),
                    (None, Some(rejection)) => GateEntry::Unavailable {
                        name: name.clone(),
                        failure_policy: rejection.failure_policy,
                        mode: rejection.mode,
                        selector: rejection.selector.clone(),
                        pause: rejection.pause.as_deref().cloned(),
                        problem: rejection.problem.clone(),
                    },
                    (None, None) => return None,
                };
                Some((entry.order(), name, gate_entry))
            })
            .collect();
        entries.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        entries.into_iter().map(|(_, _, entry)| entry).collect()
    }

    /// Every kind some check gates.
    pub fn kinds(&self) -> BTreeSet<GatedKind> {
        self.state()
            .entries
            .values()
            .filter_map(|entry| entry.gates().cloned())
            .collect()
    }

    /// The names of every check the set knows, good or not.
    pub fn names(&self) -> Vec<String> {
        self.state().entries.keys().cloned().collect()
    }

    /// Changes whenever the checks of `kind` change; 0 when they never did.
    pub fn revision(&self, kind: &GatedKind) -> u64 {
        self.state().revisions.get(kind).copied().unwrap_or(0)
    }

    /// Number of good checks per kind, for metrics.
    pub fn loaded_per_kind(&self) -> BTreeMap<GatedKind, usize> {
        let mut counts = BTreeMap::new();
        for check in self
            .state()
            .entries
            .values()
            .filter_map(|entry| entry.good.as_ref())
        {
            *counts.entry(check.settings.gates.clone()).or_default() += 1;
        }
        counts
    }

    /// A receiver that sees a new value after every change to the set.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn announce(&self) {
        self.changes.send_modify(|generation| *generation += 1);
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that matters more than
        // stopping: recover the guard.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether two loaded versions behave identically (same bytes and settings).
fn same_version(a: &LoadedCheck, b: &LoadedCheck) -> bool {
    a.digest() == b.digest() && a.settings == b.settings && a.stand_in_note == b.stand_in_note
}

/// The switch the enforced checks among `entries` (one kind's) agree on: `Ok(None)` when none sets one, an
/// error naming the disagreement when they differ. A check with no usable version counts with the switch
/// its ConfigMap names, since it still holds objects (`failurePolicy: Fail`): after a restart that lost
/// its last good version, its objects stay paused. A monitored check's switch counts only once it is
/// enforced: monitoring never pauses anything, not even at admission.
pub(crate) fn switch_of(entries: &[GateEntry]) -> Result<Option<PauseSwitch>, String> {
    agreed(entries.iter().filter_map(|entry| match entry {
        GateEntry::Ready(check) if check.settings.mode == CheckMode::Enforce => {
            Some((check.settings.name.as_str(), check.settings.pause.as_ref()))
        }
        GateEntry::Unavailable {
            name,
            mode: CheckMode::Enforce,
            pause,
            ..
        } => Some((name.as_str(), pause.as_ref())),
        GateEntry::Ready(_) | GateEntry::Unavailable { .. } => None,
    }))
}

/// The selector covering every object the enforced checks among `entries` gate (with or without a usable
/// version, as [`switch_of`]): `Some` when they all have the same selector, `None` when one gates every
/// object (or they differ: the admission policy then holds every object, and the operator releases those
/// no check selects at once).
pub(crate) fn selector_of(entries: &[GateEntry]) -> Option<ObjectSelector> {
    common_selector(entries.iter().filter_map(|entry| match entry {
        GateEntry::Ready(check) if check.settings.mode == CheckMode::Enforce => {
            Some(check.settings.selector.as_ref())
        }
        GateEntry::Unavailable {
            mode: CheckMode::Enforce,
            selector,
            ..
        } => Some(selector.as_ref()),
        GateEntry::Ready(_) | GateEntry::Unavailable { .. } => None,
    }))
}

/// The one selector all of `selectors` are (`None` for no selector at all, or when one is `None` or two
/// differ).
fn common_selector<'a>(
    mut selectors: impl Iterator<Item = Option<&'a ObjectSelector>>,
) -> Option<ObjectSelector> {
    let first = selectors.next()??;
    selectors
        .all(|selector| selector == Some(first))
        .then(|| first.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::CheckSource;
    use preflight_engine::EngineConfig;

    #[test]
    fn a_memory_limit_above_the_engines_largest_is_refused_and_one_at_it_loads() {
        let engine = Engine::new(EngineConfig {
            max_concurrent_evaluations: 1,
            max_memory_bytes: 128 << 20,
            ..EngineConfig::default()
        })
        .unwrap();
        let source = |memory_bytes: usize| {
            let mut source = CheckSource::new(
                "ops/meta",
                GatedKind::parse("App.example.com").unwrap(),
                preflight_test_support::check_bytes("required-metadata"),
            );
            source.settings.limits.memory_bytes = memory_bytes;
            source
        };
        let refused = LoadedCheck::load(&engine, source(1 << 30)).unwrap_err();
        assert_eq!(refused.cause, RejectionCause::ConfigMap);
        assert_eq!(
            refused.problem,
            "memoryLimit 1.0 GiB is above the largest the operator gives a check (its --max-memory, here 128.0 MiB)"
        );
        assert!(LoadedCheck::load(&engine, source(128 << 20)).is_ok());
    }

    #[test]
    fn a_check_without_a_usable_version_names_the_switch_and_selector_of_its_config_map() {
        let suspend = PauseSwitch::parse("field:spec.suspend=true").unwrap();
        let paused = PauseSwitch::parse("annotation:example.com/paused=true").unwrap();
        let staging = ObjectSelector::parse("matchLabels: {env: staging}").unwrap();
        let unavailable = |name: &str, mode, pause: &PauseSwitch| GateEntry::Unavailable {
            name: name.to_owned(),
            failure_policy: FailurePolicy::Fail,
            mode,
            selector: Some(staging.clone()),
            pause: Some(pause.clone()),
            problem: "timeout `forever` is not a duration between 1ms and 1m".to_owned(),
        };
        let broken = [unavailable("ops/broken", CheckMode::Enforce, &suspend)];
        assert_eq!(switch_of(&broken), Ok(Some(suspend.clone())));
        assert_eq!(selector_of(&broken), Some(staging.clone()));
        let monitored = [unavailable("ops/watched", CheckMode::Monitor, &suspend)];
        assert_eq!(switch_of(&monitored), Ok(None), "monitoring pauses nothing");
        assert_eq!(selector_of(&monitored), None);
        let disagreeing = [
            unavailable("ops/broken", CheckMode::Enforce, &suspend),
            unavailable("ops/other", CheckMode::Enforce, &paused),
        ];
        assert!(switch_of(&disagreeing).is_err());
    }

    #[test]
    fn the_admission_policy_selects_only_what_every_enforced_check_selects() {
        let staging = ObjectSelector::parse("matchLabels: {env: staging}").unwrap();
        let production = ObjectSelector::parse("matchLabels: {env: production}").unwrap();
        let table: [(&[Option<&ObjectSelector>], Option<&ObjectSelector>); 5] = [
            (&[], None),
            (&[Some(&staging)], Some(&staging)),
            (&[Some(&staging), Some(&staging)], Some(&staging)),
            (&[Some(&staging), None], None),
            (&[Some(&staging), Some(&production)], None),
        ];
        for (selectors, expected) in table {
            assert_eq!(
                common_selector(selectors.iter().copied()).as_ref(),
                expected,
                "{selectors:?}"
            );
        }
    }
}

/// A kind's switch, resolved once per revision of its checks: the reconcile path reads it for every object,
/// and the checks change rarely. While the checks disagree, there is none.
#[derive(Debug, Default)]
pub(crate) struct KindSwitch {
    resolved: Mutex<Option<(u64, Option<PauseSwitch>)>>,
}

impl KindSwitch {
    /// The switch of `kind` under its current checks.
    pub fn get(&self, checks: &CheckSet, kind: &GatedKind) -> Option<PauseSwitch> {
        // Read before the entries: a change in between is seen as a new revision next time.
        let revision = checks.revision(kind);
        let mut resolved = self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, switch)) = resolved.as_ref()
            && *seen == revision
        {
            return switch.clone();
        }
        let switch = switch_of(&checks.for_kind(kind)).ok().flatten();
        *resolved = Some((revision, switch.clone()));
        switch
    }
}
