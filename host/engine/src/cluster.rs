//! Read-only lookups of other objects (`preflight:check/cluster`), as the engine sees them: a trait the
//! embedder implements (the operator, over its watch caches) and a per-evaluation call budget. The engine
//! knows nothing of Kubernetes: which kinds and namespaces a check may read is the implementation's rule.

use crate::request::Target;
use std::future::Future;
use std::pin::Pin;

/// A kind of object, as in an object's `apiVersion` and `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKind {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// A boxed future, as the lookup trait returns (it is used as `dyn ClusterLookup`).
pub type LookupFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// Answers a check's lookups. Errors are messages the check receives (and the operator reports): name what
/// was refused or failed, e.g. `Secret default/db is not granted to this check`.
pub trait ClusterLookup: Send + Sync {
    /// The object `name` of `kind` as JSON, `None` when it does not exist. `namespace` `None`: the gated
    /// object's (`target`'s) namespace.
    fn get<'a>(
        &'a self,
        target: &'a Target,
        kind: ObjectKind,
        namespace: Option<String>,
        name: String,
    ) -> LookupFuture<'a, Option<String>>;

    /// The objects of `kind` matching `label_selector`, as JSON, sorted by namespace and name.
    fn list<'a>(
        &'a self,
        target: &'a Target,
        kind: ObjectKind,
        namespace: Option<String>,
        label_selector: String,
    ) -> LookupFuture<'a, Vec<String>>;
}

/// What a check may reach beyond its request, given to [`crate::Engine::evaluate_with`] per evaluation.
/// Nothing is granted by default: [`Grants::default`] refuses every request and lookup.
#[derive(Clone)]
pub struct Grants {
    /// Outbound HTTP, with its allow-list, limits and cache.
    pub http: Option<std::sync::Arc<crate::HttpGrant>>,
    /// Lookups of other objects.
    pub cluster: Option<std::sync::Arc<dyn ClusterLookup>>,
    /// Lookups one evaluation may make, when `cluster` grants any ([`Grants::DEFAULT_LOOKUPS_PER_EVALUATION`]
    /// by default; 0 refuses every lookup).
    pub lookups_per_evaluation: u32,
    /// Whose grants these are. Under `isolation: reuse` an instance serves only evaluations of the same
    /// holder (besides the same check, configuration, namespace and kind), so that what one holder's
    /// evaluation left in guest memory (a Secret it may read, an object it looked up) is never seen under
    /// another holder's grants. The operator makes one per version of each check ConfigMap.
    pub holder: GrantHolder,
}

/// The identity of one set of grants: see [`Grants::holder`]. Each [`GrantHolder::new`] is distinct from
/// every other, even for the same name; [`GrantHolder::default`] is the one anonymous holder (the CLI's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GrantHolder {
    id: u64,
    name: std::sync::Arc<str>,
}

impl GrantHolder {
    /// A new holder, named for the logs (e.g. a check ConfigMap's `namespace/name`).
    pub fn new(name: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            name: name.into(),
        }
    }

    /// The name it was made with.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Grants {
    /// 16 lookups per evaluation.
    pub const DEFAULT_LOOKUPS_PER_EVALUATION: u32 = 16;
}

impl Default for Grants {
    /// Nothing granted; a budget of [`Grants::DEFAULT_LOOKUPS_PER_EVALUATION`] for when lookups are.
    fn default() -> Self {
        Self {
            http: None,
            cluster: None,
            lookups_per_evaluation: Self::DEFAULT_LOOKUPS_PER_EVALUATION,
            holder: GrantHolder::default(),
        }
    }
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grants")
            .field("http", &self.http)
            .field("cluster", &self.cluster.is_some())
            .field("lookups_per_evaluation", &self.lookups_per_evaluation)
            .field("holder", &self.holder)
            .finish()
    }
}
