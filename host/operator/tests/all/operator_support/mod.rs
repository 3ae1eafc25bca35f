//! Shared by the operator's end-to-end tests: CRDs, check ConfigMaps built from real components, an
//! in-process operator, and probes of conditions and metrics. Each test gates its own kind, so tests
//! running at once never gate each other's objects.

#![allow(dead_code)] // each test binary uses a different subset

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use preflight_kube_harness::{apply_crd, eventually};
use preflight_operator::engine::{EngineConfig, Limits};
use preflight_operator::{
    CheckSelection, GATES_LABEL, Operator, OperatorConfig, PreflightCondition, condition_of,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// How long an end-to-end test waits for something the operator does promptly.
pub const SOON: Duration = Duration::from_secs(30);

/// The first Event in `namespace` with `reason` that `matches`, waited for up to [`SOON`].
pub async fn event_where(
    client: &Client,
    namespace: &str,
    reason: &str,
    matches: impl Fn(&KubeEvent) -> bool,
) -> KubeEvent {
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), namespace);
    eventually(&format!("a matching {reason} Event"), SOON, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|event| event.reason.as_deref() == Some(reason) && matches(event))
    })
    .await
}

/// The first Event in `namespace` with `reason` whose note contains `text`, waited for up to [`SOON`].
pub async fn event_noting(client: &Client, namespace: &str, reason: &str, text: &str) -> KubeEvent {
    event_where(client, namespace, reason, |event| {
        event
            .note
            .as_deref()
            .is_some_and(|note| note.contains(text))
    })
    .await
}

/// The first Event in `namespace` with `reason`, waited for up to [`SOON`].
pub async fn event(client: &Client, namespace: &str, reason: &str) -> KubeEvent {
    event_where(client, namespace, reason, |_| true).await
}

/// The reasons of the Events `kubectl describe configmap NAME` shows: core Events selected by the
/// ConfigMap's kind, name, namespace and uid, as kubectl selects them.
pub async fn reasons_described_on_config_map(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Vec<String> {
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .unwrap();
    let uid = config_map.metadata.uid.unwrap_or_default();
    let selector = format!(
        "involvedObject.kind=ConfigMap,involvedObject.name={name},\
         involvedObject.namespace={namespace},involvedObject.uid={uid}"
    );
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|event| event.reason)
        .collect()
}

/// The object an Event is about, by name.
pub fn regarding(event: &KubeEvent) -> Option<&str> {
    event
        .regarding
        .as_ref()
        .and_then(|object| object.name.as_deref())
}

/// A namespaced kind made for one test.
pub struct TestKind {
    pub group: String,
    pub kind: String,
    pub resource: ApiResource,
}

impl TestKind {
    /// `Kind.group`, as the gates label wants it.
    pub fn gates(&self) -> String {
        format!("{}.{}", self.kind, self.group)
    }

    pub fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.resource)
    }

    /// Deletes the CRD, and with it every object of the kind.
    pub async fn remove(&self, client: &Client) {
        let name = format!("{}.{}", self.resource.plural, self.group);
        Api::<CustomResourceDefinition>::all(client.clone())
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap_or_else(|error| panic!("deleting CRD {name}: {error}"));
    }
}

/// Installs a CRD `Kind` in group `<namespace>.e2e.preflight.test`: unique to the test run, so that objects
/// left by earlier runs are never gated by this one. With `status`, it has a status subresource whose
/// `conditions` list is atomic (the hardest case for not clobbering other writers); without, the condition
/// goes to an annotation. [`TestKind::remove`] deletes the CRD and its objects.
pub async fn install_kind(client: &Client, namespace: &str, kind: &str, status: bool) -> TestKind {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        }}
    }});
    install_kind_with_schema(client, namespace, kind, status, schema).await
}

/// [`install_kind`] with the version's `openAPIV3Schema` given.
pub async fn install_kind_with_schema(
    client: &Client,
    namespace: &str,
    kind: &str,
    status: bool,
    schema: serde_json::Value,
) -> TestKind {
    let group = format!("{namespace}.e2e.preflight.test");
    let plural = format!("{}s", kind.to_lowercase());
    let mut version = json!({
        "name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema},
    });
    if status {
        version["subresources"] = json!({"status": {}});
    }
    apply_crd(
        client,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
                "scope": "Namespaced",
                "versions": [version],
            }
        }),
    )
    .await;
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", kind), &plural);
    TestKind {
        group,
        kind: kind.to_owned(),
        resource,
    }
}

/// `component` as another component: the same code with a custom section appended (another digest).
pub fn another_version(component: &[u8]) -> Vec<u8> {
    let mut bytes = component.to_vec();
    let name = b"preflight-test-version";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.push(2);
    bytes.push(0);
    bytes.push(section.len() as u8);
    bytes.extend_from_slice(&section);
    bytes
}

/// Creates or replaces the check ConfigMap `name` (server-side apply, so tests can change any key).
pub async fn put_check(
    client: &Client,
    namespace: &str,
    name: &str,
    gates: &str,
    component: &[u8],
    data: &[(&str, &str)],
) {
    let mut config_map = ConfigMap::default();
    config_map.metadata.name = Some(name.to_owned());
    config_map.metadata.labels = Some(BTreeMap::from([(GATES_LABEL.to_owned(), gates.to_owned())]));
    config_map.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    config_map.binary_data = Some(BTreeMap::from([(
        "check.wasm".to_owned(),
        ByteString(component.to_vec()),
    )]));
    let mut value = serde_json::to_value(&config_map).unwrap();
    value["apiVersion"] = json!("v1");
    value["kind"] = json!("ConfigMap");
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("preflight-tests").force(),
            &Patch::Apply(value),
        )
        .await
        .unwrap_or_else(|error| panic!("applying check ConfigMap {name}: {error}"));
}

/// Creates an object of `kind` with `spec` and `labels`.
pub async fn create_object(
    client: &Client,
    kind: &TestKind,
    namespace: &str,
    name: &str,
    spec: serde_json::Value,
    labels: &[(&str, &str)],
) -> DynamicObject {
    let mut object = DynamicObject::new(name, &kind.resource).within(namespace);
    object.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    object.data = json!({"spec": spec});
    kind.api(client, namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|error| panic!("creating {name}: {error}"))
}

/// One test's world: a client, a fresh namespace for its check ConfigMaps and objects, its own kind, and
/// one check component.
pub struct Scenario {
    pub client: Client,
    pub namespace: String,
    pub kind: TestKind,
    /// The component [`Scenario::put`] ships.
    pub wasm: Vec<u8>,
    /// How long [`Scenario::wait`] waits.
    pub patience: Duration,
}

impl Scenario {
    /// A namespace named after `prefix`, a kind `kind` with a status subresource, and the component built
    /// from `package`.
    pub async fn new(prefix: &str, kind: &str, package: &str) -> Self {
        let client = preflight_kube_harness::admin_client().await;
        let namespace = preflight_kube_harness::test_namespace(&client, prefix).await;
        let kind = install_kind(&client, &namespace, kind, true).await;
        Self {
            client,
            namespace,
            kind,
            wasm: preflight_test_support::check_bytes(package),
            patience: Duration::from_secs(30),
        }
    }

    /// Ships the scenario's component as check `name` gating its kind, with `data` settings.
    pub async fn put(&self, name: &str, data: &[(&str, &str)]) {
        put_check(
            &self.client,
            &self.namespace,
            name,
            &self.kind.gates(),
            &self.wasm,
            data,
        )
        .await;
    }

    /// Creates an object of the scenario's kind.
    pub async fn create(&self, name: &str, labels: &[(&str, &str)]) -> DynamicObject {
        create_object(
            &self.client,
            &self.kind,
            &self.namespace,
            name,
            json!({}),
            labels,
        )
        .await
    }

    /// Sets a label on an object of the scenario's kind.
    pub async fn label(&self, name: &str, key: &str, value: &str) {
        self.kind
            .api(&self.client, &self.namespace)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
            )
            .await
            .unwrap_or_else(|error| panic!("labelling {name}: {error}"));
    }

    /// Starts an operator watching the scenario's namespace for checks.
    pub async fn operator(&self) -> Operator {
        start_operator(&self.client, operator_config(&self.namespace)).await
    }

    /// Waits until object `name` of the scenario's kind has `status` and `reason`.
    pub async fn wait(&self, name: &str, status: &str, reason: &str) -> PreflightCondition {
        wait_for_condition(
            &self.client,
            &self.kind,
            &self.namespace,
            name,
            status,
            reason,
            self.patience,
        )
        .await
    }

    /// `namespace/name` of check `name`, as metrics label it.
    pub fn check(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }

    /// Deletes the kind and its objects.
    pub async fn remove(self) {
        self.kind.remove(&self.client).await;
    }
}

/// The operator's settings for a test: checks in `namespace`, no leader election, a small engine with a
/// compiled-check cache shared by the tests.
pub fn operator_config(namespace: &str) -> OperatorConfig {
    OperatorConfig {
        checks: CheckSelection {
            namespace: Some(namespace.to_owned()),
            label_selector: GATES_LABEL.to_owned(),
        },
        listen: "127.0.0.1:0".parse().unwrap(),
        leader_election: None,
        shard_ring: None,
        default_limits: Limits::default(),
        // Compiled checks are kept between tests and runs (the Python check takes seconds to compile);
        // copies of checks in parts are not, so that no test serves another's.
        engine: EngineConfig {
            max_concurrent_evaluations: 16,
            max_memory_bytes: 64 << 20,
            cache_dir: Some(preflight_test_support::compiled_cache_dir()),
            ..EngineConfig::default()
        },
        kept_components: None,
        registry: preflight_oci::RegistryOptions::default(),
        verify_keys: Vec::new(),
        oci_cache: None,
        watch_selector: None,
        kind_retry: Duration::from_secs(1),
        controller_name: "preflight".into(),
        instance: Some(format!("test-{namespace}")),
        shutdown_grace: Duration::from_secs(10),
        hold_at_admission: false,
    }
}

/// Starts an operator in this process. Its logs go to the test's output, filtered by `RUST_LOG`.
pub async fn start_operator(client: &Client, config: OperatorConfig) -> Operator {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    Operator::start(client.clone(), config)
        .await
        .expect("the operator starts")
}

/// The object's `Preflight` condition, read fresh from the API server.
pub async fn condition(
    client: &Client,
    kind: &TestKind,
    namespace: &str,
    name: &str,
) -> Option<PreflightCondition> {
    let object = kind.api(client, namespace).get(name).await.ok()?;
    condition_of(&object)
}

/// Waits until the object's condition has `status` and `reason`; returns it.
pub async fn wait_for_condition(
    client: &Client,
    kind: &TestKind,
    namespace: &str,
    name: &str,
    status: &str,
    reason: &str,
    timeout: Duration,
) -> PreflightCondition {
    eventually(
        &format!("{name} to be Preflight={status} ({reason})"),
        timeout,
        || async {
            condition(client, kind, namespace, name)
                .await
                .filter(|condition| condition.status == status && condition.reason == reason)
        },
    )
    .await
}

/// Sum of a metric family's samples whose labels contain every `label="value"` given, from the
/// Prometheus text the operator serves on /metrics.
pub async fn metric(operator: &Operator, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric_at(operator.address, name, labels).await
}

/// [`metric`] for an operator serving at `address` (a child process, for instance).
pub async fn metric_at(address: SocketAddr, name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = http_get_at(address, "/metrics").await;
    text.lines()
        .filter(|line| {
            line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
        })
        .filter(|line| {
            labels
                .iter()
                .all(|(key, value)| line.contains(&format!("{key}=\"{value}\"")))
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Evaluations of `check` (`namespace/name`) so far, all outcomes.
pub async fn evaluations(operator: &Operator, check: &str) -> u64 {
    metric(operator, "preflight_evaluations_total", &[("check", check)]).await as u64
}

/// GET on the operator's HTTP endpoints.
pub async fn http_get(operator: &Operator, path: &str) -> String {
    http_get_at(operator.address, path).await
}

/// GET `path` from `address` with a plain HTTP/1.0 request (no client crate needed).
pub async fn http_get_at(address: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("the operator listens");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: preflight\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        stream.read_to_string(&mut response),
    )
    .await
    .expect("the operator answers within 10 s")
    .unwrap();
    response
}

/// Applies the manifests `files` (paths from the repository root) into `namespace` as a user would, after
/// `rewrite`: their `preflight-system` namespace becomes `namespace`, cluster-scoped names get it as a suffix.
pub async fn apply_manifests(
    client: &Client,
    namespace: &str,
    files: &[&str],
    rewrite: impl Fn(String) -> String,
) {
    let root = preflight_test_support::workspace_root();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let text = rewrite(text.replace(
            "namespace: preflight-system",
            &format!("namespace: {namespace}"),
        ));
        for document in serde_norway::Deserializer::from_str(&text) {
            let document: serde_json::Value = serde::Deserialize::deserialize(document).unwrap();
            if !document.is_null() {
                apply(client, suffix_cluster_scoped_names(document, namespace)).await;
            }
        }
    }
}

/// Cluster-scoped names get the namespace as a suffix, so that tests never share them.
pub fn suffix_cluster_scoped_names(
    mut document: serde_json::Value,
    namespace: &str,
) -> serde_json::Value {
    if matches!(
        document["kind"].as_str(),
        Some("ClusterRole" | "ClusterRoleBinding")
    ) {
        let name = format!(
            "{}-{namespace}",
            document["metadata"]["name"].as_str().unwrap()
        );
        document["metadata"]["name"] = json!(name);
        if document["kind"] == "ClusterRoleBinding" {
            let role = format!(
                "{}-{namespace}",
                document["roleRef"]["name"].as_str().unwrap()
            );
            document["roleRef"]["name"] = json!(role);
        }
    }
    document
}

pub async fn apply(client: &Client, document: serde_json::Value) {
    apply_with(
        client,
        document,
        &PatchParams::apply("preflight-tests").force(),
    )
    .await;
}

pub async fn apply_with(client: &Client, document: serde_json::Value, params: &PatchParams) {
    let api_version = document["apiVersion"].as_str().unwrap().to_owned();
    let kind = document["kind"].as_str().unwrap().to_owned();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let gvk = kube::api::GroupVersionKind::gvk(group, version, &kind);
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let name = document["metadata"]["name"].as_str().unwrap().to_owned();
    let api: Api<kube::api::DynamicObject> = match document["metadata"]["namespace"].as_str() {
        Some(namespace) if capabilities.scope == kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        _ => Api::all_with(client.clone(), &resource),
    };
    api.patch(&name, params, &Patch::Apply(&document))
        .await
        .unwrap_or_else(|error| panic!("applying {kind} {name}: {error}"));
}

/// The sum of the API server's own `apiserver_request_total` samples whose label text `selects`.
pub async fn apiserver_requests(client: &Client, selects: impl Fn(&str) -> bool) -> f64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let metrics = client.request_text(request).await.unwrap();
    metrics
        .lines()
        .filter(|line| line.starts_with("apiserver_request_total{") && selects(line))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
