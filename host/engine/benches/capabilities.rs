//! What looking at the outside world costs an evaluation: the same check (tests/hostile-checks/misbehave)
//! doing nothing, and making one HTTP call answered by the per-check cache plus one lookup answered by an
//! in-memory cache (as the operator's watch caches answer), in the same run, in interleaved blocks. Prints
//! p50, p99 and checks/s with 64 in flight for each, and the paired p50 ratios (see benches/engine.rs for
//! why blocks are interleaved and ratios paired). Latency is measured in a task on the runtime, as the
//! operator runs its reconciles: wasmtime-wasi-http runs each request in a spawned task, which then runs on
//! the same worker; timed from outside the runtime (`block_on`), each request would also pay two wake-ups
//! of parked threads (measured: 120 µs instead of the figure in docs/performance.md).
//!
//! Run: `cargo bench -p preflight-engine --bench capabilities` (set `BENCH_SAMPLES` to change the count).

use hdrhistogram::Histogram;
use preflight_engine::{
    ClusterLookup, Engine, EngineConfig, Grants, HttpGrant, HttpPolicy, Limits, LookupFuture,
    ObjectKind, Request, Target, UrlPattern,
};
use preflight_test_support::{LoopbackServer, Reply, check_bytes};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const IN_FLIGHT: u32 = 64;
const ROUNDS: u32 = 50;

/// One ConfigMap, always there: what a synced watch cache answers.
struct InMemory(String);

impl ClusterLookup for InMemory {
    fn get<'a>(
        &'a self,
        _target: &'a Target,
        _kind: ObjectKind,
        _namespace: Option<String>,
        _name: String,
    ) -> LookupFuture<'a, Option<String>> {
        Box::pin(async { Ok(Some(self.0.clone())) })
    }

    fn list<'a>(
        &'a self,
        _target: &'a Target,
        _kind: ObjectKind,
        _namespace: Option<String>,
        _selector: String,
    ) -> LookupFuture<'a, Vec<String>> {
        Box::pin(async { Ok(vec![self.0.clone()]) })
    }
}

fn request(config: &str) -> Arc<Request> {
    Arc::new(Request {
        object: r#"{"apiVersion":"example.com/v1","kind":"App","metadata":{"name":"a","namespace":"d"},"spec":{"dependency":"db"}}"#.into(),
        config: config.into(),
        target: Target {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "App".into(),
            namespace: Some("d".into()),
            name: "a".into(),
        },
        now: SystemTime::now(),
    })
}

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
    let server = LoopbackServer::start(|_| {
        Reply::new(200, r#"{"key":"K-1"}"#).header("cache-control", "max-age=3600")
    });
    let engine = Arc::new(Engine::new(EngineConfig::default()).unwrap());
    let check = engine.load(&check_bytes("misbehave")).unwrap();
    let limits = Limits::default();
    let nothing: &'static _ =
        Box::leak(Box::new((request(r#"{"mode":"none"}"#), Grants::default())));
    let url = format!("{}/dependencies/db", server.url());
    let lookup = serde_json::json!(["v1", "ConfigMap", "", "db-endpoint"]);
    let policy = HttpPolicy::allowing(vec![UrlPattern::parse(&server.url()).unwrap()]);
    let grants = Grants {
        http: Some(Arc::new(HttpGrant::new(policy).unwrap())),
        cluster: Some(Arc::new(InMemory(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"db-endpoint"},"data":{"host":"db"}}"#.into(),
        ))),
        ..Grants::default()
    };
    let side = |config: serde_json::Value| -> &'static (Arc<Request>, Grants) {
        Box::leak(Box::new((request(&config.to_string()), grants.clone())))
    };
    let rows: [(&str, &'static (Arc<Request>, Grants)); 4] = [
        ("does nothing (baseline)", nothing),
        (
            "one cached lookup",
            side(serde_json::json!({"mode": "lookup", "lookup": lookup})),
        ),
        (
            "one cached HTTP call",
            side(serde_json::json!({"mode": "fetch", "urls": [url]})),
        ),
        (
            "one cached HTTP call + one cached lookup",
            side(serde_json::json!({"mode": "fetch", "urls": [url], "lookup": lookup})),
        ),
    ];
    let (shared_engine, shared_check) = (Arc::clone(&engine), Arc::clone(&check));
    let evaluate = move |side: &'static (Arc<Request>, Grants)| {
        let (engine, check) = (Arc::clone(&shared_engine), Arc::clone(&shared_check));
        async move {
            black_box(
                engine
                    .evaluate_with(&check, &side.0, &limits, &side.1)
                    .await,
            )
        }
    };
    runtime.block_on(async {
        let warm = evaluate(rows[3].1).await.outcome.expect("the check runs");
        assert!(
            warm.message.contains("200") && warm.message.contains("db"),
            "{}",
            warm.message
        );
    });

    let block = (samples / ROUNDS).max(1);
    let mut latency: Vec<Histogram<u64>> = rows.iter().map(|_| histogram()).collect();
    let mut ratios: Vec<Vec<f64>> = rows.iter().map(|_| Vec::new()).collect();
    let mut time = vec![Duration::ZERO; rows.len()];
    for _ in 0..ROUNDS {
        let blocks: Vec<Histogram<u64>> = rows
            .iter()
            .map(|&(_, side)| {
                let evaluate = evaluate.clone();
                // On a worker, as the operator's reconciles run: a host call's task then runs on the
                // same worker instead of waking a parked thread.
                let measured = runtime.spawn(timed(block, move || evaluate(side)));
                runtime.block_on(measured).expect("the measuring task ends")
            })
            .collect();
        for (row, measured) in blocks.iter().enumerate() {
            ratios[row].push(p(measured, 0.5).as_secs_f64() / p(&blocks[0], 0.5).as_secs_f64());
            latency[row].add(measured).unwrap();
        }
        for (row, (_, side)) in rows.iter().enumerate() {
            let in_flight = runtime.block_on(preflight_engine::measure::evaluations_in_flight(
                &engine,
                &check,
                &side.0,
                limits,
                &side.1,
                block * 4,
                IN_FLIGHT,
            ));
            assert_eq!(
                in_flight.failed, 0,
                "a rate made of failures measures nothing: {:?}",
                in_flight.first_failure
            );
            time[row] += in_flight.elapsed;
        }
    }
    let rate = |time: Duration| f64::from(block * 4 * ROUNDS) / time.as_secs_f64();
    println!(
        "check: tests/hostile-checks/misbehave ({} bytes), {} samples per row in {ROUNDS} interleaved blocks; \
         requests that reached the external system: {}",
        check.info().size,
        block * ROUNDS,
        server.request_count()
    );
    println!(
        "| evaluation | p50 | p99 | p50 ÷ baseline p50 (paired) | checks/s ({IN_FLIGHT} in flight) | baseline checks/s ÷ checks/s |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (row, (label, _)) in rows.iter().enumerate() {
        ratios[row].sort_by(f64::total_cmp);
        println!(
            "| {label} | {:.2?} | {:.2?} | {:.2}x | {:.0} | {:.2}x |",
            p(&latency[row], 0.5),
            p(&latency[row], 0.99),
            ratios[row][ratios[row].len() / 2],
            rate(time[row]),
            rate(time[0]) / rate(time[row]),
        );
    }
}

async fn timed<F, Fut>(count: u32, run: F) -> Histogram<u64>
where
    F: Fn() -> Fut + Send,
    Fut: std::future::Future + Send,
{
    let mut histogram = histogram();
    for _ in 0..count / 10 {
        run().await;
    }
    for _ in 0..count {
        let started = Instant::now();
        run().await;
        histogram
            .record(started.elapsed().as_nanos() as u64)
            .unwrap();
    }
    histogram
}

fn histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap()
}

fn p(histogram: &Histogram<u64>, quantile: f64) -> Duration {
    Duration::from_nanos(histogram.value_at_quantile(quantile))
}
