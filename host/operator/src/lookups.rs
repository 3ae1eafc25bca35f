//! The lookups checks make (`preflight:check/cluster`), served from watch caches started on first use and
//! shared by every check, under each check's grant: which kinds, which namespaces, which Secrets by name.
//!
//! - A cache per kind and namespace (or per cluster-scoped kind) is a kube-rs reflector, started by the
//!   first lookup that needs it; a lookup waits for its first complete list at most [`SYNC_TIMEOUT`].
//! - Memory is capped: at most [`MAX_OBJECTS_PER_CACHE`] objects per cache and [`MAX_CACHES`] caches; a
//!   cache over the cap is dropped and lookups of it answer why.
//! - A kind the operator's RBAC cannot list or watch is reported with the verb and resource to grant,
//!   instead of a lookup that hangs.
//! - Secrets are never cached or listed: a granted Secret is read by name, directly, so that the operator
//!   needs `get` on that Secret only (a Role with `resourceNames`).

use crate::api_answer::api_answer;
use crate::capabilities::{LookupSettings, secret_kind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::{Expression, Selector, SelectorExt};
use kube::discovery::Scope;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use preflight_engine::{ClusterLookup, LookupFuture, ObjectKind, Target};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Longest wait for a new cache's first complete list.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// Objects one cache may hold.
pub const MAX_OBJECTS_PER_CACHE: usize = 10_000;
/// Caches the operator keeps at once.
pub const MAX_CACHES: usize = 64;

/// A cache's key: the kind and the namespace watched (`None` for a cluster-scoped kind).
type CacheKey = (ObjectKind, Option<String>);

/// The watch caches of every looked-up kind, shared by all checks.
pub struct ObjectCaches {
    client: Client,
    state: Mutex<CachesState>,
}

#[derive(Default)]
struct CachesState {
    kinds: HashMap<ObjectKind, (ApiResource, Scope)>,
    caches: HashMap<CacheKey, Arc<ObjectCache>>,
    /// Caches dropped for exceeding the cap, and why.
    over_cap: HashMap<CacheKey, String>,
}

struct ObjectCache {
    store: Store<DynamicObject>,
    resource: ApiResource,
    /// The last error of the watch, when it cannot list (cleared once it lists).
    error: Arc<Mutex<Option<String>>>,
    /// The cache grew past its cap: its watch has stopped and it is dropped on the next lookup.
    over_cap: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ObjectCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ObjectCaches {
    /// No caches yet; they start on first use.
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(Self {
            client,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CachesState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The API resource and scope of `kind`, discovered once.
    async fn discover(&self, kind: &ObjectKind) -> Result<(ApiResource, Scope), String> {
        if let Some(found) = self.state().kinds.get(kind) {
            return Ok(found.clone());
        }
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|error| {
                format!(
                    "the API server does not serve {kind}: {}",
                    api_answer(&error)
                )
            })?;
        let found = (resource, capabilities.scope);
        self.state().kinds.insert(kind.clone(), found.clone());
        Ok(found)
    }

    /// The synced cache of `kind` in `namespace`, started if needed.
    async fn cache(
        &self,
        kind: &ObjectKind,
        namespace: Option<String>,
    ) -> Result<Arc<ObjectCache>, String> {
        let key = (kind.clone(), namespace);
        let cache = {
            let state = self.state();
            if let Some(why) = state.over_cap.get(&key) {
                return Err(why.clone());
            }
            match state.caches.get(&key) {
                Some(cache) => Some(Arc::clone(cache)),
                None if state.caches.len() >= MAX_CACHES => {
                    return Err(format!(
                        "the operator already keeps {MAX_CACHES} lookup caches (kinds × namespaces); \
                         no more are started"
                    ));
                }
                None => None,
            }
        };
        let cache = match cache {
            Some(cache) => cache,
            None => {
                let (resource, _) = self.discover(kind).await?;
                let started = self.start(&key, resource);
                let mut state = self.state();
                Arc::clone(state.caches.entry(key.clone()).or_insert(started))
            }
        };
        let waited = Instant::now();
        loop {
            let error = cache
                .error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(error) = error {
                if cache.over_cap.load(Ordering::Relaxed) {
                    let mut state = self.state();
                    state.caches.remove(&key);
                    state.over_cap.insert(key, error.clone());
                }
                return Err(error);
            }
            if tokio::time::timeout(Duration::from_millis(20), cache.store.wait_until_ready())
                .await
                .is_ok_and(|ready| ready.is_ok())
            {
                return Ok(cache);
            }
            if waited.elapsed() >= SYNC_TIMEOUT {
                return Err(format!(
                    "the cache of {kind} did not sync within {SYNC_TIMEOUT:?}"
                ));
            }
        }
    }

    /// Starts the watch of `key`; its task records the watch's last error, and ends (setting a permanent
    /// error) when the cache grows past [`MAX_OBJECTS_PER_CACHE`].
    fn start(&self, key: &CacheKey, resource: ApiResource) -> Arc<ObjectCache> {
        let api: Api<DynamicObject> = match &key.1 {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let error = Arc::new(Mutex::new(None));
        let over_cap = Arc::new(AtomicBool::new(false));
        let where_ = match &key.1 {
            Some(namespace) => format!("in namespace {namespace}"),
            None => "cluster-wide".to_owned(),
        };
        let (reported, full, counted, plural, group, kind) = (
            Arc::clone(&error),
            Arc::clone(&over_cap),
            store.clone(),
            resource.plural.clone(),
            resource.group.clone(),
            key.0.clone(),
        );
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .reflect(writer)
                .boxed();
            while let Some(event) = events.next().await {
                let mut slot = reported.lock().unwrap_or_else(PoisonError::into_inner);
                match event {
                    Ok(_) if counted.len() > MAX_OBJECTS_PER_CACHE => {
                        *slot = Some(format!(
                            "{kind} {where_} has more than {MAX_OBJECTS_PER_CACHE} objects; preflight \
                             caches at most that many per kind and namespace"
                        ));
                        full.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(_) => *slot = None,
                    Err(error) => *slot = Some(describe(&error, &plural, &group, &where_)),
                }
            }
        });
        Arc::new(ObjectCache {
            store,
            resource,
            error,
            over_cap,
            task,
        })
    }
}

/// What a watch error means for the administrator: for a refusal by RBAC, which verb on which resource to
/// grant the operator.
fn describe(error: &watcher::Error, plural: &str, group: &str, where_: &str) -> String {
    let resource = if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    };
    let answer = match error {
        watcher::Error::InitialListFailed(answer @ kube::Error::Api(_))
        | watcher::Error::WatchStartFailed(answer @ kube::Error::Api(_))
        | watcher::Error::WatchFailed(answer @ kube::Error::Api(_)) => Some(answer),
        _ => None,
    };
    match answer {
        Some(kube::Error::Api(status)) if status.code == 403 => format!(
            "the operator may not list and watch {resource} {where_} (RBAC): grant its ServiceAccount \
             the verbs get, list and watch on {resource}"
        ),
        Some(answer) => format!("watching {resource} {where_}: {}", api_answer(answer)),
        None => format!("watching {resource} {where_}: {error}"),
    }
}

/// A check's view of the caches: only what its `lookups` key grants.
pub struct GrantedLookups {
    settings: LookupSettings,
    caches: Arc<ObjectCaches>,
}

impl GrantedLookups {
    /// `caches` under `settings`.
    pub fn new(settings: LookupSettings, caches: Arc<ObjectCaches>) -> Self {
        Self { settings, caches }
    }

    /// Refuses a kind the check was not granted.
    fn granted_kind(&self, kind: &ObjectKind) -> Result<(), String> {
        if self.settings.kinds.contains(kind) {
            Ok(())
        } else {
            Err(format!(
                "{kind} is not granted to this check (its ConfigMap's lookups.kinds lists {})",
                self.settings
                    .kinds
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }

    /// The namespace a lookup reads (`None` for a cluster-scoped kind), refusing one beyond the gated
    /// object's namespace without cluster scope.
    async fn namespace(
        &self,
        target: &Target,
        kind: &ObjectKind,
        requested: Option<String>,
    ) -> Result<Option<String>, String> {
        let (_, scope) = self.caches.discover(kind).await?;
        let own = target.namespace.clone();
        let namespace = match scope {
            Scope::Cluster => None,
            Scope::Namespaced => {
                Some(requested.clone().or_else(|| own.clone()).ok_or_else(|| {
                    format!("{kind} is namespaced: name a namespace (the gated object has none)")
                })?)
            }
        };
        let beyond = match (&scope, &namespace) {
            (Scope::Cluster, _) => true,
            (Scope::Namespaced, namespace) => *namespace != own,
        };
        if beyond && !self.settings.cluster_scope {
            return Err(match namespace {
                Some(namespace) => format!(
                    "namespace {namespace} is beyond the gated object's namespace {} and cluster scope is \
                     not granted (lookups.clusterScope)",
                    own.unwrap_or_default()
                ),
                None => format!(
                    "{kind} is cluster-scoped and cluster scope is not granted (lookups.clusterScope)"
                ),
            });
        }
        Ok(namespace)
    }

    /// A granted Secret, read directly (never cached).
    async fn secret(&self, namespace: &str, name: &str) -> Result<Option<String>, String> {
        if !self.settings.secrets.iter().any(|granted| granted == name) {
            return Err(format!(
                "Secret {namespace}/{name} is not granted to this check (lookups.secrets lists Secrets by name)"
            ));
        }
        let api: Api<Secret> = Api::namespaced(self.caches.client.clone(), namespace);
        let secret = api.get_opt(name).await.map_err(|error| match error {
            kube::Error::Api(status) if status.code == 403 => format!(
                "the operator may not get Secret {namespace}/{name} (RBAC): grant its ServiceAccount get \
                 on this Secret (a Role with resourceNames)"
            ),
            error => format!("reading Secret {namespace}/{name}: {}", api_answer(&error)),
        })?;
        secret
            .map(|secret| serde_json::to_string(&secret).map_err(|error| error.to_string()))
            .transpose()
    }
}

/// An object as a check sees it: JSON without `metadata.managedFields`.
fn to_json(object: &DynamicObject) -> String {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(metadata) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        metadata.remove("managedFields");
    }
    value.to_string()
}

impl ClusterLookup for GrantedLookups {
    fn get<'a>(
        &'a self,
        target: &'a Target,
        kind: ObjectKind,
        namespace: Option<String>,
        name: String,
    ) -> LookupFuture<'a, Option<String>> {
        Box::pin(async move {
            self.granted_kind(&kind)?;
            let namespace = self.namespace(target, &kind, namespace).await?;
            if kind == secret_kind() {
                return self
                    .secret(namespace.as_deref().unwrap_or_default(), &name)
                    .await;
            }
            let cache = self.caches.cache(&kind, namespace.clone()).await?;
            let mut reference = ObjectRef::new_with(&name, cache.resource.clone());
            if let Some(namespace) = namespace {
                reference = reference.within(&namespace);
            }
            Ok(cache.store.get(&reference).map(|object| to_json(&object)))
        })
    }

    fn list<'a>(
        &'a self,
        target: &'a Target,
        kind: ObjectKind,
        namespace: Option<String>,
        label_selector: String,
    ) -> LookupFuture<'a, Vec<String>> {
        Box::pin(async move {
            self.granted_kind(&kind)?;
            if kind == secret_kind() {
                return Err("Secrets are never listed: get a granted Secret by name".to_owned());
            }
            let selector = parse_selector(&label_selector)?;
            let namespace = self.namespace(target, &kind, namespace).await?;
            let cache = self.caches.cache(&kind, namespace).await?;
            let mut found: Vec<Arc<DynamicObject>> = cache
                .store
                .state_filter(|object| selector.matches(object.labels()));
            found.sort_by_key(|object| (object.namespace(), object.name_any()));
            Ok(found.iter().map(|object| to_json(object)).collect())
        })
    }
}

/// Parses a Kubernetes label selector: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`,
/// joined by commas.
pub fn parse_selector(text: &str) -> Result<Selector, String> {
    let invalid = |part: &str| format!("label selector {text:?}: cannot read {part:?}");
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    let set = |values: &str| -> BTreeSet<String> {
        values
            .trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .collect()
    };
    let mut expressions = Vec::new();
    for part in parts
        .iter()
        .map(|part| part.trim())
        .filter(|part| !part.is_empty())
    {
        let expression = if let Some((key, values)) = part.split_once(" notin ") {
            Expression::NotIn(key.trim().to_owned(), set(values))
        } else if let Some((key, values)) = part.split_once(" in ") {
            Expression::In(key.trim().to_owned(), set(values))
        } else if let Some((key, value)) = part.split_once("!=") {
            Expression::NotEqual(key.trim().to_owned(), value.trim().to_owned())
        } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Expression::Equal(key.trim().to_owned(), value.trim().to_owned())
        } else if let Some(key) = part.strip_prefix('!') {
            Expression::DoesNotExist(key.trim().to_owned())
        } else {
            Expression::Exists(part.to_owned())
        };
        let key = match &expression {
            Expression::In(key, _)
            | Expression::NotIn(key, _)
            | Expression::Equal(key, _)
            | Expression::NotEqual(key, _)
            | Expression::Exists(key)
            | Expression::DoesNotExist(key) => key,
        };
        if key.is_empty() || key.contains([' ', '(', ')', '=', '!']) {
            return Err(invalid(part));
        }
        expressions.push(expression);
    }
    Ok(expressions.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_read_every_operator() {
        let db = labels(&[("app", "db"), ("tier", "backend")]);
        let cache = labels(&[("app", "cache")]);
        for (selector, matches_db, matches_cache) in [
            ("", true, true),
            ("app=db", true, false),
            ("app==db", true, false),
            ("app!=db", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app in (db, queue)", true, false),
            ("app notin (db,queue)", false, true),
            ("app in (db,cache),tier", true, false),
        ] {
            let parsed = parse_selector(selector).unwrap();
            assert_eq!(parsed.matches(&db), matches_db, "{selector} on db");
            assert_eq!(parsed.matches(&cache), matches_cache, "{selector} on cache");
        }
        assert!(parse_selector("=x").is_err());
        assert!(parse_selector("a b").is_err());
    }
}
