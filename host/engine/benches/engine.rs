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

mod fixtures;

use bytes::Bytes;
use fixtures::*;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use preflight_engine::{Engine, EngineConfig, Isolation};
use preflight_test_support::check_bytes;
use serde_json::{Value, json};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Blocks per row: the contenders take turns this many times.
const ROUNDS: u32 = 50;

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
                    format!("{:.2}x", paired(p50s, native))
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
                paired(&projected.1, native),
                "≤ 1.0",
            ),
            (
                "engine, projected + reuse, p50 ÷ native p50",
                paired(&projected_reuse.1, native),
                "≤ 1.0",
            ),
            (
                "engine, whole object, p50 ÷ native p50",
                paired(&whole.1, native),
                "≤ 3.0",
            ),
            (
                "engine, reuse, p50 ÷ native p50",
                paired(&reuse.1, native),
                "≤ 1.5",
            ),
            (
                "webhook p50 ÷ engine (whole object) p50",
                paired(&webhook.1, &whole.1),
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
            let timed = time_native(run, block);
            p50s.push(p(&timed, 0.5).as_secs_f64());
            latency.add(&timed).unwrap();
        }
        for ((_, once), (latency, p50s, _)) in contenders.iter().zip(&mut rows) {
            let timed = time_task(runtime, once, block);
            p50s.push(p(&timed, 0.5).as_secs_f64());
            latency.add(&timed).unwrap();
        }
    }
    let total = block * 4;
    let mut native_time = Duration::ZERO;
    let mut times = vec![Duration::ZERO; contenders.len()];
    for _ in 0..ROUNDS {
        if let Some(run) = native {
            native_time += on_two_threads(run, total);
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
