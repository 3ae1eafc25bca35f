//! Instances kept between evaluations for checks whose isolation is [`Isolation::Reuse`]: idle instances
//! keyed by check, configuration, namespace, gated kind and grant holder, so that no two configurations,
//! namespaces, kinds or holders of grants (two check ConfigMaps of one component) ever share one.
//! Each idle instance keeps its pool slot; the pool holds at most half of the engine's slots, and an
//! evaluation that finds no free slot retires an idle instance to make room.
//!
//! An evaluation looks its instance up with a key borrowed from its request ([`WarmKeyRef`]): the owned key
//! ([`WarmKey`]) is made once, for an instance new to the pool, and travels with the instance between
//! [`WarmPool::take`] and [`WarmPool::put`].
//!
//! [`Isolation::Reuse`]: crate::Isolation::Reuse

use crate::cluster::GrantHolder;
use crate::digest::Digest;
use crate::guest_state::GuestState;
use crate::instance::Bound;
use crate::request::Request;
use hashbrown::hash_map::EntryRef;
use hashbrown::{Equivalent, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

/// Which evaluations may share an instance: the same check, configuration, namespace, gated kind (group
/// and kind) and grant holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WarmKey {
    check: Digest,
    holder: GrantHolder,
    config: String,
    namespace: Option<String>,
    group: String,
    kind: String,
}

/// A [`WarmKey`] borrowed from an evaluation's request: equal to the owned key made from it, and hashed the
/// same way (the owned key hashes through this form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct WarmKeyRef<'a> {
    check: Digest,
    holder: &'a GrantHolder,
    config: &'a str,
    namespace: Option<&'a str>,
    group: &'a str,
    kind: &'a str,
}

impl<'a> WarmKeyRef<'a> {
    /// The key of evaluating `check` on `request` under the grants of `holder`.
    pub fn of(check: Digest, request: &'a Request, holder: &'a GrantHolder) -> Self {
        Self {
            check,
            holder,
            config: &request.config,
            namespace: request.target.namespace.as_deref(),
            group: &request.target.group,
            kind: &request.target.kind,
        }
    }

    /// The owned key, for an instance new to the pool.
    pub fn to_owned_key(self) -> Arc<WarmKey> {
        Arc::new(WarmKey {
            check: self.check,
            holder: self.holder.clone(),
            config: self.config.to_owned(),
            namespace: self.namespace.map(str::to_owned),
            group: self.group.to_owned(),
            kind: self.kind.to_owned(),
        })
    }
}

impl WarmKey {
    fn borrowed(&self) -> WarmKeyRef<'_> {
        WarmKeyRef {
            check: self.check,
            holder: &self.holder,
            config: &self.config,
            namespace: self.namespace.as_deref(),
            group: &self.group,
            kind: &self.kind,
        }
    }
}

impl Hash for WarmKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.borrowed().hash(state);
    }
}

impl Equivalent<Arc<WarmKey>> for WarmKeyRef<'_> {
    fn equivalent(&self, key: &Arc<WarmKey>) -> bool {
        *self == key.borrowed()
    }
}

/// An idle instance: its store, its bindings, how many evaluations it served, and its pool slot.
pub(crate) struct Warm {
    pub store: Store<GuestState>,
    pub bound: Bound,
    pub uses: u32,
    pub slot: Option<OwnedSemaphorePermit>,
}

/// The idle instances.
pub(crate) struct WarmPool {
    idle: Mutex<Idle>,
    capacity: usize,
}

/// Idle instances by key. The map is hashbrown's with its default hasher (foldhash): keys come from the
/// cluster (namespaces, configurations), but the map never holds more than the pool's capacity of them.
#[derive(Default)]
struct Idle {
    by_key: HashMap<Arc<WarmKey>, Vec<Warm>>,
    count: usize,
}

impl Idle {
    /// The most recently idle instance for `key`, with its owned key; the map forgets a key that has no
    /// instance left.
    fn pop<Q: Hash + Equivalent<Arc<WarmKey>> + ?Sized>(
        &mut self,
        key: &Q,
    ) -> Option<(Arc<WarmKey>, Warm)> {
        let EntryRef::Occupied(mut entry) = self.by_key.entry_ref(key) else {
            return None;
        };
        let warm = entry.get_mut().pop()?;
        let owned = if entry.get().is_empty() {
            entry.remove_entry().0
        } else {
            Arc::clone(entry.key())
        };
        self.count -= 1;
        Some((owned, warm))
    }
}

impl WarmPool {
    /// A pool of at most `capacity` idle instances.
    pub fn new(capacity: usize) -> Self {
        Self {
            idle: Mutex::new(Idle::default()),
            capacity,
        }
    }

    /// An idle instance for `key`, if there is one, with the owned key to [`WarmPool::put`] it back under.
    pub fn take(&self, key: &WarmKeyRef<'_>) -> Option<(Arc<WarmKey>, Warm)> {
        self.lock().pop(key)
    }

    /// Keeps `warm` for the next evaluation of `key`, unless the pool is full (then it is retired).
    pub fn put(&self, key: Arc<WarmKey>, warm: Warm) {
        let mut idle = self.lock();
        if idle.count >= self.capacity {
            drop(idle);
            drop(warm);
            return;
        }
        idle.count += 1;
        idle.by_key.entry(key).or_default().push(warm);
    }

    /// Retires one idle instance, freeing its pool slot; false when there is none.
    pub fn evict_one(&self) -> bool {
        let mut idle = self.lock();
        let evicted = match idle.by_key.keys().next().cloned() {
            Some(key) => idle.pop(&key),
            None => None,
        };
        drop(idle);
        evicted.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Idle> {
        // Plain bookkeeping: a panic elsewhere leaves nothing inconsistent behind.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;
    use std::time::SystemTime;

    fn request(config: &str, namespace: Option<&str>, group: &str, kind: &str) -> Request {
        Request {
            object: "{}".into(),
            config: config.into(),
            target: Target {
                group: group.into(),
                version: "v1".into(),
                kind: kind.into(),
                namespace: namespace.map(str::to_owned),
                name: "one".into(),
            },
            now: SystemTime::UNIX_EPOCH,
        }
    }

    /// A hasher that puts every key in one bucket, so that only equality tells keys apart.
    #[derive(Default)]
    struct Colliding;

    impl Hasher for Colliding {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, _: &[u8]) {}
    }

    /// `base`'s key finds what is stored under it in `map` from a request that differs only where a key
    /// does not look, and nothing from a request that differs in any part of the key.
    fn finds_exactly_the_owned_key<S: std::hash::BuildHasher>(
        mut map: HashMap<Arc<WarmKey>, &str, S>,
    ) {
        let check = Digest::of(b"check");
        let holder = GrantHolder::new("ns/checks");
        let base = request("{}", Some("team-a"), "example.com", "App");
        map.insert(WarmKeyRef::of(check, &base, &holder).to_owned_key(), "base");

        let mut same = request("{}", Some("team-a"), "example.com", "App");
        same.target.name = "two".into();
        same.target.version = "v2".into();
        same.object = r#"{"spec":{}}"#.into();
        assert_eq!(
            map.get(&WarmKeyRef::of(check, &same, &holder)),
            Some(&"base")
        );

        let other_holder = GrantHolder::new("ns/checks");
        let differing = [
            (
                Digest::of(b"other"),
                &holder,
                request("{}", Some("team-a"), "example.com", "App"),
            ),
            (
                check,
                &other_holder,
                request("{}", Some("team-a"), "example.com", "App"),
            ),
            (
                check,
                &holder,
                request(r#"{"a":1}"#, Some("team-a"), "example.com", "App"),
            ),
            (
                check,
                &holder,
                request("{}", Some("team-b"), "example.com", "App"),
            ),
            (check, &holder, request("{}", None, "example.com", "App")),
            (
                check,
                &holder,
                request("{}", Some("team-a"), "other.com", "App"),
            ),
            (
                check,
                &holder,
                request("{}", Some("team-a"), "example.com", "Db"),
            ),
        ];
        for (digest, holder, request) in &differing {
            let key = WarmKeyRef::of(*digest, request, holder);
            assert_eq!(
                map.get(&key),
                None,
                "{key:?} must not share base's instance"
            );
        }
    }

    #[test]
    fn a_borrowed_key_hashes_as_the_owned_key_made_from_it() {
        finds_exactly_the_owned_key(HashMap::new());
    }

    #[test]
    fn a_borrowed_key_equals_only_the_owned_key_made_from_it() {
        finds_exactly_the_owned_key(HashMap::with_hasher(std::hash::BuildHasherDefault::<
            Colliding,
        >::default()));
    }
}
