//! A real control plane for tests: a [`kube::Client`] for the kube-apiserver + etcd that
//! `tests/cluster/up` starts (building them on first use), plus the chores every operator test repeats:
//! registering CRDs and waiting until they are established, a namespace per test, and a client that
//! impersonates a ServiceAccount (to prove that RBAC rules are enough).
//!
//! Every wait is bounded; a failure says what was being waited for.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use preflight_test_support::workspace_root;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Runs a `tests/cluster` script and returns its standard output; panics with its error output on failure.
fn cluster_script(script: &str, args: &[&str]) -> String {
    let path = workspace_root().join("tests/cluster").join(script);
    let output = Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", path.display()));
    assert!(
        output.status.success(),
        "tests/cluster/{script} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Starts whatever part of the control plane is not running (idempotent) and returns the admin kubeconfig.
pub fn up() -> PathBuf {
    let stdout = cluster_script("up", &[]);
    let last = stdout.lines().last().unwrap_or_default();
    PathBuf::from(
        last.strip_prefix("KUBECONFIG=")
            .unwrap_or_else(|| panic!("tests/cluster/up printed no KUBECONFIG line: {stdout}")),
    )
}

/// The kubectl `tests/cluster/build` builds (the version of the test API server), to run the README's
/// commands as a user does.
pub fn kubectl() -> &'static Path {
    static KUBECTL: OnceLock<PathBuf> = OnceLock::new();
    KUBECTL.get_or_init(|| {
        let stdout = cluster_script("build", &[]);
        PathBuf::from(stdout.lines().last().unwrap_or_default())
    })
}

/// Stops kube-apiserver only (etcd and the data stay), to test recovery; [`up`] starts it again.
pub fn stop_apiserver() {
    cluster_script("down", &["--apiserver-only"]);
}

/// The admin kubeconfig, starting the control plane once per test process.
pub fn kubeconfig() -> &'static Path {
    static KUBECONFIG: OnceLock<PathBuf> = OnceLock::new();
    KUBECONFIG.get_or_init(up)
}

/// The admin's client configuration.
pub async fn admin_config() -> Config {
    let kubeconfig =
        Kubeconfig::read_from(kubeconfig()).expect("tests/cluster/up wrote a readable kubeconfig");
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the admin kubeconfig is valid")
}

/// A client with cluster-admin rights (group `system:masters`).
pub async fn admin_client() -> Client {
    Client::try_from(admin_config().await).expect("a client can be built from the admin kubeconfig")
}

/// The configuration of a client that acts as ServiceAccount `namespace/name`, with the groups the API server
/// gives service accounts.
pub async fn service_account_config(namespace: &str, name: &str) -> Config {
    let mut config = admin_config().await;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{name}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]);
    config
}

/// A client that acts as ServiceAccount `namespace/name` ([`service_account_config`]).
pub async fn client_as_service_account(namespace: &str, name: &str) -> Client {
    Client::try_from(service_account_config(namespace, name).await)
        .expect("an impersonating client can be built")
}

/// Creates a namespace whose name starts with `prefix` and is unique to this test run.
pub async fn test_namespace(client: &Client, prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let name = format!(
        "{prefix}-{}-{}-{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|error| panic!("creating namespace {name}: {error}"));
    name
}

/// Applies `crd` (server-side apply) and waits until the API server reports it Established.
pub async fn apply_crd(client: &Client, crd: serde_json::Value) -> CustomResourceDefinition {
    let crd: CustomResourceDefinition =
        serde_json::from_value(crd).expect("the CRD is well-formed");
    let name = crd.metadata.name.clone().expect("the CRD has a name");
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    api.patch(
        &name,
        &PatchParams::apply("preflight-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap_or_else(|error| panic!("applying CRD {name}: {error}"));
    eventually(
        &format!("CRD {name} to be established"),
        Duration::from_secs(30),
        || async {
            let crd = api.get(&name).await.ok()?;
            let established = crd
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(crd)
        },
    )
    .await
}

/// Polls `probe` every 100 ms until it returns `Some`, or panics naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
