//! Fresh-instance evaluation of a Rust check through the engine, against the same check compiled as a native
//! Rust function, on realistic custom resources of 1, 4 and 64 KiB: latency p50/p99, their ratio, and checks
//! per second with 64 evaluations in flight. A last row gives the floor: a check that reads nothing, on a
//! minimal object, i.e. what a fresh instance costs by itself.
//!
//! Baseline and engine are measured in the same run and interleaved: each row alternates short blocks of
//! native and engine samples (and of native and engine throughput), so that both see the same machine; each block
//! starts with a tenth as many unrecorded runs, so that neither side is timed on caches the other left cold. The
//! ratio column is the median, over blocks, of the engine's p50 divided by the native p50 of the block just
//! after it. This project's VM switches between a fast and a slow phase (about 1.7x apart, both native and
//! wasm code, for tens of milliseconds to seconds; docs/performance.md), so measuring one after the other, or
//! dividing whole-row percentiles, would mostly measure which phase each side happened to run in.
//!
//! Run: `cargo bench -p preflight-engine --bench engine` (set `BENCH_SAMPLES` to change the sample count).

use hdrhistogram::Histogram;
use preflight_engine::{Check, Engine, EngineConfig, Limits, Request, Target};
use preflight_test_support::check_bytes;
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const CONFIG: &str = r#"{"available":["postgres-main","redis"],"retryAfterSeconds":600}"#;
const IN_FLIGHT: u32 = 64;
/// Blocks per row: native and engine alternate this many times.
const ROUNDS: u32 = 100;

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
    let trivial = engine.load(&check_bytes("misbehave")).unwrap();
    let bench = Bench {
        runtime,
        engine,
        limits: Limits::default(),
    };

    println!(
        "check: plugins/dependency-ready ({} bytes), {samples} samples per row in {ROUNDS} interleaved blocks, \
         {IN_FLIGHT} in flight",
        check.info().size
    );
    println!(
        "| object | native p50 | native p99 | engine p50 | engine p99 | p50 ratio (paired) | native /s (2 threads) | engine /s (64 in flight) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for kib in [1, 4, 64] {
        let object = realistic_object(kib << 10);
        let request = request(&object, CONFIG);
        let guest_target = guest_target(&request.target);
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
        let rows = if kib == 64 { samples / 4 } else { samples };
        let row = bench.row(&check, &request, rows, Some(&native));
        let (native_latency, native_rate) = row.native.expect("measured");
        println!(
            "| {kib} KiB ({} B) | {:.2?} | {:.2?} | {:.2?} | {:.2?} | {:.1}x | {:.0} | {:.0} |",
            object.len(),
            p(&native_latency, 0.5),
            p(&native_latency, 0.99),
            p(&row.engine_latency, 0.5),
            p(&row.engine_latency, 0.99),
            row.paired_ratio,
            native_rate,
            row.engine_rate,
        );
    }
    let minimal = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#;
    let row = bench.row(&trivial, &request(minimal, "{}"), samples, None);
    println!(
        "| floor: a check that reads nothing ({} B object) | | | {:.2?} | {:.2?} | | | {:.0} |",
        minimal.len(),
        p(&row.engine_latency, 0.5),
        p(&row.engine_latency, 0.99),
        row.engine_rate,
    );
}

/// What one row measures.
struct Row {
    native: Option<(Histogram<u64>, f64)>,
    engine_latency: Histogram<u64>,
    engine_rate: f64,
    /// Median over blocks of engine p50 / native p50 (NaN without a native baseline).
    paired_ratio: f64,
}

struct Bench {
    runtime: tokio::runtime::Runtime,
    engine: Arc<Engine>,
    limits: Limits,
}

impl Bench {
    /// `samples` latencies of the engine (and of `native`, when given) and their rates, in interleaved blocks.
    fn row(
        &self,
        check: &Arc<Check>,
        request: &Arc<Request>,
        samples: u32,
        native: Option<&(dyn Fn() + Sync)>,
    ) -> Row {
        let block = (samples / ROUNDS).max(1);
        let evaluate =
            || async { black_box(self.engine.evaluate(check, request, &self.limits).await) };
        self.runtime.block_on(async {
            let verdict = evaluate()
                .await
                .outcome
                .expect("the check runs on the fixture");
            assert!(verdict.proceed, "the component proceeds on the fixture");
        });
        // Latency first, then throughput, each in alternating native/engine blocks: a latency block that
        // followed 64 evaluations in flight would start on pool slots still queued for decommit.
        let mut native_latency = histogram();
        let mut engine_latency = histogram();
        let mut ratios = Vec::new();
        for _ in 0..ROUNDS {
            let mut engine_block = histogram();
            self.runtime.block_on(async {
                for _ in 0..block / 10 {
                    evaluate().await;
                }
                for _ in 0..block {
                    let started = Instant::now();
                    evaluate().await;
                    engine_block
                        .record(started.elapsed().as_nanos() as u64)
                        .unwrap();
                }
            });
            if let Some(run) = native {
                let mut native_block = histogram();
                (0..block / 10).for_each(|_| run());
                record(&mut native_block, block, run);
                ratios.push(
                    p(&engine_block, 0.5).as_secs_f64() / p(&native_block, 0.5).as_secs_f64(),
                );
                native_latency.add(&native_block).unwrap();
            }
            engine_latency.add(&engine_block).unwrap();
        }
        let mut native_time = Duration::ZERO;
        let mut engine_time = Duration::ZERO;
        for _ in 0..ROUNDS {
            engine_time += self
                .runtime
                .block_on(preflight_engine::measure::evaluations_in_flight(
                    &self.engine,
                    check,
                    request,
                    self.limits,
                    &preflight_engine::Grants::default(),
                    block * 4,
                    IN_FLIGHT,
                ));
            if let Some(run) = native {
                let started = Instant::now();
                std::thread::scope(|scope| {
                    for _ in 0..2 {
                        scope.spawn(|| (0..block * 2).for_each(|_| run()));
                    }
                });
                native_time += started.elapsed();
            }
        }
        let rate = |total: u32, time: Duration| f64::from(total) / time.as_secs_f64();
        Row {
            native: native.map(|_| (native_latency, rate(block * 4 * ROUNDS, native_time))),
            engine_latency,
            engine_rate: rate(block * 4 * ROUNDS, engine_time),
            paired_ratio: median(&mut ratios),
        }
    }
}

fn request(object: &str, config: &str) -> Arc<Request> {
    let value: serde_json::Value = serde_json::from_str(object).expect("fixtures are JSON");
    Arc::new(Request {
        object: object.to_owned(),
        config: config.to_owned(),
        target: Target::of_object(&value),
        now: SystemTime::now(),
    })
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

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap()
}

fn p(histogram: &Histogram<u64>, quantile: f64) -> Duration {
    Duration::from_nanos(histogram.value_at_quantile(quantile))
}

/// Records the latency of `count` runs of `run`.
fn record(histogram: &mut Histogram<u64>, count: u32, run: &(dyn Fn() + Sync)) {
    for _ in 0..count {
        let started = Instant::now();
        run();
        histogram
            .record(started.elapsed().as_nanos() as u64)
            .unwrap();
    }
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
