//! `preflight bench`: latency one at a time, then throughput with many in flight; a fresh instance per
//! evaluation unless `--reuse N`.

use super::{BenchArgs, EXIT_PROCEED, Format, Problem, oci};
use hdrhistogram::Histogram;

use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Evaluations that failed during the benchmark, per phase, and the first failure: a rate counted over
/// failures (timeouts, traps, exhausted memory) would measure how fast the check fails, not how fast it runs.
#[derive(Default)]
struct Failures {
    per_phase: Vec<(String, u32)>,
    first: Option<preflight_engine::Failure>,
}

impl Failures {
    fn count(&mut self, phase: &str, failure: Option<preflight_engine::Failure>) {
        let Some(failure) = failure else {
            return;
        };
        match self.per_phase.iter_mut().find(|(seen, _)| seen == phase) {
            Some((_, count)) => *count += 1,
            None => self.per_phase.push((phase.to_owned(), 1)),
        }
        self.first.get_or_insert(failure);
    }

    fn refuse_a_rate_made_of_them(&self) -> Result<(), Problem> {
        let Some(first) = &self.first else {
            return Ok(());
        };
        let phases: Vec<String> = self
            .per_phase
            .iter()
            .map(|(phase, count)| format!("{count} {phase}"))
            .collect();
        Err(Problem::CheckFailed(format!(
            "evaluations failed during the benchmark ({}; the first: {first}); no rate is reported \
             (raise --timeout or --memory-limit, or lower --concurrency)",
            phases.join(", ")
        )))
    }
}

pub async fn bench(args: BenchArgs) -> Result<u8, Problem> {
    let prepared = args.evaluate.prepare(
        args.concurrency,
        oci::read_check(&args.evaluate.check, &args.evaluate.registry).await?,
    )?;
    let check = prepared
        .engine
        .load(&prepared.bytes)
        .map_err(Problem::Unusable)?;
    let request = Arc::new(prepared.request(&check));
    let engine = Arc::new(prepared.engine);
    let limits = preflight_engine::Limits {
        isolation: args
            .reuse
            .map_or(preflight_engine::Isolation::Fresh, |max_uses| {
                preflight_engine::Isolation::Reuse { max_uses }
            }),
        ..prepared.limits
    };
    let grants = prepared.grants;

    let first = engine
        .evaluate_with(&check, &request, &limits, &grants)
        .await;
    let outcome = match &first.outcome {
        Ok(verdict) if verdict.proceed => "proceed".to_owned(),
        Ok(verdict) => format!("not proceed ({})", verdict.reason),
        Err(failure) => {
            return Err(Problem::CheckFailed(format!(
                "the check fails on this object: {failure}"
            )));
        }
    };
    let mut failures = Failures::default();
    for _ in 0..args.iterations / 10 {
        let evaluation = engine
            .evaluate_with(&check, &request, &limits, &grants)
            .await;
        failures.count("warm-up", evaluation.outcome.err());
    }
    let mut latency =
        Histogram::<u64>::new(3).map_err(|error| Problem::Input(error.to_string()))?;
    let sequential_start = Instant::now();
    for _ in 0..args.iterations {
        let started = Instant::now();
        let evaluation = engine
            .evaluate_with(&check, &request, &limits, &grants)
            .await;
        let _ = latency.record(started.elapsed().as_nanos() as u64);
        failures.count("one at a time", evaluation.outcome.err());
    }
    let sequential = sequential_start.elapsed();
    let in_flight = preflight_engine::measure::evaluations_in_flight(
        &engine,
        &check,
        &request,
        limits,
        &grants,
        args.iterations,
        args.concurrency,
    )
    .await;
    for _ in 0..in_flight.failed {
        failures.count(
            &format!("{} in flight", args.concurrency),
            in_flight.first_failure.clone(),
        );
    }
    failures.refuse_a_rate_made_of_them()?;
    let concurrent = in_flight.elapsed;

    let per_second = |elapsed: Duration| f64::from(args.iterations) / elapsed.as_secs_f64();
    let micros = |quantile: f64| latency.value_at_quantile(quantile) as f64 / 1000.0;
    match args.output {
        Format::Json => println!(
            "{:#}",
            json!({
                "sha256": check.digest().to_string(),
                "outcome": outcome,
                "iterations": args.iterations,
                "concurrency": args.concurrency,
                "reuse": args.reuse,
                "p50Us": micros(0.50),
                "p90Us": micros(0.90),
                "p99Us": micros(0.99),
                "maxUs": latency.max() as f64 / 1000.0,
                "sequentialPerSecond": per_second(sequential),
                "concurrentPerSecond": per_second(concurrent),
            })
        ),
        Format::Text => {
            println!("check        sha256:{} -> {outcome}", check.digest());
            println!(
                "latency      p50 {:.1} µs   p90 {:.1} µs   p99 {:.1} µs   max {:.1} µs   ({}, {} runs)",
                micros(0.50),
                micros(0.90),
                micros(0.99),
                latency.max() as f64 / 1000.0,
                args.reuse.map_or_else(
                    || "fresh instance each".to_owned(),
                    |uses| format!("instances reused {uses} times")
                ),
                args.iterations
            );
            println!(
                "throughput   {:.0} checks/s one at a time, {:.0} checks/s with {} in flight",
                per_second(sequential),
                per_second(concurrent),
                args.concurrency
            );
        }
    }
    Ok(EXIT_PROCEED)
}
