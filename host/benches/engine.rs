//! Fresh-instance evaluation of a Rust check through the engine, against the same check compiled as a native
//! Rust function, on realistic custom resources of 1, 4 and 64 KiB: latency p50/p99, their ratio, and checks
//! per second with 64 evaluations in flight. Baseline and engine are measured in the same run.
//!
//! Run: `cargo bench -p preflight --bench engine` (set `BENCH_SAMPLES` to change the sample count).

use hdrhistogram::Histogram;
use preflight::{Engine, EngineConfig, Limits, Request, Target};
use preflight_test_support::check_bytes;
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const CONFIG: &str = r#"{"available":["postgres-main","redis"],"retryAfterSeconds":600}"#;
const IN_FLIGHT: u32 = 64;

fn main() {
    let samples: u32 = std::env::var("BENCH_SAMPLES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let engine = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let check = engine.load(&check_bytes("dependency-ready")).unwrap();
    let limits = Limits::default();

    println!(
        "check: plugins/dependency-ready ({} bytes), {samples} samples per row, {IN_FLIGHT} in flight",
        check.info().size
    );
    println!(
        "| object | native p50 | native p99 | engine p50 | engine p99 | p50 ratio | native /s (2 threads) | engine /s (64 in flight) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for kib in [1, 4, 64] {
        let object = realistic_object(kib << 10);
        let target = Target {
            group: "apps.example.com".into(),
            version: "v1".into(),
            kind: "App".into(),
            namespace: Some("shop".into()),
            name: "checkout".into(),
        };
        let request = Arc::new(Request {
            object: object.clone(),
            config: CONFIG.into(),
            target: target.clone(),
            now: SystemTime::now(),
        });
        let rows = if kib == 64 { samples / 4 } else { samples };

        let guest_target = preflight_guest::Target {
            group: target.group.clone(),
            version: target.version.clone(),
            kind: target.kind.clone(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
        };
        let native = || {
            let outcome = preflight_guest::testing::evaluate_target(
                dependency_ready::check,
                black_box(&object),
                CONFIG,
                guest_target.clone(),
                SystemTime::now(),
            );
            assert!(
                outcome.is_proceed(),
                "the native check proceeds on the fixture"
            );
        };
        let native_latency = measure(rows, native);
        let native_rate = {
            let started = Instant::now();
            let per_thread = rows * 4;
            std::thread::scope(|scope| {
                for _ in 0..2 {
                    scope.spawn(|| (0..per_thread).for_each(|_| native()));
                }
            });
            f64::from(per_thread * 2) / started.elapsed().as_secs_f64()
        };

        let engine_latency = runtime.block_on(async {
            assert!(
                engine
                    .evaluate(&check, &request, &limits)
                    .await
                    .outcome
                    .unwrap()
                    .proceed,
                "the component proceeds on the fixture"
            );
            let mut histogram = histogram();
            for sample in 0..rows + rows / 10 {
                let started = Instant::now();
                black_box(engine.evaluate(&check, &request, &limits).await);
                if sample >= rows / 10 {
                    histogram
                        .record(started.elapsed().as_nanos() as u64)
                        .unwrap();
                }
            }
            histogram
        });
        let engine_total = rows * 4;
        let engine_elapsed = runtime.block_on(preflight::measure::evaluations_in_flight(
            &engine,
            &check,
            &request,
            limits,
            engine_total,
            IN_FLIGHT,
        ));
        let engine_rate = f64::from(engine_total) / engine_elapsed.as_secs_f64();

        let p = |histogram: &Histogram<u64>, quantile: f64| {
            Duration::from_nanos(histogram.value_at_quantile(quantile))
        };
        println!(
            "| {kib} KiB ({} B) | {:.2?} | {:.2?} | {:.2?} | {:.2?} | {:.1}x | {:.0} | {:.0} |",
            object.len(),
            p(&native_latency, 0.5),
            p(&native_latency, 0.99),
            p(&engine_latency, 0.5),
            p(&engine_latency, 0.99),
            p(&engine_latency, 0.5).as_secs_f64() / p(&native_latency, 0.5).as_secs_f64(),
            native_rate,
            engine_rate,
        );
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap()
}

/// Latency of `run` over `rows` samples after a tenth as many warm-up runs.
fn measure(rows: u32, run: impl Fn()) -> Histogram<u64> {
    (0..rows / 10).for_each(|_| run());
    let mut histogram = histogram();
    for _ in 0..rows {
        let started = Instant::now();
        run();
        histogram
            .record(started.elapsed().as_nanos() as u64)
            .unwrap();
    }
    histogram
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
