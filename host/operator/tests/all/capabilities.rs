//! Contract 0.2 end to end on the real control plane, with a real HTTP server on loopback standing in for
//! the external system: the request this project comes from ("a resource depends on something existing in
//! an external system; a check makes sure it is there, exposes its key, and otherwise says: not now, retry
//! in N minutes"), lookups under a grant, and a 0.1 check gating beside a 0.2 one. Traffic goes to
//! 127.0.0.1 only.

use crate::operator_support::{self, *};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use preflight_kube_harness::eventually;
use preflight_operator::OUTPUTS_ANNOTATION;
use preflight_test_support::{LoopbackServer, Reply, check_bytes};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The check's settings: ask `server` under `/dependencies/`, retry after `retry_seconds` without jitter.
fn external_dependency(server: &LoopbackServer, retry_seconds: u32) -> [(String, String); 2] {
    [
        (
            "config".to_owned(),
            json!({"endpoint": format!("{}/dependencies/", server.url()), "retryAfterSeconds": retry_seconds, "jitterPercent": 0})
                .to_string(),
        ),
        ("http".to_owned(), format!("allow: [\"{}\"]", server.url())),
    ]
}

/// Creates `object` (JSON of a `K`) in the scenario's namespace.
async fn create_in<K>(s: &Scenario, object: serde_json::Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(s.client.clone(), &s.namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

fn borrowed(data: &[(String, String)]) -> Vec<(&str, &str)> {
    data.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

async fn outputs(s: &Scenario, name: &str) -> Option<BTreeMap<String, String>> {
    let object = s.kind.api(&s.client, &s.namespace).get(name).await.ok()?;
    serde_json::from_str(object.annotations().get(OUTPUTS_ANNOTATION)?).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_there_requeues_after_the_checks_delay_then_the_key_appears_on_the_object() {
    let s = Scenario::new("external", "Tenant", "external-dependency").await;
    // No caching: every evaluation is one request, so the request times are the evaluation times.
    let server = LoopbackServer::start(|_| Reply::new(404, "not there"));
    s.put("deps", &borrowed(&external_dependency(&server, 2)))
        .await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "shop",
        json!({"dependency": "db"}),
        &[],
    )
    .await;
    let operator = s.operator().await;

    let condition = s.wait("shop", "False", "DependencyMissing").await;
    assert!(
        condition.message.contains("db does not exist yet"),
        "{}",
        condition.message
    );
    let times = Arc::new(Mutex::new(Vec::new()));
    server.set_route({
        let times = Arc::clone(&times);
        move |_| {
            times.lock().unwrap().push(Instant::now());
            Reply::new(404, "not there")
        }
    });
    eventually(
        "three more evaluations",
        Duration::from_secs(20),
        || async { (times.lock().unwrap().len() >= 3).then_some(()) },
    )
    .await;
    let times = times.lock().unwrap().clone();
    for pair in times.windows(2) {
        let interval = pair[1] - pair[0];
        assert!(
            interval >= Duration::from_millis(1900) && interval < Duration::from_secs(4),
            "re-checked after the check's 2 s delay and not before: {interval:?}"
        );
    }
    assert_eq!(
        outputs(&s, "shop").await,
        None,
        "no key while it is missing"
    );

    server.set_route(|path| match path {
        "/dependencies/db" => Reply::new(200, r#"{"key":"K-7"}"#),
        _ => Reply::new(404, ""),
    });
    s.wait("shop", "True", "DependencyAvailable").await;
    let key = eventually("the key on the object", Duration::from_secs(10), || async {
        outputs(&s, "shop").await
    })
    .await;
    assert_eq!(key["dependencyKey"], "K-7");

    // Converged: nothing more is written. The counter moves once a reconcile's writes have returned, a little
    // after the object shows them: let that reconcile finish before the first reading.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes = metric(&operator, "preflight_status_writes_total", &[]).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        metric(&operator, "preflight_status_writes_total", &[]).await,
        writes
    );
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_waiting_objects_cost_the_external_system_one_request_per_freshness_period() {
    const OBJECTS: usize = 500;
    let s = Scenario::new("many", "Workspace", "external-dependency").await;
    let server =
        LoopbackServer::start(|_| Reply::new(404, "").header("cache-control", "max-age=3"));
    s.put("deps", &borrowed(&external_dependency(&server, 2)))
        .await;
    let api = s.kind.api(&s.client, &s.namespace);
    for chunk in (0..OBJECTS).collect::<Vec<_>>().chunks(50) {
        let creates = chunk.iter().map(|i| {
            let (client, kind, namespace) = (&s.client, &s.kind, &s.namespace);
            async move {
                create_object(
                    client,
                    kind,
                    namespace,
                    &format!("w{i}"),
                    json!({"dependency": "db"}),
                    &[],
                )
                .await
            }
        });
        futures::future::join_all(creates).await;
    }
    let operator = s.operator().await;
    let check = s.check("deps");
    let started = Instant::now();
    let all_waiting = || async {
        let list = api.list(&Default::default()).await.ok()?;
        let waiting = list
            .items
            .iter()
            .filter(|object| {
                preflight_operator::condition_of(object)
                    .is_some_and(|condition| condition.reason == "DependencyMissing")
            })
            .count();
        (waiting == OBJECTS).then_some(())
    };
    eventually(
        "every object waiting",
        Duration::from_secs(120),
        all_waiting,
    )
    .await;

    // Three requeue rounds of every object (2 s each) after they all wait.
    let evaluated = evaluations(&operator, &check).await;
    eventually(
        "three more requeue rounds",
        Duration::from_secs(60),
        || async {
            (evaluations(&operator, &check).await >= evaluated + 3 * OBJECTS as u64).then_some(())
        },
    )
    .await;
    let elapsed = started.elapsed();
    let requests = server.request_count();
    let rounds = evaluations(&operator, &check).await;
    eprintln!(
        "{OBJECTS} waiting objects, {rounds} evaluations in {elapsed:?}: {requests} requests to the external system"
    );
    let bound = (elapsed.as_secs_f64() / 3.0).ceil() as usize + 1;
    assert!(
        requests <= bound,
        "{requests} requests in {elapsed:?}: at most one per 3 s freshness period ({bound})"
    );

    server
        .set_route(|_| Reply::new(200, r#"{"key":"K-500"}"#).header("cache-control", "max-age=3"));
    let all_proceed = || async {
        let list = api.list(&Default::default()).await.ok()?;
        let done = list
            .items
            .iter()
            .filter(|object| {
                let proceeds = preflight_operator::condition_of(object)
                    .is_some_and(|condition| condition.status == "True");
                let keyed = object
                    .annotations()
                    .get(OUTPUTS_ANNOTATION)
                    .is_some_and(|text| text.contains("K-500"));
                proceeds && keyed
            })
            .count();
        (done == OBJECTS).then_some(())
    };
    eventually(
        "every object proceeding with its key",
        Duration::from_secs(120),
        all_proceed,
    )
    .await;
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_1_check_and_a_0_2_check_gate_the_same_kind() {
    let s = Scenario::new("mixed", "Database", "external-dependency").await;
    let server = LoopbackServer::start(|_| Reply::new(200, r#"{"key":"K-1"}"#));
    s.put("deps", &borrowed(&external_dependency(&server, 2)))
        .await;
    put_check(
        &s.client,
        &s.namespace,
        "legacy",
        &s.kind.gates(),
        &check_bytes("frozen-contract-v0-1"),
        &[("config", r#"{"available": ["db"]}"#), ("order", "1")],
    )
    .await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "ready",
        json!({"dependency": "db"}),
        &[],
    )
    .await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "blocked",
        json!({"dependency": "queue"}),
        &[],
    )
    .await;
    let operator = s.operator().await;
    s.wait("ready", "True", "AllChecksPassed").await;
    let blocked = s.wait("blocked", "False", "Missing").await;
    assert!(
        blocked.message.contains("legacy: blocked needs queue"),
        "{}",
        blocked.message
    );
    let key = eventually("the 0.2 check's key", Duration::from_secs(10), || async {
        outputs(&s, "ready").await
    })
    .await;
    assert_eq!(key["dependencyKey"], "K-1");
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_and_lookups_reach_the_condition_without_the_data() {
    let s = Scenario::new("refuse", "Cache", "misbehave").await;
    let server = LoopbackServer::start(|_| Reply::new(200, "fine"));
    let other = LoopbackServer::start(|_| Reply::new(200, "private"));
    let fetch = json!({"mode": "fetch", "urls": [format!("{}/ok", server.url()), format!("{}/x", other.url())]});
    s.put(
        "reach",
        &[
            ("config", &fetch.to_string()),
            ("http", &format!("allow: [\"{}\"]", server.url())),
        ],
    )
    .await;
    s.create("c1", &[]).await;
    let operator = s.operator().await;
    let condition = s.wait("c1", "True", "Fetched").await;
    assert!(
        condition.message.contains("200 fine"),
        "{}",
        condition.message
    );
    assert!(
        condition.message.contains("HttpRequestDenied") && !condition.message.contains("private"),
        "{}",
        condition.message
    );
    assert_eq!(other.request_count(), 0);

    // A lookup of a kind not granted, of a Secret not listed, across namespaces without cluster scope.
    create_in::<ConfigMap>(
        &s,
        json!({"metadata": {"name": "db-endpoint"}, "data": {"host": "db"}}),
    )
    .await;
    create_in::<Secret>(
        &s,
        json!({"metadata": {"name": "token"}, "stringData": {"t": "s3cret"}}),
    )
    .await;
    let lookups = "kinds: [v1/ConfigMap]\nsecrets: [other-secret]";
    let cases = [
        (
            json!(["v1", "ConfigMap", "", "db-endpoint"]),
            "LookedUp",
            "\"host\"",
        ),
        (
            json!(["v1", "Service", "", "x"]),
            "LookupFailed",
            "v1/Service is not granted",
        ),
        (
            json!(["v1", "Secret", "", "token"]),
            "LookupFailed",
            "is not granted to this check (lookups.secrets",
        ),
        (
            json!(["v1", "ConfigMap", "kube-system", "x"]),
            "LookupFailed",
            "beyond the gated object's namespace",
        ),
    ];
    for (lookup, reason, says) in cases {
        let config = json!({"mode": "lookup", "lookup": lookup}).to_string();
        s.put("reach", &[("config", &config), ("lookups", lookups)])
            .await;
        let status = if reason == "LookedUp" {
            "True"
        } else {
            "False"
        };
        let found = eventually(&format!("{lookup} to say {says:?}"), SOON, || async {
            operator_support::condition(&s.client, &s.kind, &s.namespace, "c1")
                .await
                .filter(|condition| {
                    (condition.status.as_str(), condition.reason.as_str()) == (status, reason)
                        && condition.message.contains(says)
                })
        })
        .await;
        assert!(!found.message.contains("s3cret"), "{}", found.message);
    }
    operator.stop().await;
    s.remove().await;
}

/// A user reading `kubectl describe` learns why the host refused a request: a name that resolves into a private
/// network tells apart from a destination not in the allow-list, in the condition itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_says_why_in_the_condition() {
    let s = Scenario::new("why", "Tenant", "external-dependency").await;
    let server = LoopbackServer::start(|_| Reply::new(404, "not there"));
    let port = server.url().rsplit(':').next().unwrap().to_owned();
    let by_name = format!("http://localhost:{port}");
    let settings = |allow: &str| {
        [
            (
                "config".to_owned(),
                json!({"endpoint": format!("{by_name}/dependencies/"), "retryAfterSeconds": 2, "jitterPercent": 0})
                    .to_string(),
            ),
            ("http".to_owned(), format!("allow: [\"{allow}\"]")),
        ]
    };
    s.put("deps", &borrowed(&settings(&by_name))).await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "shop",
        json!({"dependency": "db"}),
        &[],
    )
    .await;
    let operator = s.operator().await;
    let says = |needle: &'static str| {
        let s = &s;
        async move {
            eventually(
                &format!("the condition to say {needle:?}"),
                SOON,
                || async {
                    operator_support::condition(&s.client, &s.kind, &s.namespace, "shop")
                        .await
                        .filter(|condition| {
                            condition.status == "False" && condition.message.contains(needle)
                        })
                },
            )
            .await
        }
    };
    // Allowed by name, but the name resolves to loopback: a private network the grant does not open.
    let private = says("[refused by the host: HTTP GET http://localhost:").await;
    assert!(
        private.message.contains("is a loopback address")
            && private.message.contains("allowPrivateNetworks"),
        "{}",
        private.message
    );
    // Not allowed at all: the allow-list names another origin.
    s.put("deps", &borrowed(&settings("http://127.0.0.1:9")))
        .await;
    let denied = says("is not in the check's allow-list]").await;
    assert!(!denied.message.contains("loopback"), "{}", denied.message);
    assert_eq!(server.request_count(), 0);
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_the_check_rejects_is_reported_and_the_last_good_version_kept() {
    let s = Scenario::new("validate", "Queue", "external-dependency").await;
    let server = LoopbackServer::start(|_| Reply::new(200, r#"{"key":"K-2"}"#));
    let good = external_dependency(&server, 2);
    s.put("deps", &borrowed(&good)).await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "q1",
        json!({"dependency": "db"}),
        &[],
    )
    .await;
    let operator = s.operator().await;
    s.wait("q1", "True", "DependencyAvailable").await;

    let bad = [
        ("config", r#"{"endpoint": "ftp://nowhere/"}"#),
        ("http", good[1].1.as_str()),
    ];
    s.put("deps", &bad).await;
    let rejected = event(&s.client, &s.namespace, "CheckRejected").await;
    let note = rejected.note.unwrap_or_default();
    assert!(
        note.contains("must be an http:// or https:// URL"),
        "{note}"
    );
    assert!(
        note.contains("the last good version keeps serving"),
        "{note}"
    );
    assert_eq!(
        metric(
            &operator,
            "preflight_check_load_failures_total",
            &[("check", &s.check("deps")), ("cause", "configuration")]
        )
        .await,
        1.0
    );
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "q2",
        json!({"dependency": "db"}),
        &[],
    )
    .await;
    s.wait("q2", "True", "DependencyAvailable").await;
    operator.stop().await;
    s.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_come_from_the_named_secret_and_never_reach_the_object() {
    let s = Scenario::new("creds", "Bucket", "external-dependency").await;
    let server = LoopbackServer::start(|_| Reply::new(200, r#"{"key":"K-9"}"#));
    let [config, _] = external_dependency(&server, 2);
    let http = format!(
        "allow: [\"{}\"]\ncredentials: {{secret: deps-token, key: token, prefix: \"Bearer \"}}",
        server.url()
    );
    s.put(
        "deps",
        &[(config.0.as_str(), config.1.as_str()), ("http", &http)],
    )
    .await;
    create_object(
        &s.client,
        &s.kind,
        &s.namespace,
        "b1",
        json!({"dependency": "db"}),
        &[],
    )
    .await;
    let operator = s.operator().await;
    // The Secret comes after its check (as `kubectl apply -f dir/` orders them by file name): the check is
    // rejected, then loaded by itself once the Secret exists, without touching its ConfigMap.
    let missing = format!("Secret {}/deps-token does not exist", s.namespace);
    let rejected = event_noting(&s.client, &s.namespace, "CheckRejected", &missing).await;
    let note = rejected.note.unwrap_or_default();
    assert!(
        note.ends_with("loaded again by itself (after 5 s, doubling up to 300 s)"),
        "{note}"
    );
    create_in::<Secret>(
        &s,
        json!({"metadata": {"name": "deps-token"}, "stringData": {"token": "s3cret"}}),
    )
    .await;
    let condition = s.wait("b1", "True", "DependencyAvailable").await;
    assert_eq!(
        server.requests()[0].headers["authorization"],
        "Bearer s3cret"
    );
    let object = s.kind.api(&s.client, &s.namespace).get("b1").await.unwrap();
    assert!(!serde_json::to_string(&object).unwrap().contains("s3cret"));
    assert!(!condition.message.contains("s3cret"));
    operator.stop().await;
    s.remove().await;
}
