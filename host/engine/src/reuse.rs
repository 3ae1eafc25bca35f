//! Instances kept between evaluations for checks whose isolation is [`Isolation::Reuse`]: idle instances
//! keyed by check, configuration, namespace, gated kind and grant holder, so that no two configurations,
//! namespaces, kinds or holders of grants (two check ConfigMaps of one component) ever share one.
//! Each idle instance keeps its pool slot; the pool holds at most half of the engine's slots, and an
//! evaluation that finds no free slot retires an idle instance to make room.
//!
//! [`Isolation::Reuse`]: crate::Isolation::Reuse

use crate::cluster::GrantHolder;
use crate::digest::Digest;
use crate::guest_state::GuestState;
use crate::instance::Bound;
use crate::request::Request;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

/// Which evaluations may share an instance: the same check, configuration, namespace, gated kind (group
/// and kind) and grant holder.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct WarmKey {
    check: Digest,
    config: String,
    namespace: Option<String>,
    group: String,
    kind: String,
    holder: GrantHolder,
}

impl WarmKey {
    pub fn of(check: Digest, request: &Request, holder: &GrantHolder) -> Self {
        Self {
            check,
            config: request.config.clone(),
            namespace: request.target.namespace.clone(),
            group: request.target.group.clone(),
            kind: request.target.kind.clone(),
            holder: holder.clone(),
        }
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

#[derive(Default)]
struct Idle {
    by_key: HashMap<WarmKey, Vec<Warm>>,
    count: usize,
}

impl Idle {
    /// The most recently idle instance for `key`, forgetting the key when it has no more.
    fn pop(&mut self, key: &WarmKey) -> Option<Warm> {
        let instances = self.by_key.get_mut(key)?;
        let warm = instances.pop();
        if instances.is_empty() {
            self.by_key.remove(key);
        }
        self.count -= usize::from(warm.is_some());
        warm
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

    /// An idle instance for `key`, if there is one.
    pub fn take(&self, key: &WarmKey) -> Option<Warm> {
        self.lock().pop(key)
    }

    /// Keeps `warm` for the next evaluation of `key`, unless the pool is full (then it is retired).
    pub fn put(&self, key: WarmKey, warm: Warm) {
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
