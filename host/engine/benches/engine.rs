//! A Rust check as a compiled-in hook, through the engine four ways, and behind a loopback webhook, on
//! realistic custom resources of 1, 4 and 64 KiB, in one run: latency p50/p99, the p50 ratio to the native
//! hook, and checks per second with 64 in flight. The contenders:
//!
//! - **native**: the check's crate called as a Rust function on the object's JSON (it parses the whole
//!   object into its types): what a compiled-in hook costs;
//! - **engine, whole object**: a fresh instance per evaluation, the whole object sent (as for a check that
//!   declares nothing);
//! - **engine, projected**: a fresh instance, only what the check declared it reads (`spec.dependsOn`),
//!   projected per evaluation from the parsed object the host already holds (the operator's case);
//! - **engine, reuse** and **engine, projected + reuse**: `isolation: reuse` (100 uses per instance);
//! - **webhook**: the same native check behind an axum server in this process, called by a keep-alive hyper
//!   client that POSTs the object and decodes the JSON answer: what a loopback webhook costs (Cluster API
//!   runtime hooks, Metacontroller).
//!
//! A last row gives the floor: a check that reads nothing on a minimal object, i.e. what a fresh instance
//! costs by itself. A summary compares the figures with the goals of docs/performance.md.
//!
//! Everything is measured in the same run and interleaved: each row alternates short blocks of every
//! contender (and of their throughput), so that all see the same machine; each block starts with a tenth as
//! many unrecorded runs. Ratios are medians, over blocks, of one contender's p50 divided by another's in the
//! same round. This project's VM switches between a fast and a slow phase (about 1.7x apart, for tens of
//! milliseconds to seconds; docs/performance.md), so measuring one after the other, or dividing whole-row
//! percentiles, would mostly measure which phase each side happened to run in. Latency is timed inside a
//! task on the runtime, where the operator's reconciles run (the webhook's client and server are tasks too).
//!
//! Run: `cargo bench -p preflight-engine --bench engine` (set `BENCH_SAMPLES` to change the sample count).

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use preflight_engine::{Check, Engine, EngineConfig, Isolation, Limits, Request, Target};
use preflight_test_support::check_bytes;
use serde_json::{Value, json};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

const CONFIG: &str = r#"{"available":["postgres-main","redis"],"retryAfterSeconds":600}"#;
const IN_FLIGHT: u32 = 64;
/// Blocks per row: the contenders take turns this many times.
const ROUNDS: u32 = 50;
/// A reused instance serves this many evaluations (the ConfigMap's default).
const MAX_USES: u32 = Isolation::DEFAULT_MAX_USES;

/// One evaluation by one contender, as a task can run it.
type Once = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The native hook: the check's crate called on the object's JSON.
type Native = Arc<dyn Fn() + Send + Sync>;

fn main() {
    let samples: u32 = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let check = engine.load(&check_bytes("dependency-ready")).unwrap();
    let trivial = engine.load(&check_bytes("misbehave")).unwrap();
    let webhook = runtime.block_on(Webhook::start());
    println!(
        "check: plugins/dependency-ready ({} bytes, reads {:?}), {samples} samples per contender and object \
         in {ROUNDS} interleaved blocks, {IN_FLIGHT} in flight, reuse: {MAX_USES} uses per instance",
        check.info().size,
        check.info().reads.as_deref().unwrap_or_default()
    );
    println!(
        "| object | contender | p50 | p99 | p50 ÷ native p50 (paired) | checks/s ({IN_FLIGHT} in flight; native: 2 threads) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut goals = Vec::new();
    for kib in [1, 4, 64] {
        let text = realistic_object(kib << 10);
        let object: Value = serde_json::from_str(&text).unwrap();
        let contenders = [
            (
                "engine, whole object",
                engine_contender(&engine, &check, &object, false, Isolation::Fresh),
            ),
            (
                "engine, projected",
                engine_contender(&engine, &check, &object, true, Isolation::Fresh),
            ),
            (
                "engine, reuse",
                engine_contender(&engine, &check, &object, false, reuse()),
            ),
            (
                "engine, projected + reuse",
                engine_contender(&engine, &check, &object, true, reuse()),
            ),
            (
                "webhook (axum + hyper, keep-alive)",
                webhook.contender(&text),
            ),
        ];
        let native = native_hook(&text);
        let rows = if kib == 64 { samples / 4 } else { samples };
        let row = measure(&runtime, Some(&native), &contenders, rows);
        let label = format!("{kib} KiB ({} B)", text.len());
        row.print(&label, &contenders);
        if kib == 4 {
            goals = row.goals();
        }
    }
    let minimal = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#;
    let floor = [(
        "floor: a check that reads nothing, fresh instance",
        engine_contender(
            &engine,
            &trivial,
            &serde_json::from_str(minimal).unwrap(),
            false,
            Isolation::Fresh,
        ),
    )];
    let row = measure(&runtime, None, &floor, samples);
    row.print(&format!("{} B", minimal.len()), &floor);
    println!();
    println!("| goal (4 KiB, same run) | measured | goal |");
    println!("| --- | --- | --- |");
    for (figure, measured, goal) in goals {
        println!("| {figure} | {measured:.2} | {goal} |");
    }
}

fn reuse() -> Isolation {
    Isolation::Reuse { max_uses: MAX_USES }
}

/// Evaluations of `check` on `object` through the engine: the whole object, or its projection made per
/// evaluation from the parsed object (as the operator does).
fn engine_contender(
    engine: &Arc<Engine>,
    check: &Arc<Check>,
    object: &Value,
    projected: bool,
    isolation: Isolation,
) -> Once {
    let (engine, check) = (Arc::clone(engine), Arc::clone(check));
    let object = Arc::new(object.clone());
    let whole = Arc::new(object.to_string());
    let target = Target::of_object(&object);
    let limits = Limits {
        isolation,
        ..Limits::default()
    };
    // The first answer proves the contender runs the check.
    let once: Once = Arc::new(move || {
        let (engine, check, object, whole, target) = (
            Arc::clone(&engine),
            Arc::clone(&check),
            Arc::clone(&object),
            Arc::clone(&whole),
            target.clone(),
        );
        Box::pin(async move {
            let request = Request {
                object: if projected {
                    check.input(&object)
                } else {
                    String::clone(&whole)
                },
                config: CONFIG.to_owned(),
                target,
                now: SystemTime::now(),
            };
            let evaluation = engine.evaluate(&check, &request, &limits).await;
            black_box(evaluation.outcome.expect("the check runs on the fixture"));
        })
    });
    once
}

fn native_hook(text: &str) -> Native {
    let text = text.to_owned();
    assert_eq!(
        guest_target(&Target::of_object(&serde_json::from_str(&text).unwrap())),
        fixture_target()
    );
    Arc::new(move || {
        let outcome = preflight_guest::testing::evaluate_target(
            dependency_ready::check,
            black_box(&text),
            CONFIG,
            fixture_target(),
            SystemTime::now(),
        );
        assert!(
            outcome.is_proceed(),
            "the native check proceeds on the fixture"
        );
    })
}

/// The same native check behind HTTP on a loopback port, and a keep-alive client for it.
struct Webhook {
    client: Client<HttpConnector, Full<Bytes>>,
    url: hyper::Uri,
}

impl Webhook {
    /// Serves `POST /check` (body: the object; answer: the verdict as JSON) on a loopback port.
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/check", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let router = axum::Router::new().route("/check", axum::routing::post(answer));
        tokio::spawn(async move { axum::serve(listener, router).await });
        let client = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(IN_FLIGHT as usize)
            .build_http();
        Self { client, url }
    }

    fn contender(&self, object: &str) -> Once {
        let (client, url) = (self.client.clone(), self.url.clone());
        let body = Bytes::from(object.to_owned());
        Arc::new(move || {
            let request = hyper::Request::post(url.clone())
                .header("content-type", "application/json")
                .body(Full::new(body.clone()))
                .unwrap();
            let sent = client.request(request);
            Box::pin(async move {
                let response = sent.await.expect("the webhook answers");
                let body = response.into_body().collect().await.unwrap().to_bytes();
                let answer: WebhookAnswer = serde_json::from_slice(&body).unwrap();
                assert!(answer.proceed, "the webhook proceeds on the fixture");
                black_box((answer.requeue_after_seconds, answer.reason, answer.message));
            })
        })
    }
}

/// What the webhook answers, as its caller decodes it.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookAnswer {
    proceed: bool,
    requeue_after_seconds: Option<u64>,
    reason: String,
    message: String,
}

/// The webhook: the native hook's work on the posted object (the identity given, as to the native hook and
/// the component: every fixture object is `apps.example.com/v1` App `shop/checkout`).
async fn answer(body: Bytes) -> ([(&'static str, &'static str); 1], Vec<u8>) {
    let object = std::str::from_utf8(&body).unwrap_or_default();
    let outcome = preflight_guest::testing::evaluate_target(
        dependency_ready::check,
        object,
        CONFIG,
        fixture_target(),
        SystemTime::now(),
    );
    let answer = json!({
        "proceed": outcome.is_proceed(),
        "requeueAfterSeconds": outcome.delay().map(|delay| delay.as_secs()),
        "reason": outcome.reason(),
        "message": outcome.message(),
    });
    (
        [("content-type", "application/json")],
        serde_json::to_vec(&answer).unwrap(),
    )
}

/// What one row measured: per contender, latency and rate; per round, each side's p50.
struct Row {
    native: Option<(Histogram<u64>, Vec<f64>, f64)>,
    contenders: Vec<(Histogram<u64>, Vec<f64>, f64)>,
}

impl Row {
    /// Median over rounds of `a`'s p50 divided by `b`'s p50 in the same round.
    fn paired(a: &[f64], b: &[f64]) -> f64 {
        let mut ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
        ratios.sort_by(f64::total_cmp);
        ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN)
    }

    fn print(&self, label: &str, contenders: &[(&str, Once)]) {
        if let Some((latency, _, rate)) = &self.native {
            println!(
                "| {label} | native (compiled-in hook, parses the whole object) | {:.2?} | {:.2?} | 1.0x | {rate:.0} |",
                p(latency, 0.5),
                p(latency, 0.99),
            );
        }
        for ((name, _), (latency, p50s, rate)) in contenders.iter().zip(&self.contenders) {
            let ratio = self
                .native
                .as_ref()
                .map_or(String::new(), |(_, native, _)| {
                    format!("{:.2}x", Self::paired(p50s, native))
                });
            println!(
                "| {label} | {name} | {:.2?} | {:.2?} | {ratio} | {rate:.0} |",
                p(latency, 0.5),
                p(latency, 0.99),
            );
        }
    }

    /// The goals of docs/performance.md that this row (4 KiB) answers: figure, measured, goal.
    fn goals(&self) -> Vec<(&'static str, f64, &'static str)> {
        let native = &self
            .native
            .as_ref()
            .expect("the 4 KiB row has a native baseline")
            .1;
        let [whole, projected, reuse, projected_reuse, webhook] = &self.contenders[..] else {
            unreachable!("five contenders per object")
        };
        vec![
            (
                "engine, projected, p50 ÷ native p50",
                Self::paired(&projected.1, native),
                "≤ 1.0",
            ),
            (
                "engine, projected + reuse, p50 ÷ native p50",
                Self::paired(&projected_reuse.1, native),
                "≤ 1.0",
            ),
            (
                "engine, whole object, p50 ÷ native p50",
                Self::paired(&whole.1, native),
                "≤ 3.0",
            ),
            (
                "engine, reuse, p50 ÷ native p50",
                Self::paired(&reuse.1, native),
                "≤ 1.5",
            ),
            (
                "webhook p50 ÷ engine (whole object) p50",
                Self::paired(&webhook.1, &whole.1),
                "≥ 10",
            ),
            (
                "engine checks/s ÷ webhook checks/s, 64 in flight",
                whole.2 / webhook.2,
                "≥ 1.5",
            ),
        ]
    }
}

/// `samples` latencies of each contender (and of `native`, when given) and their rates, in interleaved
/// blocks.
fn measure(
    runtime: &tokio::runtime::Runtime,
    native: Option<&Native>,
    contenders: &[(&str, Once)],
    samples: u32,
) -> Row {
    let block = (samples / ROUNDS).max(1);
    for (_, once) in contenders {
        runtime.block_on(once());
    }
    let mut native_row = native.map(|_| (histogram(), Vec::new(), 0.0));
    let mut rows: Vec<_> = contenders
        .iter()
        .map(|_| (histogram(), Vec::new(), 0.0))
        .collect();
    // Latency first, then throughput, each in alternating blocks: a latency block that followed 64
    // evaluations in flight would start on pool slots still queued for decommit.
    for _ in 0..ROUNDS {
        if let (Some(run), Some((latency, p50s, _))) = (native, native_row.as_mut()) {
            let mut timed = histogram();
            (0..block / 10).for_each(|_| run());
            for _ in 0..block {
                let started = Instant::now();
                run();
                timed.record(elapsed(started)).unwrap();
            }
            p50s.push(p(&timed, 0.5).as_secs_f64());
            latency.add(&timed).unwrap();
        }
        for ((_, once), (latency, p50s, _)) in contenders.iter().zip(&mut rows) {
            let once = Arc::clone(once);
            let timed = runtime
                .block_on(runtime.spawn(async move {
                    for _ in 0..block / 10 {
                        once().await;
                    }
                    let mut timed = histogram();
                    for _ in 0..block {
                        let started = Instant::now();
                        once().await;
                        timed.record(elapsed(started)).unwrap();
                    }
                    timed
                }))
                .unwrap();
            p50s.push(p(&timed, 0.5).as_secs_f64());
            latency.add(&timed).unwrap();
        }
    }
    let total = block * 4;
    let mut native_time = Duration::ZERO;
    let mut times = vec![Duration::ZERO; contenders.len()];
    for _ in 0..ROUNDS {
        if let Some(run) = native {
            let started = Instant::now();
            std::thread::scope(|scope| {
                for _ in 0..2 {
                    scope.spawn(|| (0..total / 2).for_each(|_| run()));
                }
            });
            native_time += started.elapsed();
        }
        for ((_, once), time) in contenders.iter().zip(&mut times) {
            *time += runtime.block_on(in_flight(once, total));
        }
    }
    let rate = |time: Duration| f64::from(total * ROUNDS) / time.as_secs_f64();
    if let Some((_, _, native_rate)) = native_row.as_mut() {
        *native_rate = rate(native_time);
    }
    for ((_, _, contender_rate), time) in rows.iter_mut().zip(times) {
        *contender_rate = rate(time);
    }
    Row {
        native: native_row,
        contenders: rows,
    }
}

/// The wall time of `total` runs of `once` with [`IN_FLIGHT`] tasks pulling from a shared counter.
async fn in_flight(once: &Once, total: u32) -> Duration {
    let remaining = Arc::new(AtomicU32::new(total));
    let started = Instant::now();
    let tasks: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (once, remaining) = (Arc::clone(once), Arc::clone(&remaining));
            tokio::spawn(async move {
                while remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                        left.checked_sub(1)
                    })
                    .is_ok()
                {
                    once().await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

/// The identity of every fixture object (`realistic_object`).
fn fixture_target() -> preflight_guest::Target {
    preflight_guest::Target {
        group: "apps.example.com".to_owned(),
        version: "v1".to_owned(),
        kind: "App".to_owned(),
        namespace: Some("shop".to_owned()),
        name: "checkout".to_owned(),
    }
}

fn guest_target(target: &Target) -> preflight_guest::Target {
    preflight_guest::Target {
        group: target.group.clone(),
        version: target.version.clone(),
        kind: target.kind.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
    }
}

fn elapsed(started: Instant) -> u64 {
    started.elapsed().as_nanos() as u64
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap()
}

fn p(histogram: &Histogram<u64>, quantile: f64) -> Duration {
    Duration::from_nanos(histogram.value_at_quantile(quantile))
}

/// A custom resource shaped like real ones (metadata with labels, annotations including a
/// last-applied-configuration, managedFields; a spec with a list of components; a status with conditions),
/// padded with spec components to about `bytes`.
fn realistic_object(bytes: usize) -> String {
    let component = |index: usize| {
        json!({
            "name": format!("component-{index}"),
            "image": format!("registry.example.com/shop/component-{index}:v1.{index}.0"),
            "replicas": 1 + index % 3,
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu-west-1"}],
        })
    };
    let mut object = json!({
        "apiVersion": "apps.example.com/v1",
        "kind": "App",
        "metadata": {
            "name": "checkout",
            "namespace": "shop",
            "uid": "6f1c1d2e-8a47-4d0b-9c55-1f2e3d4c5b6a",
            "resourceVersion": "184467",
            "generation": 7,
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"app.kubernetes.io/name": "checkout", "app.kubernetes.io/part-of": "shop", "team": "payments"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apps.example.com/v1\",\"kind\":\"App\",\"metadata\":{\"name\":\"checkout\",\"namespace\":\"shop\"},\"spec\":{\"dependsOn\":[\"postgres-main\"]}}"},
            "managedFields": [{"apiVersion": "apps.example.com/v1", "fieldsType": "FieldsV1", "manager": "kubectl", "operation": "Apply",
                "time": "2026-11-30T10:00:00Z", "fieldsV1": {"f:spec": {"f:dependsOn": {}, "f:components": {}}}}],
        },
        "spec": {"dependsOn": ["postgres-main", "redis"], "components": []},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "all components are running",
            "lastTransitionTime": "2026-11-30T10:05:00Z", "observedGeneration": 7}]},
    });
    let mut index = 0;
    while object.to_string().len() < bytes {
        object["spec"]["components"]
            .as_array_mut()
            .unwrap()
            .push(component(index));
        index += 1;
    }
    object.to_string()
}
